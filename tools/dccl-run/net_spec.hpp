// What dccl-run --hosts emulates (netns.hpp builds it; with `fabric`, fabric.hpp
// says what each namespace of the leaf-spine network gets): one shape for both.
#pragma once
#include <cstdint>

namespace dcclrun {

struct NetSpec {
  int hosts = 1;
  int rails = 1;
  uint64_t rate_bps = 0;  // every link; 0: not shaped
  int mtu = 0;            // of every veth end (the bridges follow); 0: the kernel's default
  bool default_route = true;  // each host's default route via its switch or leaf; else 198.18.0.0/15 only
  // The leaf-spine fabric (fabric.hpp) instead of one bridge per rail (rails must be 1).
  bool fabric = false;
  int leaves = 0;             // 0: one per host (EmuNet resolves it before building)
  int spines = 2;
  uint64_t flow_bps = 0;      // per TCP flow on each host's NIC; 0: no cap
  bool interleave = false;    // hosts round-robin over the leaves (host h under leaf h % leaves), else block-wise
};

}  // namespace dcclrun
