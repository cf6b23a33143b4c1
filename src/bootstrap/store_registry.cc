// Process-global home for servers started by dcclGetUniqueId until rank 0's
// communicator takes them, keyed by the id's secret and port.
#include <map>
#include <mutex>
#include <utility>

#include "bootstrap/store.hpp"
#include "core/log.hpp"

namespace dccl::boot {

namespace {

using Key = std::pair<std::array<uint8_t, 16>, uint16_t>;

struct Registry {
  std::mutex mu;
  std::map<Key, std::unique_ptr<StoreServer>> servers;
};

Registry& registry() {
  // Touch the logging configuration first so that it is constructed before, and
  // therefore destroyed after, the registry whose servers may log while stopping.
  try {
    (void)core::log_level();
  } catch (...) {
  }
  static Registry r;
  return r;
}

}  // namespace

void park_server(std::unique_ptr<StoreServer> s) {
  if (!s) return;
  const UniqueIdData id = s->id();
  Registry& r = registry();
  std::unique_ptr<StoreServer> replaced;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto& slot = r.servers[{id.secret, id.port}];
    replaced = std::move(slot);
    slot = std::move(s);
  }
}

std::unique_ptr<StoreServer> take_parked_server(const UniqueIdData& id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.servers.find({id.secret, id.port});
  if (it == r.servers.end()) return nullptr;
  std::unique_ptr<StoreServer> s = std::move(it->second);
  r.servers.erase(it);
  return s;
}

}  // namespace dccl::boot
