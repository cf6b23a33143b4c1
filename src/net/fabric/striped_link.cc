#include "net/fabric/striped_link.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace dccl::net {

namespace {

constexpr uint32_t kNoteMagic = 0x4e534344;  // "DCSN"

void put64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The note: [0, 8) the part's length, [8, 12) magic, [12, 16) lanes, then one
// 16-bit weight per lane (host order: both ends are one build's).
void encode(std::vector<unsigned char>* out, uint64_t len, const uint16_t* w, int lanes) {
  out->assign(StripedLink::note_bytes(lanes), 0);
  put64(out->data(), len);
  const uint32_t head[2] = {kNoteMagic, static_cast<uint32_t>(lanes)};
  std::memcpy(out->data() + 8, head, 8);
  std::memcpy(out->data() + 16, w, 2 * static_cast<size_t>(lanes));
}

// "" when the note is well formed for `lanes` lanes, else what is wrong with it.
std::string decode(const std::vector<unsigned char>& in, int lanes, uint64_t* len, std::vector<uint16_t>* w) {
  uint32_t head[2];
  std::memcpy(head, in.data() + 8, 8);
  if (head[0] != kNoteMagic || head[1] != static_cast<uint32_t>(lanes)) return "a malformed split note";
  *len = get64(in.data());
  w->resize(static_cast<size_t>(lanes));
  std::memcpy(w->data(), in.data() + 16, 2 * static_cast<size_t>(lanes));
  for (uint16_t x : *w)
    if (x) return "";
  return "a split note with no lane";
}

}  // namespace

StripedLink::StripedLink(int rank, int peer, std::vector<std::unique_ptr<FabricLink>> lanes, WireCut cut,
                         std::shared_ptr<std::mutex> order, int rails, int flows, std::vector<uint16_t> fixed,
                         size_t window)
    : rank_(rank),
      peer_(peer),
      lanes_(std::move(lanes)),
      cut_(cut),
      order_(std::move(order)),
      rails_(rails),
      flows_(flows),
      fixed_(std::move(fixed)),
      queued_(lanes_.size(), 0),
      window_(lanes_.size(), fixed_.size() == lanes_.size() ? 0 : window) {  // fixed cuts ignore queues
  if (fixed_.size() != lanes_.size()) fixed_.clear();
}

// The endpoints close before the links (FabricTransport), or are abandoned and never
// progressed again: no completion reaches a note after this.
StripedLink::~StripedLink() = default;

std::string StripedLink::describe() const {
  std::string s = lanes_[static_cast<size_t>(cut_.home)]->endpoint()->rail_label() + ", ";
  if (rails_ >= 2) s += "striped over " + std::to_string(rails_) + " rails" + (flows_ >= 2 ? " x " : "");
  else s += "over ";
  if (flows_ >= 2) s += std::to_string(flows_) + " flows";
  return s;
}

void StripedLink::raise_post(bool send, const std::string& cause) const {
  core::raise(dcclSystemError,
              core::describe(rank_, std::string(send ? "isend to" : "irecv from") + " rank " + std::to_string(peer_),
                             cause));
}

std::string StripedLink::post_part(bool send, char* part, size_t plen, uint64_t tag, Request* req, Request* per_lane,
                                   MemRegion* mr, const uint16_t* w, size_t* posted, bool first) {
  std::string cause;
  cut_.each_weighted(plen, w, [&](int lane, size_t off, size_t qlen) {
    if (!cause.empty()) return;
    Request* r = per_lane ? &per_lane[lane] : req;
    cause = lanes_[static_cast<size_t>(lane)]->post_piece(send, part + off, qlen, tag, r, mr, first && off == 0);
    if (cause.empty()) ++posted[per_lane ? lane : 0];
  });
  return cause;
}

std::string StripedLink::send_note(size_t plen, const uint16_t* w, uint64_t tag) {
  Note* note = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    note = &sent_.emplace_back();
    busy_.fetch_add(1, std::memory_order_release);
  }
  encode(&note->bytes, plen, w, static_cast<int>(lanes_.size()));
  Request& nr = note->req;
  nr.arm(peer_, tag, note->bytes.size(), true, 1);
  std::string cause =
      lanes_[static_cast<size_t>(cut_.home)]->post_piece(true, note->bytes.data(), note->bytes.size(), tag, &nr, nullptr);
  if (!cause.empty()) {
    nr.parts_done();  // never posted: settle_locked frees it
    cause += " (split note)";
  }
  return cause;
}

void StripedLink::post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) {
  if (send) return post_send(static_cast<char*>(buf), len, tag, req, mr);
  std::lock_guard<std::mutex> lk(mu_);
  req->pending_parts.store(1, std::memory_order_release);  // held until every part is posted
  Waiting& w = waiting_.emplace_back();
  w.req = req;
  w.buf = static_cast<char*>(buf);
  w.len = len;
  w.tag = tag;
  w.mr = mr;
  w.note.bytes.assign(note_bytes(static_cast<int>(lanes_.size())), 0);
  busy_.fetch_add(1, std::memory_order_release);
  settle_locked();
}

void StripedLink::post_send(char* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) {
  std::lock_guard<std::mutex> order(*order_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (fixed_.empty()) {
      settle_sends_locked();  // what drained since the last pass
      if (!held_.empty() || must_hold_locked()) {
        req->pending_parts.store(1, std::memory_order_release);  // until send_now
        held_.push_back(Held{buf, len, tag, req, mr});
        busy_.fetch_add(1, std::memory_order_release);
        return;
      }
    }
  }
  const std::string cause = send_now(buf, len, tag, req, mr);
  if (!cause.empty()) raise_post(true, cause);
}

bool StripedLink::must_hold_locked() const { return window_.full(queued_); }

void StripedLink::release_held() {
  std::unique_lock<std::mutex> order(*order_, std::try_to_lock);
  if (!order.owns_lock()) return;  // another thread posts: its progress comes back here
  for (;;) {
    Held h{};
    {
      std::lock_guard<std::mutex> lk(mu_);
      settle_sends_locked();
      if (held_.empty() || must_hold_locked()) return;
      h = held_.front();
      held_.pop_front();
      busy_.fetch_sub(1, std::memory_order_release);
    }
    if (h.req) send_now(h.buf, h.len, h.tag, h.req, h.mr);  // a failure fails h.req
  }
}

std::string StripedLink::send_now(char* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) {
  const size_t lanes = lanes_.size();
  std::vector<uint16_t> w(fixed_);
  std::list<Sending> one(1);  // filled here, then handed to settle_locked
  Sending* s = &one.front();
  if (w.empty()) {
    std::vector<uint64_t> queued;
    {
      std::lock_guard<std::mutex> lk(mu_);
      queued = queued_;  // settled by the caller just before
    }
    w.resize(lanes);
    fill_lanes(queued, len, w.data());
  }
  // Pieces per lane, each lane's request counting its own.
  std::vector<size_t> planned(lanes, 0), posted(lanes, 0);
  s->bytes.assign(lanes, 0);
  s->lane.reset(new Request[lanes]);
  s->used.assign(lanes, 0);
  cut_.each_weighted(len, w.data(), [&](int lane, size_t, size_t plen) {
    ++planned[static_cast<size_t>(lane)];
    s->used[static_cast<size_t>(lane)] = 1;
    s->bytes[static_cast<size_t>(lane)] += plen;
  });
  for (size_t k = 0; k < lanes; ++k) {
    s->lane[k].arm(peer_, tag, s->bytes[k], true, static_cast<int>(planned[k]));
    if (planned[k]) ++s->open;
  }
  req->pending_parts.store(s->open, std::memory_order_release);
  s->req = req;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const auto now = LaneWindow::Clock::now();
    for (size_t k = 0; k < lanes; ++k) {
      if (s->bytes[k]) window_.handed(k, queued_[k], now);
      queued_[k] += s->bytes[k];
    }
    sending_.splice(sending_.end(), one);  // settle_locked sees it from here on
    busy_.fetch_add(1, std::memory_order_release);
  }
  std::string cause;
  for (size_t off = 0; cause.empty() && (off < len || off == 0);) {
    const size_t plen = std::min(cut_.part, len - off);
    if (cut_.stripes(plen)) cause = send_note(plen, w.data(), tag);
    if (cause.empty()) cause = post_part(true, buf + off, plen, tag, nullptr, s->lane.get(), mr, w.data(), posted.data());
    off += plen;
    if (plen == 0) break;
  }
  if (cause.empty()) return cause;
  req->fail(cause);
  for (size_t k = 0; k < lanes; ++k)
    if (planned[k] > posted[k]) s->lane[k].parts_done(static_cast<int>(planned[k] - posted[k]));  // never posted
  return cause;
}

void StripedLink::settle_sends_locked() {
  std::vector<uint64_t> drained;  // per lane, this pass (sized at the first completion)
  for (auto it = sending_.begin(); it != sending_.end();) {
    Sending& s = *it;
    for (size_t k = 0; k < s.bytes.size(); ++k) {
      if (s.used[k] != 1 || !s.lane[k].done.load(std::memory_order_acquire)) continue;
      s.used[k] = 2;
      queued_[k] -= s.bytes[k];
      if (drained.empty()) drained.assign(lanes_.size(), 0);
      drained[k] += s.bytes[k];
      --s.open;
      if (Request* r = s.req) {
        if (s.lane[k].failed) r->fail(s.lane[k].error);
        r->bytes.fetch_add(s.lane[k].bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
        r->parts_done();
      }
    }
    if (s.open > 0) {
      ++it;
      continue;
    }
    it = sending_.erase(it);
    busy_.fetch_sub(1, std::memory_order_release);
  }
  if (drained.empty()) return;
  const auto now = LaneWindow::Clock::now();
  for (size_t k = 0; k < drained.size(); ++k)
    if (drained[k]) window_.drained(k, drained[k], now);
}

void StripedLink::progress() {
  if (busy_.load(std::memory_order_acquire) == 0) return;
  bool held = false;
  {
    std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) return;
    settle_locked();
    held = !held_.empty() && !must_hold_locked();
  }
  if (held) release_held();
}

bool StripedLink::advance_locked(Waiting& w) {
  const int lanes = static_cast<int>(lanes_.size());
  Request* r = w.req;
  if (!r) return !w.posted || w.note.req.done.load(std::memory_order_acquire);  // cancelled
  std::vector<uint16_t> wt;
  for (;;) {
    const size_t plen = std::min(cut_.part, w.len - w.off);
    std::string bad;
    bool calls_differ = false;  // the sender's message has another length
    if (cut_.stripes(plen)) {
      Request& nr = w.note.req;
      if (!w.posted) {
        nr.arm(peer_, w.tag, w.note.bytes.size(), false, 1);
        bad = lanes_[static_cast<size_t>(cut_.home)]->post_piece(false, w.note.bytes.data(), w.note.bytes.size(),
                                                                  w.tag, &nr, nullptr, w.off == 0);
        if (bad.empty()) {
          w.posted = true;
          return false;
        }
        bad += " (split note)";
      } else if (!nr.done.load(std::memory_order_acquire)) {
        return false;
      } else {
        w.posted = false;
        uint64_t sent = 0;
        bad = nr.failed ? nr.error + " (split note)" : decode(w.note.bytes, lanes, &sent, &wt);
        calls_differ = nr.failed ? nr.misuse : bad.empty() && sent != plen;
        if (nr.failed && nr.misuse)  // the note's own length says nothing: name the receive's
          bad = "count mismatch: rank " + std::to_string(peer_) + " sent a message of another length for this " +
                std::to_string(w.len) + "-byte receive (split note on " + lanes_[static_cast<size_t>(cut_.home)]->describe() + ")";
        if (bad.empty() && sent != plen)
          bad = "count mismatch: rank " + std::to_string(peer_) + " sent a message" +
                (plen == w.len ? "" : " part") + " of " + std::to_string(sent) + " bytes for it (this rank expects " +
                std::to_string(plen) + " bytes" +
                (plen == w.len ? "" : " at offset " + std::to_string(w.off) + " of " + std::to_string(w.len)) + ")";
      }
    } else {
      wt.assign(static_cast<size_t>(lanes), kLaneWeightMax);  // whole on the home lane
    }
    if (bad.empty()) {
      size_t n = 0, posted = 0;
      cut_.each_weighted(plen, wt.data(), [&](int, size_t, size_t) { ++n; });
      r->pending_parts.fetch_add(static_cast<int>(n), std::memory_order_acq_rel);
      bad = post_part(false, w.buf + w.off, plen, w.tag, r, nullptr, w.mr, wt.data(), &posted,
                      w.off == 0 && !cut_.stripes(plen));
      if (!bad.empty()) r->parts_done(static_cast<int>(n - posted));
    }
    if (!bad.empty()) {
      r->fail(bad, calls_differ);
      r->parts_done();  // the hold
      return true;
    }
    w.off += plen;
    if (w.off >= w.len) {
      r->parts_done();  // every part posted: the hold goes
      return true;
    }
  }
}

void StripedLink::settle_locked() {
  if (!sending_.empty()) settle_sends_locked();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    bool earlier = false;  // a receive of the same tag posted before it is not through
    for (auto e = waiting_.begin(); e != it && !earlier; ++e) earlier = e->tag == it->tag;
    if (!earlier && advance_locked(*it)) {
      it = waiting_.erase(it);
      busy_.fetch_sub(1, std::memory_order_release);
    } else {
      ++it;
    }
  }
  for (auto it = sent_.begin(); it != sent_.end();) {
    if (it->req.done.load(std::memory_order_acquire)) {
      it = sent_.erase(it);
      busy_.fetch_sub(1, std::memory_order_release);
    } else {
      ++it;
    }
  }
}

void StripedLink::cancel() {
  std::lock_guard<std::mutex> lk(mu_);
  // The lanes' requests and the notes' receives stay until the lanes are cancelled too.
  for (Sending& x : sending_)
    if (Request* r = std::exchange(x.req, nullptr)) r->abandon("cancelled");
  for (Held& h : held_)
    if (Request* r = std::exchange(h.req, nullptr)) r->abandon("cancelled");
  for (Waiting& w : waiting_)
    if (Request* r = std::exchange(w.req, nullptr)) r->abandon("cancelled");
}

std::string StripedLink::mismatch_note(const Request& r) const {
  for (const auto& l : lanes_)
    if (l->other_length(r)) return FabricLink::count_note(r);
  size_t got = 0;
  for (const auto& l : lanes_)
    if (l->other_call(r, &got)) return call_mismatch_note(r, got);
  return "";
}

std::string StripedLink::pending_note(const Request& r) const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const Sending& x : sending_) {
      if (x.req != &r) continue;
      std::string s;
      for (size_t k = 0; k < x.bytes.size(); ++k)
        if (x.used[k] == 1 && !x.lane[k].done.load(std::memory_order_acquire))
          s += (s.empty() ? "" : " and ") + lanes_[k]->endpoint()->label();
      return s.empty() ? s : "; pieces still pending on " + s;
    }
    for (const Held& h : held_)
      if (h.req == &r)
        return "; held in the send window: every lane to rank " + std::to_string(peer_) +
               " still holds its window (" + std::to_string(window_.window(0)) + " bytes on lane 0) or more";
    for (const Waiting& w : waiting_)
      if (w.req == &r)
        return "; waiting for rank " + std::to_string(peer_) + "'s split note on " +
               lanes_[static_cast<size_t>(cut_.home)]->endpoint()->label();
  }
  std::string s;
  for (const auto& l : lanes_)
    if (l->endpoint()->holds(&r)) s += (s.empty() ? "" : " and ") + l->endpoint()->label();
  return s.empty() ? s : "; pieces still pending on " + s;
}

}  // namespace dccl::net
