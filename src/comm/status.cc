#include "comm/status.hpp"

#include <unistd.h>

#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::comm {

namespace {
// A JSON string's body: the host and call names are plain, but quote what could break a line.
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    o.push_back(static_cast<unsigned char>(c) < 0x20 ? '?' : c);
  }
  return o + "\"";
}
}  // namespace

StatusPublisher::StatusPublisher(const boot::UniqueIdData& id, int rank, int nranks, const std::string& ns,
                                 std::string host, core::Recorder& rec, std::function<dcclStats_t()> stats,
                                 std::chrono::milliseconds period, std::chrono::milliseconds connect_timeout)
    : rank_(rank), nranks_(nranks), host_(std::move(host)), rec_(rec), stats_(std::move(stats)), period_(period) {
  conn_ = std::make_unique<boot::Bootstrap>(id, rank, nranks, connect_timeout, nullptr, ns, boot::Bootstrap::Role::Watch);
  thread_ = std::thread([this, log_rank = core::log_rank()] {
    core::log_set_rank(log_rank);  // the communicator's log rank (a split child's: its parent's)
    run();
  });
}

StatusPublisher::~StatusPublisher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  conn_->interrupt();
  if (thread_.joinable()) thread_.join();
}

std::string StatusPublisher::record() const {
  core::RecEntry e;
  const bool any = rec_.latest(&e);
  const bool running = any && e.result < 0;
  const dcclStats_t s = stats_();
  char nums[512];
  snprintf(nums, sizeof(nums),
           "\"rank\":%d,\"nranks\":%d,\"pid\":%d,\"time_ns\":%lld,\"calls\":%llu,\"last_progress_ns\":%lld,"
           "\"ops\":%llu,\"bytes_sent\":%llu,\"bytes_recv\":%llu",
           rank_, nranks_, static_cast<int>(getpid()), static_cast<long long>(core::Recorder::now_ns()),
           static_cast<unsigned long long>(rec_.calls()), static_cast<long long>(rec_.last_progress_ns()),
           static_cast<unsigned long long>(s.ops), static_cast<unsigned long long>(s.bytesSentDirect),
           static_cast<unsigned long long>(s.bytesRecvDirect));
  std::string out = "{";
  out.append(nums);
  out.append(",\"host\":");
  out.append(quoted(host_));
  out.append(",\"state\":");
  out.append(running ? "\"in call\"" : any ? "\"idle\"" : "\"no call yet\"");
  if (any) {
    snprintf(nums, sizeof(nums), ",\"seq\":%llu,\"count\":%llu,\"start_ns\":%lld,\"end_ns\":%lld,\"steps\":%u,\"result\":%d",
             static_cast<unsigned long long>(e.seq), static_cast<unsigned long long>(e.count),
             static_cast<long long>(core::Recorder::ns(e.start_t)), static_cast<long long>(core::Recorder::ns(e.end_t)), e.nsteps + e.dropped, e.result);
    out += nums;
    for (const auto& [key, value] : {std::pair<const char*, const char*>{",\"coll\":", e.coll},
                                     {",\"type\":", e.type}, {",\"algo\":", e.algo}}) {
      out.append(key);
      out.append(quoted(value));
    }
  }
  return out + "}";
}

void StatusPublisher::run() {
  std::string seen;  // the dump generation taken last
  for (;;) {
    try {
      conn_->set("status/" + std::to_string(rank_), record());
      if (rank_ == 0) conn_->set("status/n", std::to_string(nranks_));
      rec_.store_reached();
      // Rank 0 made the key at init: the first read waits for it, later ones answer at once.
      const std::string gen = conn_->get(StatusPublisher::kDumpKey, std::chrono::hours(24));
      if (!seen.empty() && gen != seen) {
        DCCL_INFO("flight recorder: dump %s asked for by another rank", gen.c_str());
        rec_.dump(("asked for through the store (request " + gen + ")").c_str());
      }
      seen = gen;
    } catch (const core::Error& e) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!stopping_) DCCL_INFO("status record: the store is out of reach (%s); no more status records", e.what());
      return;
    }
    std::unique_lock<std::mutex> lk(mu_);
    if (cv_.wait_for(lk, period_, [this] { return stopping_; })) return;
  }
}

}  // namespace dccl::comm
