// Failure propagation between ranks. Each rank holds a lease on the store key
// "failed" whose value names it; if its process dies or loses the store, the
// store sets the key. Every rank's watcher thread waits on that key (and ranks
// that hit an error or abort set it themselves), so all survivors stop their
// in-flight and later work with an error naming the failed rank, in milliseconds
// rather than after the timeout. The watcher's own connection is a lease on the
// store's host in turn: when it breaks (the process hosting the store died, or
// the network to it broke), the watcher reports that, naming who hosted the store
// ("rank 0 (pid P on H)").
//
// Announcing never holds up the call that failed: it runs on a thread of its own,
// bounded by kAnnounceBound, so that a store this rank cannot reach (its link is
// down, the store's host stopped) does not add a timeout to the call's.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.hpp"

namespace dccl::comm {

// "rank R (pid P on host)": how the store's reports name a rank whose name in its
// communicator is `label` (its failure lease here, init's lease in Communicator).
std::string rank_who(const std::string& label);

class Watchdog {
 public:
  // The longest an announcement waits for the store.
  static constexpr std::chrono::milliseconds kAnnounceBound{1000};

  // `boot` is the communicator's own store connection (used under `boot_mu`).
  // on_failure(code, text): the failure another rank announced (or this rank's own).
  // `connect_timeout`: for the watcher's own connection (what is left of init's deadline).
  // `label`: how this rank is named in its failure lease ("rank R"; a split
  // communicator's rank as its parent names it, so that every report of one
  // process's failure names the same rank).
  Watchdog(const boot::UniqueIdData& id, int rank, const std::string& label, int nranks, const std::string& ns,
           boot::Bootstrap& boot, std::mutex& boot_mu, std::function<void(dcclResult_t, const std::string&)> on_failure,
           std::chrono::milliseconds connect_timeout = std::chrono::seconds(60));
  ~Watchdog();  // stops the watcher
  // Tells every rank that this one failed (first announcement wins), from a
  // thread of its own: returns at once.
  void announce(dcclResult_t code, const std::string& text);
  // Graceful exit: this rank's leaving is not a failure.
  void release();
  // Ends the watch (the destructor; dcclCommFinalize earlier) once an
  // announcement under way is done (within kAnnounceBound). `graceful`: releases
  // the lease first, so that the store may go without this rank calling it a
  // failure; a failed communicator keeps it (the failure is known already, and
  // the store may be out of reach).
  void stop(bool graceful = true);

 private:
  boot::Bootstrap& boot_;
  std::mutex& boot_mu_;
  std::unique_ptr<boot::Bootstrap> watch_;
  std::thread thread_;
  std::thread announcer_;  // the announcement, once one was made
  std::mutex announce_mu_;
  bool announced_ = false;
  std::string own_;  // what this rank announced
  bool stopped_ = false;
  bool released_ = false;
  std::atomic<bool> stopping_{false};  // the destructor interrupts the watcher: not a failure
};

}  // namespace dccl::comm
