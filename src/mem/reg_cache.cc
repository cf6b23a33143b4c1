#include "mem/reg_cache.hpp"

#include <unistd.h>

#include <climits>
#include <list>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace dccl::mem {

// kind, start, end, id: ordered by start within a kind for containment scans.
using RegKey = std::tuple<int, uintptr_t, uintptr_t, int64_t>;

struct RegCache::Entry {
  RegRange r;
  Handle h;
  size_t refs = 0;
  bool indexed = true;  // false once evicted/invalidated (no longer matches lookups)
  std::list<std::shared_ptr<Entry>>::iterator lru;  // valid while idle (refs == 0 && indexed)
};

struct RegCache::State {
  std::mutex mu;
  std::map<RegKey, std::shared_ptr<Entry>> index;
  std::list<std::shared_ptr<Entry>> idle;  // unreferenced entries, least recently used first
  size_t max_bytes = 0;
  uintptr_t max_len = 0;  // longest entry ever indexed: bounds the containment scans
  bool closed = false;    // the RegCache is gone: entries go at their last release
  RegCacheStats st;

  static RegKey key(const RegRange& r) { return {static_cast<int>(r.kind), r.start, r.end, r.id}; }

  std::shared_ptr<Entry> find(const RegRange& q) {
    auto it = index.upper_bound(RegKey{static_cast<int>(q.kind), q.start, UINTPTR_MAX, INT64_MAX});
    while (it != index.begin()) {
      --it;
      const Entry& e = *it->second;
      if (e.r.kind != q.kind || q.end - e.r.start > max_len) break;
      if (e.r.id == q.id && e.r.end >= q.end) return it->second;
    }
    return nullptr;
  }

  void unindex(const std::shared_ptr<Entry>& e) {
    if (!e->indexed) return;
    index.erase(key(e->r));
    if (e->refs == 0) idle.erase(e->lru);
    e->indexed = false;
  }

  // The entry lets go of its handle (the caller destroys it outside the lock).
  void drop(const std::shared_ptr<Entry>& e, std::vector<Handle>& out) {
    unindex(e);
    st.bytes -= e->r.len();
    st.entries--;
    st.deregistrations++;
    out.push_back(std::move(e->h));
  }

  void evict_over_bound(std::vector<Handle>& out) {
    while (max_bytes && st.bytes > max_bytes && !idle.empty()) {
      std::shared_ptr<Entry> e = idle.front();
      st.evictions++;
      drop(e, out);
    }
  }

  void ref(const std::shared_ptr<Entry>& e) {
    if (e->refs++ == 0) {
      idle.erase(e->lru);
      st.referenced++;
    }
  }

  void release(const std::shared_ptr<Entry>& e, std::vector<Handle>& out) {
    if (--e->refs != 0) return;
    st.referenced--;
    if (!e->indexed || closed) {
      if (e->indexed) unindex_for_close(e);
      drop(e, out);
      return;
    }
    e->lru = idle.insert(idle.end(), e);
    evict_over_bound(out);
  }

  void unindex_for_close(const std::shared_ptr<Entry>& e) {
    index.erase(key(e->r));
    e->indexed = false;
  }
};

namespace {
void destroy_outside_lock(std::vector<RegCache::Handle>& handles) { handles.clear(); }
}  // namespace

RegCache::Ref::Ref(Ref&& o) noexcept
    : state_(std::move(o.state_)), entry_(std::move(o.entry_)) {}

RegCache::Ref& RegCache::Ref::operator=(Ref&& o) noexcept {
  if (this != &o) {
    release();
    state_ = std::move(o.state_);
    entry_ = std::move(o.entry_);
  }
  return *this;
}

const RegCache::Handle& RegCache::Ref::handle() const {
  static const Handle empty;
  return entry_ ? entry_->h : empty;
}

const RegRange& RegCache::Ref::range() const {
  static const RegRange empty;
  return entry_ ? entry_->r : empty;
}

void RegCache::Ref::release() {
  if (!entry_) return;
  std::vector<Handle> dead;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->release(entry_, dead);
  }
  entry_.reset();
  state_.reset();
  destroy_outside_lock(dead);
}

RegCache::RegCache(size_t max_bytes, size_t page)
    : page_(page ? page : static_cast<size_t>(sysconf(_SC_PAGESIZE))),
      state_(std::make_shared<State>()) {
  if (page_ == 0 || (page_ & (page_ - 1)) != 0) page_ = 4096;
  state_->max_bytes = max_bytes;
}

RegCache::~RegCache() {
  std::vector<Handle> dead;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->closed = true;
    while (!state_->idle.empty()) {
      std::shared_ptr<Entry> e = state_->idle.front();
      state_->drop(e, dead);
    }
  }
  destroy_outside_lock(dead);
}

RegCache::Ref RegCache::acquire(Kind kind, const void* addr, size_t len, int64_t id,
                                const RegisterFn& reg) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  RegRange q;
  q.kind = kind;
  q.start = a & ~(uintptr_t{page_} - 1);
  q.end = (a + (len ? len : 1) + page_ - 1) & ~(uintptr_t{page_} - 1);
  q.id = id;

  Ref ref;
  ref.state_ = state_;
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (std::shared_ptr<Entry> e = s.find(q)) {
      s.st.hits++;
      s.ref(e);
      ref.entry_ = std::move(e);
      return ref;
    }
    s.st.misses++;
  }

  Handle h = reg(q);  // the expensive part, without the lock; may throw

  std::vector<Handle> dead;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.st.registrations++;
    if (std::shared_ptr<Entry> e = s.find(q)) {
      // Another thread registered a containing range meanwhile: use it, drop ours.
      s.ref(e);
      s.st.deregistrations++;
      dead.push_back(std::move(h));
      ref.entry_ = std::move(e);
    } else {
      auto fresh = std::make_shared<Entry>();
      fresh->r = q;
      fresh->h = std::move(h);
      fresh->refs = 1;
      s.index.emplace(State::key(q), fresh);
      if (q.len() > s.max_len) s.max_len = q.len();
      s.st.entries++;
      s.st.referenced++;
      s.st.bytes += q.len();
      s.evict_over_bound(dead);
      ref.entry_ = std::move(fresh);
    }
  }
  destroy_outside_lock(dead);
  return ref;
}

void RegCache::invalidate(Kind kind, const void* addr, size_t len) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t s_req = a & ~(uintptr_t{page_} - 1);
  const uintptr_t e_req = (a + (len ? len : 1) + page_ - 1) & ~(uintptr_t{page_} - 1);
  std::vector<Handle> dead;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    State& s = *state_;
    std::vector<std::shared_ptr<Entry>> hit;
    auto it = s.index.lower_bound(RegKey{static_cast<int>(kind), e_req, 0, INT_MIN});
    while (it != s.index.begin()) {
      --it;
      const Entry& e = *it->second;
      if (e.r.kind != kind) break;
      if (e.r.start <= s_req && s_req - e.r.start >= s.max_len) break;
      if (e.r.end > s_req) hit.push_back(it->second);
    }
    for (auto& e : hit) {
      s.st.invalidations++;
      if (e->refs == 0) {
        s.drop(e, dead);
      } else {
        s.unindex(e);  // goes at its last release
      }
    }
  }
  destroy_outside_lock(dead);
}

size_t RegCache::trim() {
  std::vector<Handle> dead;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    while (!state_->idle.empty()) {
      std::shared_ptr<Entry> e = state_->idle.front();
      state_->st.evictions++;
      state_->drop(e, dead);
    }
  }
  size_t n = dead.size();
  destroy_outside_lock(dead);
  return n;
}

void RegCache::set_max_bytes(size_t max_bytes) {
  std::vector<Handle> dead;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->max_bytes = max_bytes;
    state_->evict_over_bound(dead);
  }
  destroy_outside_lock(dead);
}

size_t RegCache::max_bytes() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->max_bytes;
}

RegCacheStats RegCache::stats() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->st;
}

}  // namespace dccl::mem
