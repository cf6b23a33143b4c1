// Out-of-band operations over the store: key/value, allgather, barrier.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"

namespace dccl::boot {

class Bootstrap {
 public:
  // Connects to the store in `id` (retrying until `timeout`), presents the
  // secret and announces (rank, nranks). If `server` is given (rank 0), this
  // object owns it. Throws core::Error naming rank and cause:
  // dcclTimeout when the store is unreachable in time, dcclRemoteError when refused.
  // `ns` prefixes every key, so several communicators can share one store.
  Bootstrap(const UniqueIdData& id, int rank, int nranks, std::chrono::milliseconds timeout,
            std::unique_ptr<StoreServer> server = nullptr, std::string ns = "");

  // Does not hand a lease back: a held lease fires when the connection closes,
  // as it would if the process died. Call unlease() first on a graceful exit.
  ~Bootstrap();

  void set(const std::string& key, const std::string& value);
  // Blocks until the key exists or the timeout expires (dcclTimeout): the
  // constructor's timeout, or `timeout` (> 0; hours or more are fine).
  std::string get(const std::string& key);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  // Every rank's blob, indexed by rank. Each call is a new round.
  std::vector<std::string> allgather(const std::string& mine);
  void barrier();

  // Failure lease: if this connection closes while the lease is held (the
  // process exits or dies, the connection breaks, this object is destroyed),
  // the store sets `key` to `value` unless the key already exists, waking its
  // waiters. One lease per connection: a new one replaces the old. Throws
  // dcclRemoteError when the store is full (or predates leases).
  void lease(const std::string& key, const std::string& value);
  // Drops this connection's lease, if any (graceful exit).
  void unlease();

  // The one call that may come from another thread while this object is in use:
  // the get(), allgather() or barrier() in progress, and every later one, throws
  // core::Error(dcclRemoteError) whose message says "interrupted". set(),
  // lease() and unlease(), which the store answers at once, still work, so the
  // interrupted thread can unlease() before it leaves. The connection stays
  // open. Must not overlap the destructor.
  void interrupt();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, nranks_;
};

}  // namespace dccl::boot
