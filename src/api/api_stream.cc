// C API: streams.
#include "api/handles.hpp"
#include "core/config.hpp"

using namespace dccl;

extern "C" {

dcclResult_t dcclStreamCreate(dcclStream_t* stream) {
  return api::guard("dcclStreamCreate", [&] {
    if (!stream) core::raise(dcclInvalidArgument, "dcclStreamCreate: stream is NULL");
    *stream = new dcclStream;
    api::register_stream(*stream);
  });
}

dcclResult_t dcclStreamSynchronize(dcclStream_t stream) {
  return api::guard("dcclStreamSynchronize", [&] {
    sched::Stream* s = api::stream_of(stream, "dcclStreamSynchronize");
    if (s) s->synchronize(core::config().timeout_ms);
  });
}

dcclResult_t dcclStreamQuery(dcclStream_t stream) {
  bool idle = true;
  dcclResult_t r = api::guard("dcclStreamQuery", [&] {
    sched::Stream* s = api::stream_of(stream, "dcclStreamQuery");
    if (s) idle = s->query();
  });
  if (r != dcclSuccess) return r;
  return idle ? dcclSuccess : dcclInProgress;
}

dcclResult_t dcclStreamDestroy(dcclStream_t stream) {
  return api::guard("dcclStreamDestroy", [&] {
    if (!stream) core::raise(dcclInvalidArgument, "dcclStreamDestroy: stream is NULL");
    if (!api::unregister_stream(stream))
      core::raise(dcclInvalidUsage, "dcclStreamDestroy: stream is not a live stream (destroyed twice?)");
    if (stream->made.forked()) {  // its worker thread is the parent's: left as it is
      api::register_stream(stream);
      core::raise(dcclInvalidUsage, "dcclStreamDestroy: " + stream->made.fork_text("stream"));
    }
    delete stream;  // drains queued work first
  });
}

}  // extern "C"
