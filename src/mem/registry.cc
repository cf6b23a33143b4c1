// backend_of(), kind names and the free hooks shared by every backend.
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "mem/backend.hpp"

namespace dccl::mem {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Host: return "host";
    case Kind::Sim: return "sim";
    case Kind::Cuda: return "cuda";
  }
  return "unknown";
}

Backend& backend_of(const void* p) {
  // Cheap first: the sim reservation is a range check and never creates the backend.
  if (sim_in_reservation(p)) return sim_backend();
  if (Backend* c = cuda_backend(); c && c->owns(p, 1)) return *c;
  return host_backend();
}

namespace {

struct Hooks {
  std::shared_mutex mu;  // shared while hooks run, so removal waits for running calls
  int next_id = 1;
  std::vector<std::pair<int, FreeHook>> list;
};

Hooks& hooks() {
  static Hooks* h = new Hooks();  // immortal: backends may free during static destruction
  return *h;
}

}  // namespace

int add_free_hook(FreeHook hook) {
  Hooks& h = hooks();
  std::lock_guard<std::shared_mutex> lk(h.mu);
  int id = h.next_id++;
  h.list.emplace_back(id, std::move(hook));
  return id;
}

void remove_free_hook(int id) {
  Hooks& h = hooks();
  std::lock_guard<std::shared_mutex> lk(h.mu);
  for (auto it = h.list.begin(); it != h.list.end(); ++it)
    if (it->first == id) {
      h.list.erase(it);
      return;
    }
}

void notify_free(Kind kind, const void* base, size_t size) {
  Hooks& h = hooks();
  std::shared_lock<std::shared_mutex> lk(h.mu);
  for (auto& e : h.list) e.second(kind, base, size);
}

}  // namespace dccl::mem
