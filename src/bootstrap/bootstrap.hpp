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
  // Rank: the rank's own connection, which claims (ns, rank). Watch: a second
  // connection of a rank that holds its claim already (the failure watcher).
  enum class Role { Rank, Watch };

  // Connects to the store in `id` (retrying until `timeout`, also when the store
  // is busy or drops the connection before answering), proves it knows the
  // secret (and checks that the store does) and claims (ns, rank, nranks). If
  // `server` is given (rank 0), this object owns it and tells it which rank hosts
  // it. Throws core::Error naming rank and cause: dcclTimeout when the store is
  // unreachable in time, dcclInvalidUsage when the store refuses the claim (the
  // rank is held by a live process, or the world size differs; the message names
  // both claims), dcclRemoteError when refused otherwise (wrong secret) or when
  // what answers does not prove the secret. `ns` (at most 256 bytes) prefixes
  // every key, so several communicators can share one store; claims are per
  // namespace.
  // `until`: the connect, and every later wait, end by it (see limit()).
  Bootstrap(const UniqueIdData& id, int rank, int nranks, std::chrono::milliseconds timeout,
            std::unique_ptr<StoreServer> server = nullptr, std::string ns = "", Role role = Role::Rank,
            std::chrono::steady_clock::time_point until = {});

  // Does not hand a lease back: a held lease fires when the connection closes,
  // as it would if the process died. Call unlease() first on a graceful exit.
  ~Bootstrap();

  void set(const std::string& key, const std::string& value);
  // With a timeout of its own (> 0) instead of the constructor's.
  void set(const std::string& key, const std::string& value, std::chrono::milliseconds timeout);
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
  // While a rank's init runs: its lease names it (`who`: "rank 1 (pid 7 on node3)"),
  // so that if its process ends, the store fails the namespace and every other rank's
  // init wait ends at once naming it (a later lease, the failure watcher's, replaces
  // it). abandon(why): the rank's init failed; the same, with the cause (bounded,
  // errors logged only).
  void lease_init(const std::string& who);
  void abandon(const std::string& why) noexcept;
  // How long a rank whose init fails before it joined (a bad setting) spends reaching
  // the store, and waiting for its job's secret, to tell the others.
  static constexpr std::chrono::seconds kTellBound{10};

  // The one call that may come from another thread while this object is in use:
  // the get(), allgather() or barrier() in progress, and every later one, throws
  // core::Error(dcclRemoteError) whose message says "interrupted". set(),
  // lease() and unlease(), which the store answers at once, still work, so the
  // interrupted thread can unlease() before it leaves. The connection stays
  // open. Must not overlap the destructor.
  void interrupt();

  // Caps every later wait (SET, GET, allgather, barrier, lease) at `until`, so
  // that the phases of one call (init, split) share one deadline; a default
  // time point lifts the cap. Not thread-safe: under the caller's lock.
  void limit(std::chrono::steady_clock::time_point until);
  std::chrono::steady_clock::time_point limit() const;
  // This end's address of the connection to the store (numeric host, "" if
  // unknown): the address this host reaches the store's host by, so one the
  // job's other hosts can reach too.
  std::string local_host() const;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // Who hosts the store, as its WELCOME said: "rank 0 (pid P on H)", or "pid P on H"
  // for a store that no rank hosts (dccl-run, or a dcclGetUniqueId caller).
  const std::string& store_host() const;
  // For the store this rank hosts (if any): names this rank "label" in the WELCOME
  // of the connections made from now on (a split communicator's rank is named as
  // its parent names it).
  void name_host(const std::string& label);
  // "host:port" of the store.
  const std::string& store_address() const;
  // The store this rank hosts (null if none), handed back, so that it may outlive
  // this connection (a failed init parks it: ranks that come later learn the cause).
  std::unique_ptr<StoreServer> release_server();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, nranks_;
};

}  // namespace dccl::boot
