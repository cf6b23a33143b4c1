// ProcessGroupDCCL's uses of the c10d store: the rendezvous of the DirectCCL id,
// the announcements that let recvAnysource learn who sent, and monitoredBarrier.
// Every wait on the store is bounded by the group's timeout.
#include "process_group.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "errors.hpp"

namespace torch_dccl {

namespace {

std::string any_key(const std::string& keys, int dst) { return keys + "any/" + std::to_string(dst); }
std::string any_key(const std::string& keys, int dst, int64_t k) {
  return any_key(keys, dst) + "/" + std::to_string(k);
}

}  // namespace

// Every key this group writes lies under "torch_dccl/<n>/", n the group's number
// among the DirectCCL groups made on this store (PyTorch hands each group a
// PrefixStore of its own, but a group made again after destroy_process_group gets
// the same one): counted per rank, the same on every rank, so that a group made
// again never reads the last one's id or announcements.
void ProcessGroupDCCL::number_keys() {
  keys_ = "torch_dccl/" + std::to_string(store_->add("torch_dccl/groups/" + std::to_string(rank_), 1)) + "/";
}

void ProcessGroupDCCL::rendezvous(const c10::intrusive_ptr<c10d::Store>& store, dcclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  const std::string id_key = keys_ + "unique_id";  // where rank 0 publishes the dcclUniqueId
  if (rank_ == 0) {
    const dcclResult_t r = dcclGetUniqueId(id);
    if (r != dcclSuccess) fail(rank_, size_, "init: dcclGetUniqueId", dccl_text(r, nullptr));
    store->set(id_key, std::vector<uint8_t>(id->internal, id->internal + sizeof id->internal));
    return;
  }
  std::vector<uint8_t> v;
  try {
    store->wait({id_key}, timeout_);
    v = store->get(id_key);
  } catch (const std::exception& e) {
    fail(rank_, size_, "init", std::string("rank 0's DirectCCL id did not arrive through the store: ") + e.what());
  }
  if (v.size() != sizeof id->internal)
    fail(rank_, size_, "init", "the store's DirectCCL id has " + std::to_string(v.size()) + " bytes, expected " +
                                   std::to_string(sizeof id->internal));
  std::memcpy(id->internal, v.data(), v.size());
}

// Sends to dst are numbered in one sequence per destination (the store's
// counter); announcement k names the sender of dst's k-th message. Messages
// from one sender arrive in the order sent, so dst's next message from any
// source is the first announcement not already taken by a receive.
void ProcessGroupDCCL::announce_send(int dst) {
  if (!any_source_) return;
  const int64_t k = store_->add(any_key(keys_, dst), 1);
  const std::string me = std::to_string(rank_);
  store_->set(any_key(keys_, dst, k), std::vector<uint8_t>(me.begin(), me.end()));
}

void ProcessGroupDCCL::note_received(int src) { ++taken_[static_cast<size_t>(src)]; }

int ProcessGroupDCCL::take_any_source(const std::string& op, std::chrono::milliseconds timeout) {
  if (!any_source_)
    fail(rank_, size_, op, "receiving from any source needs TORCH_DCCL_ANY_SOURCE=1 on every rank (the default)");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const int64_t k = announcements_seen_ + 1;
    const std::string key = any_key(keys_, rank_, k);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) fail(rank_, size_, op, "no rank sent to this one within " + std::to_string(timeout.count()) + " ms");
    try {
      store_->wait({key}, left);
    } catch (const std::exception&) {
      fail(rank_, size_, op, "no rank sent to this one within " + std::to_string(timeout.count()) + " ms");
    }
    const auto v = store_->get(key);
    store_->deleteKey(key);
    announcements_seen_ = k;
    const int src = std::stoi(std::string(v.begin(), v.end()));
    if (src < 0 || src >= size_) fail(rank_, size_, op, "the store names sender " + std::to_string(src));
    // Announcements of messages a receive from that rank already took are passed over.
    if (++seen_[static_cast<size_t>(src)] > taken_[static_cast<size_t>(src)]) return src;
  }
}

void ProcessGroupDCCL::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  const std::string op = "monitored_barrier";
  usable(op);
  const auto timeout = bound(opts.timeout);
  const std::string base = keys_ + "monitored/" + std::to_string(++monitored_) + "/";
  // Every rank checks in; rank 0 waits for each, names the missing ones, and
  // lets the others go (or tells them who failed).
  store_->set(base + std::to_string(rank_), std::vector<uint8_t>{1});
  if (rank_ != 0) {
    // Rank 0's verdict comes about `timeout` after rank 0 arrived, which may be later
    // than this rank: past the timeout, wait a grace (up to another timeout, at most
    // 5 s) for it, so that every rank names the same missing ranks.
    const auto grace = std::min(timeout, std::chrono::milliseconds(5000));
    try {
      store_->wait({base + "done"}, timeout + grace);
    } catch (const std::exception&) {
      fail(rank_, size_, op, "rank 0 did not release the barrier within " + std::to_string((timeout + grace).count()) +
                                 " ms (the timeout and a grace for rank 0's verdict)");
    }
    const auto v = store_->get(base + "done");
    if (!v.empty() && v[0] != 'o') fail(rank_, size_, op, std::string(v.begin(), v.end()));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 1) left = std::chrono::milliseconds(1);
    try {
      store_->wait({base + std::to_string(r)}, left);
    } catch (const std::exception&) {
      missing.push_back(r);
      if (!waitAllRanks) break;
    }
  }
  if (missing.empty()) {
    store_->set(base + "done", std::vector<uint8_t>{'o', 'k'});
    return;
  }
  std::string list;
  for (int r : missing) list.append(list.empty() ? "" : ", ").append(std::to_string(r));
  const std::string why = "rank" + std::string(missing.size() > 1 ? "s " : " ") + list +
                          " did not reach the barrier within " + std::to_string(timeout.count()) + " ms";
  store_->set(base + "done", std::vector<uint8_t>(why.begin(), why.end()));
  fail(rank_, size_, op, why);
}

}  // namespace torch_dccl
