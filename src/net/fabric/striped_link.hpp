// The striped Link (net/link.hpp): a pair's large messages cut into pieces over
// several endpoints (net/rails.hpp WireCut, spread_lanes): its rails (parts of at
// least the stripe size), the flows of its rail (parts of at least kFlowsMinBytes:
// each flow its own connection, so that multipath hashing and per-flow caps tell
// them apart), or both, each a FabricLink.
//
// For every part it cuts, the sender says the cut in a note, a small message on the
// home lane ahead of the part's pieces under the message's own tag (its length mark
// tells it apart): equal pieces, or with DCCL_NET_LANE_BALANCE=1 the message filled
// into the lanes with the fewest bytes outstanding (net/fabric/lane_fill.hpp). The
// receiver posts a part's note receive, and the part's piece receives when the note
// arrives (progress()), then the next part's note receive, so both ends cut alike
// (WireCut::each_weighted) and a sender posting part by part (a staged one) meets a
// receiver posting the whole. A note whose part length disagrees with the receive's
// fails the receive at once with a count mismatch. Receives of one tag take their
// notes in the order they were posted, so same-tag messages still pair in order.
//
// Filling lanes by their queues needs queues that tell the lanes apart: a burst of
// messages posted before any piece completes (an allgather's ring posts a whole
// block as 256 KiB messages back to back) would see equal queues and be cut equally.
// So a send waits in this link while every lane holds at least its window
// (DCCL_NET_LANE_WINDOW_BYTES, or a millisecond at the lane's measured rate:
// LaneWindow), and progress() posts it once a lane drained below that, into the lanes
// that drained: a slower lane is handed less. Every lane then still has its window
// in flight, so a fast lane does not idle while the caller is between progress
// calls. Held sends go out in their posting order, and later sends wait behind them.
#pragma once
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/fabric/fabric_link.hpp"
#include "net/fabric/lane_fill.hpp"
#include "net/link.hpp"
#include "net/rails.hpp"

namespace dccl::net {

class StripedLink final : public Link {
 public:
  // `lanes`: the rails in order; `order`: held while one message's pieces are posted,
  // shared by every striped link of the transport so that two threads' messages reach
  // the lanes in one order.
  // `rails` x `flows` lanes (rails >= 2: striped over rails; flows >= 2: over flows).
  // `fixed`: weights to cut by, one per lane (equal pieces, tests); empty: fill the
  // least-queued lanes (net/fabric/lane_fill.hpp).
  StripedLink(int rank, int peer, std::vector<std::unique_ptr<FabricLink>> lanes, WireCut cut,
              std::shared_ptr<std::mutex> order, int rails, int flows, std::vector<uint16_t> fixed = {},
              size_t window = 0);
  ~StripedLink() override;

  size_t stripe_min() const { return cut_.stripe_min; }

  // "tcp;ofi_rxm on eth0, striped over 2 rails", "tcp;ofi_rxm on eth0, over 8 flows",
  // "tcp;ofi_rxm on eth0, striped over 2 rails x 8 flows".
  std::string describe() const override;
  void post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) override;
  // Posts the pieces of receives whose notes arrived, held sends whose turn came,
  // and frees sent notes. The lanes'
  // endpoints are progressed, counted and cancelled as parts (parts()).
  void progress() override;
  const void* engine() const override { return this; }
  // Receives still waiting for their notes fail ("cancelled"); the lanes are cancelled
  // as parts.
  void cancel() override;
  std::vector<std::string> counters() const override { return {}; }
  std::string mismatch_note(const Request& r) const override;
  // The lanes (rails, flows) that still hold pieces of `r`, by their endpoints' labels,
  // or the note a receive waits for.
  std::string pending_note(const Request& r) const override;
  void parts(std::vector<Link*>* out) override {
    for (auto& l : lanes_) out->push_back(l.get());
    out->push_back(this);
  }

  // The split note's length for `lanes` lanes.
  static size_t note_bytes(int lanes) { return 16 + 2 * static_cast<size_t>(lanes); }

 private:
  // One part's split (the note sent ahead of its pieces) and the note's own request.
  struct Note {
    std::vector<unsigned char> bytes;
    Request req;  // the note's own send or receive
  };
  // A receive whose parts are not all posted yet.
  struct Waiting {
    Request* req = nullptr;  // nullptr once cancelled
    char* buf = nullptr;
    size_t len = 0;
    uint64_t tag = 0;
    MemRegion* mr = nullptr;
    size_t off = 0;       // the part it is at
    bool posted = false;  // that part's note receive is posted
    Note note;
  };

  // A send in flight: its pieces on each lane complete a request of that lane's, so
  // that progress() sees each lane's bytes drain; the message's request completes
  // with the last lane.
  struct Sending {
    Request* req = nullptr;  // nullptr once cancelled
    std::vector<uint8_t> used;    // per lane: carries pieces (1), seen done (2)
    std::vector<uint64_t> bytes;  // per lane
    std::unique_ptr<Request[]> lane;
    int open = 0;  // lanes with pieces not yet seen done
  };

  // A send waiting for a lane to drain below the window.
  struct Held {
    char* buf;
    size_t len;
    uint64_t tag;
    Request* req;  // nullptr once cancelled
    MemRegion* mr;
  };

  void post_send(char* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr);
  // Under order_, right after settle_sends_locked() (post_send, release_held): cuts
  // and posts one send now; "" or the cause (req then failed).
  std::string send_now(char* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr);
  // Under mu_: whether a send posted now must wait (every lane holds a window).
  bool must_hold_locked() const;
  // Posts held sends while the lanes drained below the window (takes order_ if free).
  void release_held();
  // Sends the note for a part of plen bytes split by w: "" or the cause.
  std::string send_note(size_t plen, const uint16_t* w, uint64_t tag);
  // Posts the pieces of one part (plen <= the cut's part) for `req`, or for lane k's
  // request per_lane[k] when given, counting them in posted[lane]: "" or the cause
  // (the rest of the part then not posted). `first`: a receive's first part, whose
  // piece at offset 0 checks the sender's length (Endpoint::post_one).
  std::string post_part(bool send, char* part, size_t plen, uint64_t tag, Request* req, Request* per_lane,
                        MemRegion* mr, const uint16_t* w, size_t* posted, bool first = false);
  // Under mu_: moves receive w on as far as its notes have come; true once every part
  // is posted (or it failed).
  bool advance_locked(Waiting& w);
  // Under mu_: receives whose turn it is move on; sends' lanes seen done complete
  // their requests; sent notes that completed are freed.
  void settle_locked();
  void settle_sends_locked();
  void raise_post(bool send, const std::string& cause) const;

  int rank_, peer_;
  std::vector<std::unique_ptr<FabricLink>> lanes_;
  WireCut cut_;
  std::shared_ptr<std::mutex> order_;
  int rails_, flows_;
  std::vector<uint16_t> fixed_;
  mutable std::mutex mu_;
  std::list<Waiting> waiting_;  // in posting order
  std::list<Note> sent_;        // notes in flight
  std::list<Sending> sending_;
  std::vector<uint64_t> queued_;  // per lane: bytes of sending_ not yet seen done
  LaneWindow window_;             // when a send waits (net/fabric/lane_fill.hpp)
  std::list<Held> held_;          // in posting order
  std::atomic<size_t> busy_{0};  // waiting_, sent_, sending_ and held_ entries
};

}  // namespace dccl::net
