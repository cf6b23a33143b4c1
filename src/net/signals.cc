#include "net/signals.hpp"

#include <dlfcn.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/config.hpp"

namespace dccl::net {

namespace {

bool psm_chosen(const std::string& provider) {
  return provider.find("psm") != std::string::npos && provider[0] != '^';
}

// The shared object a handler's code lives in, "" when unknown.
std::string owner_of(void* code) {
  Dl_info di{};
  if (!code || dladdr(code, &di) == 0 || !di.dli_fname) return "";
  const char* base = std::strrchr(di.dli_fname, '/');
  return base ? base + 1 : di.dli_fname;
}

bool is_psm(const std::string& lib) { return lib.rfind("libinfinipath", 0) == 0 || lib.rfind("libpsm", 0) == 0; }

}  // namespace

std::vector<std::string> reset_foreign_signal_handlers(const std::string& provider) {
  std::vector<std::string> reset;
  if (psm_chosen(provider)) return reset;
  static const struct {
    int sig;
    const char* name;
  } kSignals[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGILL, "SIGILL"}, {SIGFPE, "SIGFPE"},
                  {SIGABRT, "SIGABRT"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"},
                  {SIGHUP, "SIGHUP"}};
  for (const auto& s : kSignals) {
    struct sigaction sa {};
    if (sigaction(s.sig, nullptr, &sa) != 0) continue;
    void* code = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                            : reinterpret_cast<void*>(sa.sa_handler);
    if (code == reinterpret_cast<void*>(SIG_DFL) || code == reinterpret_cast<void*>(SIG_IGN)) continue;
    const std::string lib = owner_of(code);
    if (!is_psm(lib)) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (sigaction(s.sig, &dfl, nullptr) == 0) reset.push_back(std::string(s.name) + " (" + lib + ")");
  }
  return reset;
}

namespace {
std::mutex g_mu;
std::vector<std::string> g_unreported;

// Libraries this one links are initialised before it: their handlers are in place.
// No communicator's settings yet: the environment's choice, read by the settings code.
__attribute__((constructor)) void reset_at_load() {
  std::vector<std::string> r = reset_foreign_signal_handlers(core::provider_choice());
  std::lock_guard<std::mutex> lk(g_mu);
  g_unreported.insert(g_unreported.end(), r.begin(), r.end());
}
}  // namespace

std::vector<std::string> reset_and_report_signal_handlers(const std::string& provider) {
  std::vector<std::string> r = reset_foreign_signal_handlers(provider);
  std::lock_guard<std::mutex> lk(g_mu);
  r.insert(r.begin(), g_unreported.begin(), g_unreported.end());
  g_unreported.clear();
  return r;
}

}  // namespace dccl::net
