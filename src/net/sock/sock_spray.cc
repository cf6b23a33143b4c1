// SockPath over several flows per pair (net/sock/sock_path.hpp, net/sock/spray.hpp):
// a large message announced on the lead flow, its chunks handed to whichever flow
// has the fewest bytes queued, placed at their offsets by the receiver; a flow that
// fails fails its pair.
#include <algorithm>
#include <cstring>

#include "net/sock/sock_path.hpp"
#include "net/sock/spray.hpp"
#include "net/transport.hpp"

namespace dccl::net {

int SockPath::flows(int peer) const {
  const Conn* c = conn_of(peer);
  if (!c) return 0;
  return c->flows.empty() ? 1 : static_cast<int>(c->flows.size());
}

std::vector<uint64_t> SockPath::flow_bytes_sent(int peer) {
  std::vector<uint64_t> out;
  Conn* c = conn_of(peer);
  std::lock_guard<std::mutex> lk(mu_);
  if (c)
    for (const Conn* f : c->flows) out.push_back(f->sent);
  return out;
}

void SockPath::post_spray_locked(Conn& c, const char* buf, size_t len, uint64_t tag, Request* req) {
  const uint32_t seq = c.tx_seq++ & spray::kSeqMask;
  Tx a{nullptr, {}, nullptr, 0, 0, 0};
  put_header(a.hdr, tag, spray::kAnnounce | len);
  c.txq.push_back(a);
  if (c.txq.size() == 1) write_locked(c);
  const size_t chunk = spray::chunk_bytes(len, static_cast<int>(c.flows.size()));
  req->pending_parts.store(static_cast<int>((len + chunk - 1) / chunk), std::memory_order_release);
  c.spray_q.push_back(TxSpray{req, buf, len, 0, chunk, seq});
  schedule_locked(c);
}

void SockPath::schedule_locked(Conn& lead) {
  std::vector<size_t> queued(lead.flows.size());
  bool measured = false;
  while (!lead.spray_q.empty() && lead.dead.empty()) {
    if (!measured)
      for (size_t i = 0; i < lead.flows.size(); ++i) {
        const Conn& f = *lead.flows[i];
        queued[i] = f.dead.empty() ? f.tx_bytes + unacked_bytes(f.fd) : SIZE_MAX;
      }
    measured = true;
    const int k = spray::pick_flow(queued, window_);
    if (k < 0) return;
    TxSpray& s = lead.spray_q.front();
    const size_t n = std::min(s.chunk, s.len - s.next);
    Conn& f = *lead.flows[static_cast<size_t>(k)];
    Tx t{s.req, {}, s.buf + s.next, n, 0, s.len};
    put_header(t.hdr, s.next, spray::chunk_word(s.seq, static_cast<uint32_t>(n)));
    f.txq.push_back(t);
    f.tx_bytes += n;
    queued[static_cast<size_t>(k)] += n;
    s.next += n;
    if (s.next == s.len) lead.spray_q.pop_front();
    if (f.txq.size() == 1 && write_locked(f)) measured = false;  // what the kernel took shows in SIOCOUTQ
  }
}

void SockPath::start_spray_locked(Conn& c) {
  RxSpray& s = c.rx_sprays.emplace_back();
  s.seq = c.rx_seq++ & spray::kSeqMask;
  s.len = c.len;
  s.dst = c.dst;
  s.req = c.req;
  s.ux = c.filling;
  c.spray = false;
  c.in_payload = false;
  c.req = nullptr;
  c.filling = nullptr;
  // Flows that read a chunk of it before its announcement go on.
  for (Conn* f : c.flows) {
    if (f->wait_seq != static_cast<int64_t>(s.seq)) continue;
    f->wait_seq = -1;
    f->held = false;
    watch_locked(*f, true);
    begin_chunk_locked(*f, f->tag, f->len);  // the header kept when it waited
    std::vector<char> rest = std::move(f->leftover);
    f->leftover.clear();
    int done = 0;
    if (!rest.empty() && f->dead.empty()) consume_locked(*f, rest.data(), rest.size(), &done);
  }
}

void SockPath::begin_chunk_locked(Conn& c, uint64_t off, uint64_t word) {
  c.hdr_got = 0;
  Conn& lead = *c.lead;
  const uint32_t seq = spray::chunk_seq(word);
  const size_t n = spray::chunk_len(word);
  auto it = std::find_if(lead.rx_sprays.begin(), lead.rx_sprays.end(), [&](const RxSpray& s) { return s.seq == seq; });
  if (it == lead.rx_sprays.end()) {
    if (!spray::seq_ahead(seq, lead.rx_seq & spray::kSeqMask) || &c == &lead) {
      fail_conn_locked(c, "rank " + std::to_string(c.peer) + " sent a chunk of message " + std::to_string(seq) +
                              ", which is not being received");
      return;
    }
    // Its announcement is still on the way on the lead flow: wait for it.
    c.wait_seq = seq;
    c.tag = off;
    c.len = static_cast<size_t>(word);
    c.held = true;
    watch_locked(c, false);
    return;
  }
  if (off > it->len || n > it->len - off || n == 0) {
    fail_conn_locked(c, "rank " + std::to_string(c.peer) + " sent a chunk at offset " + std::to_string(off) + " of " +
                            std::to_string(n) + " bytes for a " + std::to_string(it->len) + "-byte message");
    return;
  }
  c.chunk_of = &*it;
  c.dst = it->dst + off;
  c.len = n;
  c.got = 0;
  c.req = nullptr;
  c.filling = nullptr;
  c.in_payload = true;
}

void SockPath::finish_chunk_locked(Conn& c, int* done) {
  RxSpray& s = *c.chunk_of;
  c.chunk_of = nullptr;
  c.in_payload = false;
  s.got += c.len;
  if (s.got < s.len) return;
  Conn& lead = *c.lead;
  if (s.req) {
    if (s.user) memcpy(s.user, s.dst, s.len);
    ++*done;
    s.req->bytes.store(s.len, std::memory_order_relaxed);
    s.req->parts_done();
  } else if (s.ux) {
    s.ux->complete = true;
  }
  lead.rx_sprays.remove_if([&](const RxSpray& x) { return &x == &s; });
}

bool SockPath::take_arriving_locked(Conn& c, Unexpected& u, Request* req, char* dst) {
  for (RxSpray& s : c.rx_sprays) {
    if (s.ux != &u) continue;
    s.ux = nullptr;
    s.req = req;
    s.user = dst;
    s.own = std::move(u.data.p);  // s.dst points into it
    return true;
  }
  return false;
}

std::string SockPath::flow_note(const Conn& c) const {
  const Conn& lead = *c.lead;
  if (lead.flows.size() < 2) return "";
  return " (socket flow " + std::to_string(c.flow) + " of " + std::to_string(lead.flows.size()) + " to rank " +
         std::to_string(c.peer) + ")";
}

// A flow that fails takes its pair with it: the messages in flight are spread over
// every flow.
void SockPath::fail_conn_locked(Conn& c, const std::string& why, bool keep_arrived) {
  Conn& lead = *c.lead;
  if (!lead.dead.empty() && !c.dead.empty()) {
    if (!keep_arrived) {  // cancelled after the peer closed: what arrived goes too
      fail_flow_locked(c, why, false);
      for (Conn* f : lead.flows) fail_flow_locked(*f, why, false);
    }
    return;
  }
  const std::string text = why + flow_note(c);
  for (TxSpray& s : lead.spray_q) {
    s.req->fail(text);
    s.req->parts_done(static_cast<int>((s.len - s.next + s.chunk - 1) / s.chunk));
  }
  lead.spray_q.clear();
  for (RxSpray& s : lead.rx_sprays)
    if (s.req) {
      s.req->fail(text);
      s.req->parts_done();
    }
  lead.rx_sprays.clear();
  fail_flow_locked(c, text, keep_arrived);
  for (Conn* f : lead.flows) fail_flow_locked(*f, text, keep_arrived);
}

}  // namespace dccl::net
