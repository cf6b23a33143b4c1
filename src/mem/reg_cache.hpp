// Registration cache: a pure data structure, independent of the transport.
//
// Entries are keyed by (backend kind, page-aligned [start, end), id), where id tells
// apart allocations that reuse an address (a dma-buf fd or the backend's buffer id; -1: none)
// and hold an opaque handle whose deleter deregisters (std::shared_ptr<void>): the
// cache deregisters an entry by dropping its last reference to the handle.
//  - acquire(): a request inside an existing entry's range (same kind and id) is a
//    hit; otherwise the register callback runs (without the cache's lock held)
//    and the new entry is inserted. Every acquire returns a Ref (a reference count).
//  - Unreferenced entries stay cached in LRU order; when the total registered bytes
//    exceed the bound, the least recently released ones are evicted. Referenced
//    entries are never evicted (the bound may then be exceeded until releases).
//  - invalidate(): memory was freed; entries overlapping its pages stop matching
//    at once and are deregistered as soon as they are unreferenced.
// Thread-safe. A Ref may outlive the cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "mem/backend.hpp"

namespace dccl::mem {

struct RegRange {
  Kind kind = Kind::Host;
  uintptr_t start = 0;  // page-aligned
  uintptr_t end = 0;    // page-aligned, exclusive
  int64_t id = -1;      // dma-buf fd or allocation id; -1 for address-based registration
  size_t len() const { return end - start; }
};

struct RegCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t registrations = 0;    // register callbacks that succeeded
  uint64_t evictions = 0;        // entries dropped for the bound
  uint64_t invalidations = 0;    // entries dropped by invalidate()
  uint64_t deregistrations = 0;  // handles released by the cache
  uint64_t entries = 0;          // current entries (including invalidated ones still referenced)
  uint64_t referenced = 0;       // current entries with references
  uint64_t bytes = 0;            // current registered bytes
};

class RegCache {
  struct State;
  struct Entry;

 public:
  using Handle = std::shared_ptr<void>;
  // Registers the page-aligned range; throws on failure (the error reaches acquire's caller).
  using RegisterFn = std::function<Handle(const RegRange&)>;

  // A counted reference to an entry. Move-only; releases on destruction.
  class Ref {
   public:
    Ref() = default;
    Ref(Ref&& o) noexcept;
    Ref& operator=(Ref&& o) noexcept;
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    ~Ref() { release(); }

    explicit operator bool() const { return entry_ != nullptr; }
    const Handle& handle() const;
    const RegRange& range() const;  // the registered (containing) range
    void release();

   private:
    friend class RegCache;
    std::shared_ptr<State> state_;
    std::shared_ptr<Entry> entry_;
  };

  // max_bytes == 0: unbounded. page == 0: the system page size.
  explicit RegCache(size_t max_bytes = 0, size_t page = 0);
  ~RegCache();  // deregisters unreferenced entries; referenced ones go at their release
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // The entry containing [addr, addr+len) rounded out to pages, registering it on a miss.
  Ref acquire(Kind kind, const void* addr, size_t len, int64_t id, const RegisterFn& reg);
  // Drops entries of this kind overlapping the pages of [addr, addr+len).
  void invalidate(Kind kind, const void* addr, size_t len);
  // Deregisters every unreferenced entry; returns how many.
  size_t trim();
  void set_max_bytes(size_t max_bytes);  // evicts at once when now over the bound
  size_t max_bytes() const;
  size_t page_size() const { return page_; }
  RegCacheStats stats() const;

 private:
  size_t page_;
  std::shared_ptr<State> state_;
};

}  // namespace dccl::mem
