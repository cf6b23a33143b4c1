// ProcessGroupDCCL's point-to-point side: send, recv, recv from any source, the
// batches of batch_isend_irecv (coalescing), and gather and scatter, built from
// DirectCCL's send and recv inside one dcclGroupStart/End.
#include "process_group.hpp"

#include <stdexcept>

#include "errors.hpp"

namespace torch_dccl {

void ProcessGroupDCCL::exchange(const std::string& op, const std::vector<Transfer>& sends,
                                const std::vector<Transfer>& recvs) const {
  dcclResult_t first = dcclSuccess;
  std::string text;
  auto note = [&](dcclResult_t r) {
    if (r != dcclSuccess && first == dcclSuccess) {
      first = r;
      text = dccl_text(r, comm_);  // now: the next call on this thread replaces it
    }
  };
  check(dcclGroupStart(), op);
  for (const auto& s : sends)
    if (s.bytes) note(dcclSend(s.data, s.bytes, dcclUint8, s.peer, comm_, nullptr));
  for (const auto& r : recvs)
    if (r.bytes) note(dcclRecv(r.data, r.bytes, dcclUint8, r.peer, comm_, nullptr));
  note(dcclGroupEnd());  // closes the group even after a refused call
  if (first != dcclSuccess) fail(rank_, size_, op, text);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const std::string op = "send";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const Place place = check_tensor(t, rank_, size_, op);
  check_peer(dstRank, op);
  if (coalescing_) {
    batch_sends_.emplace_back(t, dstRank);
    batch_place_ = place;
    batch_works_.push_back(c10::make_intrusive<WorkDCCL>(rank_, size_, c10d::OpType::SEND, op, std::vector<at::Tensor>{}, timeout_, 0));
    return batch_works_.back();
  }
  // Tags are not matched: messages between two ranks arrive in the order sent.
  return enqueue(c10d::OpType::SEND, op, {}, timeout_, place, std::nullopt, [this, op, t, dstRank] {
    Dense d(t);
    announce_send(dstRank);
    check(dcclSend(d.data(), d.bytes(), dcclUint8, dstRank, comm_, nullptr), op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const std::string op = "recv";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const Place place = check_tensor(t, rank_, size_, op);
  check_peer(srcRank, op);
  if (coalescing_) {
    batch_recvs_.emplace_back(t, srcRank);
    batch_place_ = place;
    batch_works_.push_back(c10::make_intrusive<WorkDCCL>(rank_, size_, c10d::OpType::RECV, op, std::vector<at::Tensor>{t}, timeout_, 0));
    return batch_works_.back();
  }
  auto work = enqueue(c10d::OpType::RECV, op, {t}, timeout_, place, std::nullopt, [this, op, t, srcRank] {
    Dense d(t);
    check(dcclRecv(d.data(), d.bytes(), dcclUint8, srcRank, comm_, nullptr), op);
    note_received(srcRank);
    d.finish();
  });
  work->set_source_rank(srcRank);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  const std::string op = "recv (any source)";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const Place place = check_tensor(t, rank_, size_, op);
  if (coalescing_) fail(rank_, size_, op, "a receive from any source cannot be batched");
  // The worker may run the job before enqueue returns: it learns the sender
  // into a cell it shares with the Work, never through the Work itself.
  auto source = std::make_shared<std::atomic<int>>(-1);
  const auto timeout = timeout_;
  auto work = enqueue(c10d::OpType::RECVANYSOURCE, op, {t}, timeout, place, std::nullopt,
                      [this, op, t, source, timeout] {
                        const int src = take_any_source(op, timeout);
                        source->store(src);
                        Dense d(t);
                        check(dcclRecv(d.data(), d.bytes(), dcclUint8, src, comm_, nullptr), op);
                        note_received(src);
                        d.finish();
                      });
  work->share_source_rank(source);
  return work;
}

void ProcessGroupDCCL::startCoalescing() {
  const std::string op = "start_coalescing";
  usable(op);
  if (coalescing_) fail(rank_, size_, op, "coalescing already started");
  coalescing_ = true;
  batch_sends_.clear();
  batch_recvs_.clear();
  batch_works_.clear();
  batch_place_ = Place{};
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::endCoalescing() {
  const std::string op = "batch_isend_irecv";
  if (!coalescing_) fail(rank_, size_, "end_coalescing", "coalescing was not started");
  coalescing_ = false;
  auto sends = std::move(batch_sends_);
  auto recvs = std::move(batch_recvs_);
  auto works = std::move(batch_works_);
  std::vector<at::Tensor> outs;
  for (const auto& [t, peer] : recvs) outs.push_back(t);
  // The Work of each send and recv in the batch completes with the batch's.
  struct Members {
    std::vector<c10::intrusive_ptr<WorkDCCL>> works;
    ~Members() {
      for (auto& w : works)
        if (!w->isCompleted()) w->complete(std::make_exception_ptr(std::runtime_error("the batch was dropped")));
    }
  };
  auto members = std::make_shared<Members>();
  members->works = std::move(works);
  return enqueue(c10d::OpType::COALESCED, op, outs, timeout_, batch_place_, std::nullopt, [this, op, sends, recvs, members] {
    try {
      run_batch(op, sends, recvs);
    } catch (...) {
      for (auto& w : members->works) w->complete(std::current_exception());
      members->works.clear();
      throw;
    }
    for (auto& w : members->works) w->complete(nullptr);
    members->works.clear();
  });
}

void ProcessGroupDCCL::run_batch(const std::string& op, const std::vector<std::pair<at::Tensor, int>>& sends,
                                 const std::vector<std::pair<at::Tensor, int>>& recvs) {
    std::vector<Dense> src, dst;
    std::vector<Transfer> s, r;
    src.reserve(sends.size());
    dst.reserve(recvs.size());
    for (const auto& [t, peer] : sends) {
      src.emplace_back(t);
      s.push_back({peer, src.back().data(), src.back().bytes()});
      announce_send(peer);
    }
    for (const auto& [t, peer] : recvs) {
      dst.emplace_back(t);
      r.push_back({peer, dst.back().data(), dst.back().bytes()});
    }
    exchange(op, s, r);
    for (const auto& [t, peer] : recvs) note_received(peer);
    for (auto& d : dst) d.finish();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  const std::string op = "gather";
  const at::Tensor& in = single(inputs, rank_, size_, op);
  const Place place = check_tensor(in, rank_, size_, op);
  check_peer(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
      fail(rank_, size_, op, "the root expects one output list of " + std::to_string(size_) + " tensors");
    outs = outputs[0];
    for (size_t i = 0; i < outs.size(); ++i) check_same(in, outs[i], true, rank_, size_, op, "output " + std::to_string(i));
  } else if (!outputs.empty() && !(outputs.size() == 1 && outputs[0].empty())) {
    fail(rank_, size_, op, "only the root (rank " + std::to_string(root) + ") passes output tensors");
  }
  const Call call{c10d::OpType::GATHER, in.scalar_type(), in.numel(), root};
  return enqueue(c10d::OpType::GATHER, op, outs, bound(opts.timeout), place, call, [this, op, in, outs, root] {
    Dense src(in);
    if (rank_ != root) {
      exchange(op, {{root, src.data(), src.bytes()}}, {});
      return;
    }
    std::vector<Dense> dst;
    std::vector<Transfer> recvs;
    dst.reserve(outs.size());
    for (int p = 0; p < size_; ++p) {
      dst.emplace_back(outs[static_cast<size_t>(p)]);
      if (p != root) recvs.push_back({p, dst.back().data(), dst.back().bytes()});
    }
    exchange(op, {}, recvs);
    outs[static_cast<size_t>(root)].copy_(in.reshape(outs[static_cast<size_t>(root)].sizes()));
    for (int p = 0; p < size_; ++p)
      if (p != root) dst[static_cast<size_t>(p)].finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  const std::string op = "scatter";
  const at::Tensor& out = single(outputs, rank_, size_, op);
  const Place place = check_tensor(out, rank_, size_, op);
  check_peer(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
      fail(rank_, size_, op, "the root expects one input list of " + std::to_string(size_) + " tensors");
    ins = inputs[0];
    for (size_t i = 0; i < ins.size(); ++i) check_same(out, ins[i], true, rank_, size_, op, "input " + std::to_string(i));
  } else if (!inputs.empty() && !(inputs.size() == 1 && inputs[0].empty())) {
    fail(rank_, size_, op, "only the root (rank " + std::to_string(root) + ") passes input tensors");
  }
  const Call call{c10d::OpType::SCATTER, out.scalar_type(), out.numel(), root};
  return enqueue(c10d::OpType::SCATTER, op, {out}, bound(opts.timeout), place, call, [this, op, out, ins, root] {
    Dense dst(out);
    if (rank_ != root) {
      exchange(op, {}, {{root, dst.data(), dst.bytes()}});
      dst.finish();
      return;
    }
    std::vector<Dense> src;
    std::vector<Transfer> sends;
    src.reserve(ins.size());
    for (int p = 0; p < size_; ++p) {
      src.emplace_back(ins[static_cast<size_t>(p)]);
      if (p != root) sends.push_back({p, src.back().data(), src.back().bytes()});
    }
    exchange(op, sends, {});
    out.copy_(ins[static_cast<size_t>(root)].reshape(out.sizes()));
  });
}

}  // namespace torch_dccl
