#include "api/config.hpp"

#include <cstddef>
#include <string>

#include "api/handles.hpp"
#include "core/error.hpp"
#include "tune/tuner.hpp"

namespace dccl::api {

// The application's struct reaches past `field`: an older, smaller one does not.
#define DCCL_HAS(c, field) ((c)->size >= offsetof(dcclConfig_t, field) + sizeof((c)->field))

core::Config apply_config(const dcclConfig_t* c, core::Config cfg, int rank, const char* fn, bool* blocking) {
  if (blocking) *blocking = true;
  if (!c) return cfg;
  auto bad = [&](const std::string& why) {
    std::string t = "config: ";
    t.append(why);
    core::raise(dcclInvalidArgument, say(rank, fn, t));
  };
  auto num = [](const char* field, int v, const char* rest) {
    std::string t = field;
    t.append(" is ").append(std::to_string(v)).append(rest);
    return t;
  };
  if (c->magic != DCCL_CONFIG_MAGIC || c->size < offsetof(dcclConfig_t, blocking))
    bad("not initialised with DCCL_CONFIG_INITIALIZER (size or magic is wrong)");
  if (DCCL_HAS(c, blocking) && c->blocking != DCCL_CONFIG_UNDEF_INT) {
    if (c->blocking != 0 && c->blocking != 1) bad(num("blocking", c->blocking, ", not 0 or 1"));
    if (blocking) *blocking = c->blocking == 1;
  }
  if (DCCL_HAS(c, timeoutMs) && c->timeoutMs != DCCL_CONFIG_UNDEF_INT) {
    if (c->timeoutMs < 1) bad(num("timeoutMs", c->timeoutMs, "; it must be at least 1"));
    cfg.timeout_ms = c->timeoutMs;
    cfg.timeout_from = "dcclConfig_t.timeoutMs";
  }
  if (DCCL_HAS(c, peerDirect) && c->peerDirect != DCCL_CONFIG_UNDEF_INT) {
    switch (c->peerDirect) {
      case -1: cfg.peer_direct.assign("auto"); break;
      case 0: cfg.peer_direct.assign(1, '0'); break;
      case 1: cfg.peer_direct.assign(1, '1'); break;
      default: bad(num("peerDirect", c->peerDirect, ", not -1 (auto), 0 (staged) or 1 (direct)"));
    }
  }
  if (DCCL_HAS(c, algo) && c->algo) {
    std::string spec(c->algo);
    try {
      tune::check_algo_override(spec);  // parses the spec as init will
    } catch (const core::Error& e) {
      std::string why = e.what();
      if (why.rfind("DCCL_ALGO: ", 0) == 0) why.erase(0, 11);
      why.insert(0, "algo: ");
      bad(why);
    }
    cfg.algo = spec;
  }
  return cfg;
}

#undef DCCL_HAS

}  // namespace dccl::api
