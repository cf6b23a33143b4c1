// The registration cache: containment hits, reference counts, LRU bound, invalidation.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "mem/reg_cache.hpp"

using dccl::mem::Kind;
using dccl::mem::RegCache;
using dccl::mem::RegRange;

namespace {

constexpr size_t kPage = 4096;

// A fake transport: counts registrations and which ranges are still registered.
struct FakeNic {
  int registered = 0;
  std::multiset<uintptr_t> live;  // start of each live registration
  std::vector<uintptr_t> deregistered;

  RegCache::RegisterFn fn() {
    return [this](const RegRange& r) -> RegCache::Handle {
      registered++;
      live.insert(r.start);
      uintptr_t start = r.start;
      // The handle: a distinct object per registration holding its start.
      return RegCache::Handle(new uintptr_t(start), [this](void* h) {
        uintptr_t s = *static_cast<uintptr_t*>(h);
        live.erase(live.find(s));
        deregistered.push_back(s);
        delete static_cast<uintptr_t*>(h);
      });
    };
  }
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

}  // namespace

TEST(RegCache, SameAndContainedRangesRegisterOnce) {
  FakeNic nic;
  RegCache c(0, kPage);
  const uintptr_t base = 0x100000;
  {
    auto r1 = c.acquire(Kind::Sim, at(base + 100), 3 * kPage, 7, nic.fn());
    ASSERT_TRUE(r1);
    EXPECT_EQ(r1.range().start, base);
    EXPECT_EQ(r1.range().end, base + 4 * kPage);  // rounded out to pages
    EXPECT_EQ(r1.range().id, 7);
    auto r2 = c.acquire(Kind::Sim, at(base + 100), 3 * kPage, 7, nic.fn());  // same
    auto r3 = c.acquire(Kind::Sim, at(base + kPage + 5), 100, 7, nic.fn());  // contained
    EXPECT_EQ(r2.handle(), r1.handle());
    EXPECT_EQ(r3.handle(), r1.handle());
    EXPECT_EQ(nic.registered, 1);
    // Not contained: different id, kind, or a range that extends past the entry.
    auto r4 = c.acquire(Kind::Sim, at(base + kPage), kPage, -1, nic.fn());
    auto r5 = c.acquire(Kind::Cuda, at(base + kPage), kPage, 7, nic.fn());
    auto r6 = c.acquire(Kind::Sim, at(base + 3 * kPage), 2 * kPage, 7, nic.fn());
    EXPECT_EQ(nic.registered, 4);
    auto st = c.stats();
    EXPECT_EQ(st.hits, 2u);
    EXPECT_EQ(st.misses, 4u);
    EXPECT_EQ(st.registrations, 4u);
    EXPECT_EQ(st.entries, 4u);
    EXPECT_EQ(st.referenced, 4u);
    EXPECT_EQ(st.bytes, (4 + 1 + 1 + 2) * kPage);
  }
  // Released: still cached (no bound), so a new acquire hits.
  EXPECT_EQ(c.stats().referenced, 0u);
  EXPECT_EQ(nic.live.size(), 4u);
  auto again = c.acquire(Kind::Sim, at(base + 2 * kPage), 10, 7, nic.fn());
  EXPECT_EQ(nic.registered, 4);
  EXPECT_EQ(c.stats().hits, 3u);
}

TEST(RegCache, ReleaseThenInvalidateDeregisters) {
  FakeNic nic;
  RegCache c(0, kPage);
  const uintptr_t a = 0x200000, b = 0x300000;
  auto ra = c.acquire(Kind::Host, at(a), 2 * kPage, -1, nic.fn());
  auto rb = c.acquire(Kind::Host, at(b), 2 * kPage, -1, nic.fn());
  ra.release();
  EXPECT_FALSE(ra);
  // Memory at a freed: its unreferenced entry goes at once.
  c.invalidate(Kind::Host, at(a + 10), 100);
  EXPECT_EQ(nic.live.count(a), 0u);
  EXPECT_EQ(c.stats().invalidations, 1u);
  // Invalidating another kind or a disjoint range leaves b alone.
  c.invalidate(Kind::Sim, at(b), kPage);
  c.invalidate(Kind::Host, at(b + 2 * kPage), kPage);
  EXPECT_EQ(nic.live.count(b), 1u);
  // b is referenced: it stops matching now and is deregistered at release.
  c.invalidate(Kind::Host, at(b + kPage), 1);
  EXPECT_EQ(nic.live.count(b), 1u);
  auto rb2 = c.acquire(Kind::Host, at(b), kPage, -1, nic.fn());  // a fresh registration
  EXPECT_EQ(nic.registered, 3);
  EXPECT_NE(rb2.handle(), rb.handle());
  EXPECT_EQ(*static_cast<uintptr_t*>(rb.handle().get()), b);
  rb.release();
  EXPECT_EQ(nic.deregistered.back(), b);
  EXPECT_EQ(nic.live.count(b), 1u);  // only the new registration of b
  auto st = c.stats();
  EXPECT_EQ(st.entries, 1u);
  EXPECT_EQ(st.deregistrations, 2u);
}

TEST(RegCache, BoundEvictsLeastRecentlyUsed) {
  FakeNic nic;
  RegCache c(4 * kPage, kPage);  // room for four one-page entries
  const uintptr_t base = 0x1000000;
  auto addr = [&](int i) { return at(base + i * 16 * kPage); };
  for (int i = 0; i < 4; ++i) c.acquire(Kind::Sim, addr(i), kPage, 3, nic.fn());  // released at once
  EXPECT_EQ(nic.live.size(), 4u);
  // Touch 0 so that 1 becomes the least recently used.
  c.acquire(Kind::Sim, addr(0), kPage, 3, nic.fn());
  c.acquire(Kind::Sim, addr(4), kPage, 3, nic.fn());
  EXPECT_EQ(nic.deregistered, std::vector<uintptr_t>{base + 1 * 16 * kPage});
  c.acquire(Kind::Sim, addr(5), kPage, 3, nic.fn());
  EXPECT_EQ(nic.deregistered.back(), base + 2 * 16 * kPage);
  auto st = c.stats();
  EXPECT_EQ(st.evictions, 2u);
  EXPECT_EQ(st.bytes, 4 * kPage);
  EXPECT_EQ(st.entries, 4u);
  // Shrinking the bound evicts at once, oldest first.
  c.set_max_bytes(2 * kPage);
  EXPECT_EQ(c.stats().entries, 2u);
  EXPECT_EQ(nic.live.count(base + 4 * 16 * kPage), 1u);
  EXPECT_EQ(nic.live.count(base + 5 * 16 * kPage), 1u);
}

TEST(RegCache, ReferencedEntriesAreNeverEvicted) {
  FakeNic nic;
  RegCache c(2 * kPage, kPage);
  const uintptr_t base = 0x2000000;
  std::vector<RegCache::Ref> held;
  for (int i = 0; i < 5; ++i)
    held.push_back(c.acquire(Kind::Cuda, at(base + i * 8 * kPage), kPage, -1, nic.fn()));
  EXPECT_EQ(nic.live.size(), 5u);  // over the bound while all are referenced
  EXPECT_EQ(c.stats().evictions, 0u);
  EXPECT_EQ(c.stats().bytes, 5 * kPage);
  // Releasing brings the cache back under its bound, dropping the oldest released.
  held[3].release();
  held[1].release();
  held[0].release();
  EXPECT_EQ(c.stats().bytes, 2 * kPage);
  EXPECT_EQ(nic.live.count(base + 2 * 8 * kPage), 1u);
  EXPECT_EQ(nic.live.count(base + 4 * 8 * kPage), 1u);
  EXPECT_EQ(c.stats().evictions, 3u);
  held.clear();
  EXPECT_EQ(c.stats().bytes, 2 * kPage);
  EXPECT_EQ(c.trim(), 2u);
  EXPECT_TRUE(nic.live.empty());
}

TEST(RegCache, RegisterFailurePropagatesAndCachesNothing) {
  RegCache c(0, kPage);
  EXPECT_THROW(c.acquire(Kind::Sim, at(0x5000), 10, 1,
                         [](const RegRange&) -> RegCache::Handle { throw std::runtime_error("nope"); }),
               std::runtime_error);
  auto st = c.stats();
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.registrations, 0u);
  EXPECT_EQ(st.entries, 0u);
}

TEST(RegCache, RefOutlivesCache) {
  FakeNic nic;
  RegCache::Ref r;
  {
    RegCache c(0, kPage);
    r = c.acquire(Kind::Host, at(0x9000), 1, -1, nic.fn());
    c.acquire(Kind::Host, at(0x20000), 1, -1, nic.fn());
  }
  EXPECT_EQ(nic.live.size(), 1u);  // the unreferenced one went with the cache
  r.release();
  EXPECT_TRUE(nic.live.empty());
}

TEST(RegCache, ConcurrentAcquireRelease) {
  std::atomic<int> registered{0}, deregistered{0};
  RegCache c(64 * kPage, kPage);
  auto fn = [&](const RegRange&) -> RegCache::Handle {
    registered++;
    return RegCache::Handle(new int(1), [&](void* p) {
      deregistered++;
      delete static_cast<int*>(p);
    });
  };
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        uintptr_t a = 0x10000000 + ((i * 7 + t) % 97) * 4 * kPage;
        auto r = c.acquire(Kind::Sim, at(a + 1), 2 * kPage, 4, fn);
        ASSERT_TRUE(r.handle());
        if (i % 50 == 0) c.invalidate(Kind::Sim, at(a), kPage);
      }
    });
  for (auto& x : th) x.join();
  auto st = c.stats();
  EXPECT_EQ(st.referenced, 0u);
  EXPECT_LE(st.bytes, 64 * kPage);
  EXPECT_EQ(st.hits + st.misses, 20000u);
  EXPECT_EQ(static_cast<uint64_t>(registered.load()), st.registrations);
  EXPECT_EQ(registered.load() - deregistered.load(), static_cast<int>(st.entries));
}
