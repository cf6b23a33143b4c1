// A POSIX shared-memory segment shared by all ranks of a communicator when they
// run on one host: per rank, two payload slots with sequence flags and a "done"
// counter. Small allreduces go through it in one shot (coll/allreduce_smem.cc),
// far below the cost of a message round through the provider.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace dccl::net {

class ShmSegment {
 public:
  struct alignas(64) Flag {
    std::atomic<uint64_t> v{0};
  };
  // Rank 0 creates the segment and publishes its name through `publish`; the others
  // `fetch` it and map it. `barrier` runs between mapping and unlinking, so the name
  // never outlives the setup (a crash cannot leave it behind).
  ShmSegment(int rank, int nranks, size_t slot_bytes, const std::function<void(const std::string&)>& publish,
             const std::function<std::string()>& fetch, const std::function<void()>& barrier);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  size_t slot_bytes() const { return slot_bytes_; }
  int nranks() const { return n_; }
  char* slot(int rank, int parity) const;
  Flag& seq(int rank, int parity) const;
  Flag& done(int rank) const;
  uint64_t next_op() { return ++ops_; }  // same sequence on every rank

 private:
  int rank_, n_;
  size_t slot_bytes_;
  size_t bytes_ = 0;
  char* base_ = nullptr;
  uint64_t ops_ = 0;
};

}  // namespace dccl::net
