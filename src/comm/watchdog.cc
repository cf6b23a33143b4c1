#include "comm/watchdog.hpp"
#include "core/host.hpp"

#include <unistd.h>

#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::comm {

using core::Error;
using core::log_set_rank;

namespace {
constexpr const char* kKey = "failed";
// The announcement carries the result code: "<code>|<text>".
std::string encode(dcclResult_t code, const std::string& text) { return std::to_string(code) + "|" + text; }
void decode(const std::string& v, dcclResult_t* code, std::string* text) {
  auto bar = v.find('|');
  *code = dcclRemoteError;
  *text = v;
  if (bar == std::string::npos || bar == 0 || bar > 3) return;
  int c = atoi(v.substr(0, bar).c_str());
  if (c > 0 && c < dcclNumResults) *code = static_cast<dcclResult_t>(c);
  *text = v.substr(bar + 1);
}
}  // namespace

std::string rank_who(const std::string& label) {
  return label + " (pid " + std::to_string(getpid()) + " on " + core::host_name() + ")";
}

Watchdog::Watchdog(const boot::UniqueIdData& id, int rank, const std::string& label, int nranks,
                   const std::string& ns, boot::Bootstrap& boot, std::mutex& boot_mu,
                   std::function<void(dcclResult_t, const std::string&)> on_failure,
                   std::chrono::milliseconds connect_timeout)
    : boot_(boot), boot_mu_(boot_mu) {
  {
    std::lock_guard<std::mutex> lk(boot_mu_);
    boot_.lease(kKey, encode(dcclRemoteError,
                             rank_who(label) + " exited or lost its connection without destroying its communicator"));
  }
  watch_ = std::make_unique<boot::Bootstrap>(id, rank, nranks, connect_timeout, nullptr, ns,
                                             boot::Bootstrap::Role::Watch);
  std::string store = "the bootstrap store at " + watch_->store_address();
  if (!watch_->store_host().empty()) store += ", hosted by " + watch_->store_host();
  thread_ = std::thread([this, log_rank = core::log_rank(), store, on_failure = std::move(on_failure)] {
    log_set_rank(log_rank);
    try {
      dcclResult_t code;
      std::string text;
      const std::string v = watch_->get(kKey, std::chrono::hours(24 * 365));
      {
        // This rank's own report: whoever announced it stopped the communicator already.
        std::lock_guard<std::mutex> lk(announce_mu_);
        if (!own_.empty() && v == own_) return;
      }
      decode(v, &code, &text);
      on_failure(code, text);
    } catch (const Error& e) {
      if (stopping_.load() || std::string(e.what()).find("interrupted") != std::string::npos) return;  // destroy
      if (e.code() == dcclTimeout) {  // a year without news
        DCCL_INFO("failure watch ended: %s", e.what());
        return;
      }
      if (e.code() == dcclInvalidUsage) {  // the store failed the communicator's namespace
        on_failure(e.code(), e.what());
        return;
      }
      // The store's connection is itself a lease on its host: when it breaks, the
      // process that hosts the store exited (or the network to it broke), and
      // neither failure reports nor the destroy barrier can work any more.
      on_failure(dcclRemoteError, "lost " + store + ": that process exited or the network to it broke (" +
                                      e.what() + ")");
    }
  });
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop(bool graceful) {
  {
    std::lock_guard<std::mutex> lk(announce_mu_);
    announced_ = true;  // no announcement from here on
    if (stopped_) return;
    stopped_ = true;
  }
  if (announcer_.joinable()) announcer_.join();
  if (graceful) release();
  stopping_.store(true);
  watch_->interrupt();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::announce(dcclResult_t code, const std::string& text) {
  std::lock_guard<std::mutex> lk(announce_mu_);
  if (announced_) return;  // the first one wins at the store anyway
  announced_ = true;
  own_ = encode(code, text);
  announcer_ = std::thread([this, log_rank = core::log_rank(), value = own_] {
    log_set_rank(log_rank);
    std::lock_guard<std::mutex> blk(boot_mu_);
    try {
      boot_.set(kKey, value, kAnnounceBound);
    } catch (const Error& e) {
      DCCL_WARN("could not announce the failure to the other ranks: %s", e.what());
    }
  });
}

void Watchdog::release() {
  std::lock_guard<std::mutex> lk(boot_mu_);
  if (released_) return;
  released_ = true;
  try {
    boot_.unlease();
  } catch (const Error& e) {
    DCCL_INFO("releasing the failure lease: %s", e.what());
  }
}

}  // namespace dccl::comm
