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
  ~Bootstrap();

  void set(const std::string& key, const std::string& value);
  // Blocks until the key exists or the timeout expires (dcclTimeout).
  std::string get(const std::string& key);
  // Every rank's blob, indexed by rank. Each call is a new round.
  std::vector<std::string> allgather(const std::string& mine);
  void barrier();
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, nranks_;
};

}  // namespace dccl::boot
