// libFuzzer target for the bootstrap wire parser (src/bootstrap/wire.cc).
//
// The input is read as a stream of frames, as the store and the client read
// their sockets: parse, drop `consumed` bytes, repeat until NeedMore or
// Malformed. For every result it checks:
//   - consumed <= size; consumed is 0 unless Ok, and an Ok frame is at least a header;
//   - NeedMore asks for more than it was given, and never more than a frame can be;
//   - Malformed says why;
//   - an Ok frame re-encodes (with the wire encoders) to exactly the bytes it was
//     parsed from, carries no field its type does not have, and one byte less of
//     it is NeedMore;
//   - one parse never allocates more than kMaxFrameLen, nor more than its input
//     plus a small constant (error text) — measured with the sanitizer's malloc hooks.
// Any violation aborts, which libFuzzer reports with the input that caused it.
#include <sanitizer/allocator_interface.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bootstrap/wire.hpp"

namespace wire = dccl::boot::wire;
using wire::FrameType;
using wire::ParseStatus;

namespace {

// Bytes allocated while `armed` (the parser runs single-threaded under libFuzzer).
bool armed = false;
size_t allocated = 0;

void on_malloc(const volatile void*, size_t size) {
  if (armed) allocated += size;
}
void on_free(const volatile void*) {}

[[noreturn]] void fail(const char* what, size_t a = 0, size_t b = 0) {
  std::fprintf(stderr, "fuzz_wire: invariant violated: %s (%zu, %zu)\n", what, a, b);
  std::abort();
}
void check(bool ok, const char* what, size_t a = 0, size_t b = 0) {
  if (!ok) fail(what, a, b);
}

wire::ParseResult measured_parse(const uint8_t* p, size_t n) {
  allocated = 0;
  armed = true;
  wire::ParseResult r = wire::parse_frame(p, n);
  armed = false;
  // Error text is short; frame fields are copies of the input's bytes.
  constexpr size_t kSlack = 4096;
  check(allocated <= wire::kMaxFrameLen + kSlack, "allocated more than kMaxFrameLen", allocated, n);
  check(allocated <= n + kSlack, "allocated more than the input plus slack", allocated, n);
  return r;
}

std::string encode(const wire::Frame& f) {
  std::string out;
  switch (f.type) {
    case FrameType::Challenge: wire::append_challenge(out, f.nonce, f.version); break;
    case FrameType::Hello: {
      wire::append_hello(out, wire::hello_of(f));
      break;
    }
    case FrameType::Welcome: wire::append_welcome(out, f.proof, f.value, f.version); break;
    case FrameType::Refused: wire::append_refused(out, f.value); break;
    case FrameType::Set: wire::append_set(out, f.req, f.key, f.value); break;
    case FrameType::Get: wire::append_get(out, f.req, f.key); break;
    case FrameType::Del: wire::append_del(out, f.req, f.key); break;
    case FrameType::Value: wire::append_value(out, f.req, f.value); break;
    case FrameType::Ok: wire::append_ok(out, f.req); break;
    case FrameType::Error: wire::append_error(out, f.req, f.value); break;
    case FrameType::Lease: wire::append_lease(out, f.req, f.key, f.value); break;
    case FrameType::Unlease: wire::append_unlease(out, f.req); break;
    default: fail("parse_frame returned an unknown type", static_cast<size_t>(f.type));
  }
  return out;
}

// Fields a type does not carry stay at their defaults.
void check_unused_fields(const wire::Frame& f) {
  const bool has_key = f.type == FrameType::Set || f.type == FrameType::Get || f.type == FrameType::Del ||
                       f.type == FrameType::Lease;
  const bool has_value = f.type == FrameType::Set || f.type == FrameType::Value || f.type == FrameType::Lease ||
                         f.type == FrameType::Refused || f.type == FrameType::Error || f.type == FrameType::Welcome;
  const bool is_hello = f.type == FrameType::Hello;
  const bool has_req = !is_hello && f.type != FrameType::Welcome && f.type != FrameType::Refused &&
                       f.type != FrameType::Challenge;
  const bool has_nonce = is_hello || f.type == FrameType::Challenge;
  const bool has_proof = is_hello || f.type == FrameType::Welcome;
  check(has_key || f.key.empty(), "key set on a frame without one", static_cast<size_t>(f.type));
  check(has_value || f.value.empty(), "value set on a frame without one", static_cast<size_t>(f.type));
  check(has_req || f.req == 0, "req set on a frame without one", static_cast<size_t>(f.type));
  check(has_nonce || has_proof || f.version == 0, "version set", static_cast<size_t>(f.type));
  check(has_nonce || f.nonce == wire::Nonce{}, "nonce set", static_cast<size_t>(f.type));
  check(has_proof || f.proof == wire::Proof{}, "proof set", static_cast<size_t>(f.type));
  check(is_hello || (f.rank == 0 && f.nranks == 0), "rank set on a non-HELLO", static_cast<size_t>(f.type));
  if (is_hello) check(f.nranks >= 1 && f.rank >= 0 && f.rank < f.nranks, "HELLO rank out of range");
  check(is_hello || (f.flags == 0 && f.pid == 0 && f.ns.empty() && f.host.empty()), "HELLO fields set",
        static_cast<size_t>(f.type));
  check(f.ns.size() <= wire::kMaxNamespace && f.host.size() <= wire::kMaxHostName, "HELLO string over its bound");
  check(f.key.size() <= wire::kMaxKey, "key over the bound", f.key.size());
  check(f.value.size() <= wire::kMaxValue, "value over the bound", f.value.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t off = 0;
  for (;;) {
    const uint8_t* p = data + off;
    const size_t n = size - off;
    wire::ParseResult r = measured_parse(p, n);
    check(r.consumed <= n, "consumed more than the buffer", r.consumed, n);
    switch (r.status) {
      case ParseStatus::NeedMore:
        check(r.consumed == 0, "NeedMore consumed bytes", r.consumed);
        check(r.need > n, "NeedMore with enough bytes", r.need, n);
        check(r.need <= 4 + wire::kMaxFrameLen, "NeedMore asks for more than a frame", r.need);
        return 0;
      case ParseStatus::Malformed:
        check(r.consumed == 0, "Malformed consumed bytes", r.consumed);
        check(!r.error.empty(), "Malformed without a reason");
        check(n >= 4, "Malformed before the length was complete", n);
        return 0;
      case ParseStatus::Ok: break;
      default: fail("unknown parse status");
    }
    check(r.consumed >= wire::kHeaderBytes, "Ok frame shorter than a header", r.consumed);
    check(r.error.empty(), "Ok with an error text");
    check_unused_fields(r.frame);
    const std::string again = encode(r.frame);
    check(again.size() == r.consumed && again.compare(0, again.size(), reinterpret_cast<const char*>(p),
                                                      r.consumed) == 0,
          "re-encoded frame differs from its bytes", again.size(), r.consumed);
    wire::ParseResult shorter = measured_parse(p, r.consumed - 1);
    check(shorter.status == ParseStatus::NeedMore, "a strict prefix of a frame is not NeedMore", r.consumed);
    check(shorter.need <= r.consumed, "a prefix asks for more than the frame", shorter.need, r.consumed);
    off += r.consumed;
  }
}
