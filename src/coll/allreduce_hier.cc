// Hierarchical allreduce (see hier.hpp). Averages are summed at every level and
// divided once at the end, so integer averages truncate as the flat ones do.
//
// Large vectors run in pieces of about piece_bytes(): reduce-scatter of piece
// p+1 on the host and allgather of piece p-1 run while the cross-host allreduce
// of piece p is on the network, so the links idle only for the first piece's
// reduce-scatter and the last one's allgather.
#include <algorithm>

#include "coll/hier.hpp"
#include "core/types.hpp"

namespace dccl::coll {

namespace {

// Elements [first, first + rows * L) of the vector; local rank l owns
// [first + l * rows, first + (l + 1) * rows).
struct Piece {
  size_t first = 0, rows = 0;
};

SubOp piece_step(const SubOp& s, const Piece& p, SubColl coll, int l, size_t es) {
  SubOp t = s;
  t.coll = coll;
  t.count = p.rows;
  char* mine = static_cast<char*>(s.recv) + (p.first + static_cast<size_t>(l) * p.rows) * es;
  switch (coll) {
    case SubColl::ReduceScatter:  // in place when send == recv
      t.send = static_cast<const char*>(s.send) + p.first * es;
      t.recv = mine;
      break;
    case SubColl::AllReduce:  // this rank's shard, in place
      t.send = mine;
      t.recv = mine;
      break;
    default:  // AllGather, in place: send = recv + l * rows
      t.send = mine;
      t.recv = static_cast<char*>(s.recv) + p.first * es;
      break;
  }
  return t;
}

void pieces(Hierarchy& lv, const SubOp& s, size_t rows_total, size_t es) {
  const int L = lv.local_size();
  const int l = lv.local_rank();
  const size_t row_bytes = es * static_cast<size_t>(L);
  size_t per = lv.piece_bytes() / row_bytes;
  if (per == 0 || lv.piece_bytes() == 0) per = rows_total;
  struct Drain {
    Hierarchy& lv;
    ~Drain() { lv.cross_drain(); }  // a step failed: the running cross step must end first
  } drain{lv};
  Piece prev;
  bool have_prev = false;
  for (size_t r = 0; r < rows_total; r += per) {
    const Piece cur{r * static_cast<size_t>(L), std::min(per, rows_total - r)};
    lv.local(piece_step(s, cur, SubColl::ReduceScatter, l, es));
    lv.cross_wait();
    lv.cross_start(piece_step(s, cur, SubColl::AllReduce, l, es));
    if (have_prev) lv.local(piece_step(s, prev, SubColl::AllGather, l, es));
    prev = cur;
    have_prev = true;
  }
  lv.cross_wait();
  lv.local(piece_step(s, prev, SubColl::AllGather, l, es));
}

}  // namespace

void allreduce_hier(Hierarchy& lv, const SubOp& a) {
  expect_coll(a, SubColl::AllReduce, "allreduce_hier");
  const size_t es = core::dtype_size(a.dt);
  const int L = lv.local_size();
  SubOp s = a;
  s.op = a.op == dcclAvg ? dcclSum : a.op;
  const size_t rows = a.count / static_cast<size_t>(L);
  if (a.count * es <= kHierShardBytes || rows == 0) {
    s.coll = SubColl::AllReduce;
    lv.local(s);  // recv = this host's sum
    s.send = a.recv;
    lv.cross(s);  // in place: every local rank, its own cross-host communicator
  } else {
    pieces(lv, s, rows, es);
    // The tail (count % L elements) goes the small way afterwards.
    const size_t done = rows * static_cast<size_t>(L);
    if (done < a.count) {
      s.coll = SubColl::AllReduce;
      s.count = a.count - done;
      s.send = static_cast<const char*>(a.send) + done * es;
      s.recv = static_cast<char*>(a.recv) + done * es;
      lv.local(s);
      s.send = s.recv;
      lv.cross(s);
    }
  }
  if (a.op == dcclAvg) lv.divide(a.recv, a.count, a.dt, L * lv.hosts());
}

}  // namespace dccl::coll
