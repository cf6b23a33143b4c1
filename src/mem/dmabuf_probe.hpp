// The direct path's dma-buf layers, each tested on this machine (dccl-info
// --dmabuf-check): the backend's export of an aligned and an unaligned range (a
// real fd and its size), SYNC_MEMOPS on the exported allocation, registrations
// invalidated when memory is freed (buffer ids or free hooks), and a trial
// registration of the exported fd on a domain opened for it.
#pragma once
#include <string>
#include <vector>

#include "net/fabric/dmabuf_trial.hpp"

namespace dccl::mem {

struct ProbeLayer {
  net::Verdict verdict;
  std::string name, detail;
};

// kind: "sim" or "cuda". providers: where the trial registration is tried, in
// order. False, with *why, when the probe cannot run (no such backend); a layer
// that fails is a result, not a reason to stop.
bool probe_dmabuf(const std::string& kind, const std::vector<std::string>& providers, std::vector<ProbeLayer>* out,
                  std::string* why);

const char* verdict_text(net::Verdict v);  // "pass", "FAIL", "n/a"

}  // namespace dccl::mem
