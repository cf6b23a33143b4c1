#include "api/group.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "api/handles.hpp"

namespace dccl::api {

namespace {
struct Pending {
  dcclComm* handle;
  comm::Communicator* comm;
  dcclStream* stream_handle;  // checked again at dcclGroupEnd: it may have been destroyed since
  sched::Stream* stream;
  sched::Op op;
};
thread_local int t_depth = 0;
thread_local std::vector<Pending> t_pending;
thread_local dcclResult_t t_refused_code = dcclSuccess;  // the group's first refused call
thread_local std::string t_refused_text;

// A group whose calls span several streams or communicators runs as one piece of
// work: every communicator's share at once (each on a thread of its own, so that
// ranks listing them in different orders still meet), after the work queued
// before it on every stream of the group, and before the work queued after it.
// The other streams wait at a join for it; the group runs on the caller's thread
// when the NULL stream is among them, else on its first stream.
struct Join {
  std::mutex mu;
  std::condition_variable cv;
  size_t expected = 0, arrived = 0;
  bool done = false;
  dcclResult_t code = dcclSuccess;
  std::string text;
  std::chrono::milliseconds bound{0};

  void arrive() {
    std::lock_guard<std::mutex> lk(mu);
    ++arrived;
    cv.notify_all();
  }
  // On another stream of the group: back to that stream's work once the group ran
  // (its error is this stream's too).
  void wait_done() {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, bound, [&] { return done; }))
      core::raise(dcclTimeout, "dcclGroupEnd: this stream waited " + std::to_string(bound.count() / 1000) +
                                   " s for the group it joins to run");
    if (code != dcclSuccess) throw core::Error(code, text);
  }
  void finish(dcclResult_t c, const std::string& t) {
    std::lock_guard<std::mutex> lk(mu);
    done = true;
    code = c;
    text = t;
    cv.notify_all();
  }
};

// Runs every communicator's share at once; throws the first error (in group order).
void run_shares(std::vector<std::function<void(bool)>>& shares, bool run) {
  std::vector<dcclResult_t> codes(shares.size(), dcclSuccess);
  std::vector<std::string> texts(shares.size());
  auto one = [&](size_t i) {
    try {
      shares[i](run);
    } catch (const core::Error& e) {
      codes[i] = e.code();
      texts[i] = e.what();
    } catch (const std::exception& e) {
      codes[i] = dcclInternalError;
      texts[i] = e.what();
    }
  };
  std::vector<std::thread> others;
  for (size_t i = 1; i < shares.size(); ++i) others.emplace_back(one, i);
  if (!shares.empty()) one(0);
  for (std::thread& t : others) t.join();
  for (size_t i = 0; i < shares.size(); ++i)
    if (codes[i] != dcclSuccess) throw core::Error(codes[i], texts[i]);
}

void run_joined(const std::shared_ptr<Join>& join, std::vector<std::function<void(bool)>>& shares) {
  bool arrived;
  {
    std::unique_lock<std::mutex> lk(join->mu);
    arrived = join->cv.wait_for(lk, join->bound, [&] { return join->arrived == join->expected; });
  }
  try {
    if (!arrived) {
      run_shares(shares, false);  // their turns given up: the communicators' order goes on
      core::raise(dcclTimeout, "dcclGroupEnd: work queued before the group on its other streams did not finish within " +
                                   std::to_string(join->bound.count() / 1000) + " s");
    }
    run_shares(shares, true);
    join->finish(dcclSuccess, {});
  } catch (const core::Error& e) {
    join->finish(e.code(), e.what());
    throw;
  }
}

void record_error(const core::Error& e, dcclResult_t* code, std::string* text) {
  if (*code != dcclSuccess) return;
  *code = e.code();
  *text = e.what();
}
}  // namespace

bool in_group() { return t_depth > 0; }

void group_start() {
  if (t_depth++ == 0) {
    t_refused_code = dcclSuccess;
    t_refused_text.clear();
  }
}

void group_add(dcclComm* handle, comm::Communicator& c, dcclStream* stream_handle, sched::Stream* stream,
               const sched::Op& op) {
  t_pending.push_back({handle, &c, stream_handle, stream, op});
}

void group_refused(const core::Error& e) {
  if (t_depth > 0) record_error(e, &t_refused_code, &t_refused_text);
}

void group_end() {
  if (t_depth == 0) core::raise(dcclInvalidUsage, "dcclGroupEnd: no matching dcclGroupStart");
  if (--t_depth > 0) return;
  std::vector<Pending> work;
  work.swap(t_pending);
  const dcclResult_t refused = t_refused_code;
  const std::string refused_text = t_refused_text;
  std::string first_error;
  dcclResult_t first_code = dcclSuccess;
  // A stream destroyed after its call joined the group: that call is refused now
  // (never run on the freed stream), the others are submitted.
  std::erase_if(work, [&](const Pending& p) {
    if (!p.stream_handle) return false;
    try {
      stream_of(p.stream_handle, "dcclGroupEnd", comm_of(p.handle, "dcclGroupEnd").rank());
      return false;
    } catch (const core::Error& e) {
      record_error(core::Error(e.code(), std::string(e.what()) + "; the group's call on it was not run"), &first_code,
                   &first_error);
      return true;
    }
  });
  // One share per communicator, in order of first appearance; the streams they use.
  std::vector<dcclComm*> comms;
  std::vector<sched::Stream*> streams;
  for (const Pending& p : work) {
    if (std::find(comms.begin(), comms.end(), p.handle) == comms.end()) comms.push_back(p.handle);
    if (std::find(streams.begin(), streams.end(), p.stream) == streams.end()) streams.push_back(p.stream);
  }
  std::vector<std::function<void(bool)>> shares;
  std::chrono::milliseconds bound{0};
  for (dcclComm* h : comms) {
    std::vector<sched::Op> ops;
    for (const Pending& p : work)
      if (p.handle == h) ops.push_back(p.op);
    try {
      comm::Communicator& c = comm_of(h, "dcclGroupEnd");
      CallScope scope(c, "dcclGroupEnd");
      if (comms.size() == 1 && streams.size() == 1) {
        c.submit(std::move(ops), streams[0]);  // the common case: as one call
      } else {
        shares.push_back(c.reserve(std::move(ops)));
        bound = std::max(bound, std::chrono::milliseconds(c.config().timeout_ms));
      }
      scope.leave();
    } catch (const core::Error& e) {
      record_error(e, &first_code, &first_error);
    }
  }
  if (!shares.empty()) {
    auto join = std::make_shared<Join>();
    join->bound = bound;
    sched::Stream* home = std::find(streams.begin(), streams.end(), nullptr) != streams.end() ? nullptr : streams[0];
    for (sched::Stream* s : streams)
      if (s && s != home) {
        ++join->expected;
        s->enqueue([join] {
          join->arrive();
          join->wait_done();
        });
      }
    try {
      if (home) {
        auto run = std::make_shared<std::vector<std::function<void(bool)>>>(std::move(shares));
        home->enqueue([join, run] { run_joined(join, *run); });
      } else {
        run_joined(join, shares);
      }
    } catch (const core::Error& e) {
      record_error(e, &first_code, &first_error);
    }
  }
  if (refused != dcclSuccess)
    throw core::Error(refused, "dcclGroupEnd: a call of this group was refused (the others were submitted): " +
                                   refused_text);
  if (first_code != dcclSuccess) throw core::Error(first_code, first_error);
}

}  // namespace dccl::api
