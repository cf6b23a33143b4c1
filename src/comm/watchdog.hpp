// Failure propagation between ranks. Each rank holds a lease on the store key
// "failed" whose value names it; if its process dies or loses the store, the
// store sets the key. Every rank's watcher thread waits on that key (and ranks
// that hit an error or abort set it themselves), so all survivors stop their
// in-flight and later work with an error naming the failed rank, in milliseconds
// rather than after the timeout. The watcher's own connection is a lease on the
// store's host in turn: when it breaks (the process hosting the store died, or
// the network to it broke), the watcher reports that, naming who hosted the store
// ("rank 0 (pid P on H)").
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.hpp"

namespace dccl::comm {

class Watchdog {
 public:
  // `boot` is the communicator's own store connection (used under `boot_mu`).
  // on_failure(code, text): the failure another rank announced (or this rank's own).
  Watchdog(const boot::UniqueIdData& id, int rank, int nranks, const std::string& ns, boot::Bootstrap& boot,
           std::mutex& boot_mu, std::function<void(dcclResult_t, const std::string&)> on_failure);
  ~Watchdog();  // stops the watcher
  // Tells every rank that this one failed (first announcement wins).
  void announce(dcclResult_t code, const std::string& text);
  // Graceful exit: this rank's leaving is not a failure.
  void release();
  // Releases and ends the watch (the destructor; dcclCommFinalize earlier): the
  // store may then go without this rank calling it a failure.
  void stop();

 private:
  boot::Bootstrap& boot_;
  std::mutex& boot_mu_;
  std::unique_ptr<boot::Bootstrap> watch_;
  std::thread thread_;
  bool released_ = false;
  std::atomic<bool> stopping_{false};  // the destructor interrupts the watcher: not a failure
};

}  // namespace dccl::comm
