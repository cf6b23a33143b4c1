// The live view of a communicator: every DCCL_STATUS_MS its rank publishes a small
// status record (its current call, sequence number, last progress, counters) to
// the store under "status/<rank>", where `dccl-info --job` reads it, and takes the
// flight-recorder dumps that another rank asked for ("dumpreq", a generation
// count). It runs on a thread and a store connection of its own, never on the
// path of a call.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "core/recorder.hpp"
#include "dccl/dccl.h"

namespace dccl::comm {

class StatusPublisher {
 public:
  // `stats`: the communicator's counters, read when a record is made.
  StatusPublisher(const boot::UniqueIdData& id, int rank, int nranks, const std::string& ns, std::string host,
                  core::Recorder& rec, std::function<dcclStats_t()> stats, std::chrono::milliseconds period,
                  std::chrono::milliseconds connect_timeout);
  ~StatusPublisher();  // stops the thread

  // The status record, as published (JSON).
  std::string record() const;
  // The store key whose value counts the dumps asked for (rank 0 sets it to "0" at init).
  static constexpr const char* kDumpKey = "dumpreq";

 private:
  void run();
  int rank_, nranks_;
  std::string host_;
  core::Recorder& rec_;  // read for the records; told when one reached the store
  std::function<dcclStats_t()> stats_;
  std::chrono::milliseconds period_;
  std::unique_ptr<boot::Bootstrap> conn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dccl::comm
