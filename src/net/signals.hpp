// Signal handlers that libraries DirectCCL loads but does not use install behind
// the application's back. Debian's libfabric links the infinipath psm library,
// whose load-time constructor catches SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGTERM
// and SIGINT in every process that links DirectCCL: a crash becomes exit(1) (no
// signal for the launcher, no core dump) and SIGTERM can deadlock inside it.
#pragma once
#include <string>
#include <vector>

namespace dccl::net {

// Puts back the default action of every signal whose handler lives in a psm
// library (libinfinipath, libpsm*), unless `provider` (the communicator's
// provider setting; at load, core::provider_choice()) names psm. Handlers of the application and of
// other libraries are left alone. Runs once when the library is loaded and again
// at every communicator init (a library loaded later may have installed them).
// Returns what was reset, e.g. {"SIGSEGV (libinfinipath.so.4)"}.
std::vector<std::string> reset_foreign_signal_handlers(const std::string& provider);

// Runs reset_foreign_signal_handlers() and returns every reset done since the
// last call (the one at load included), for the init log.
std::vector<std::string> reset_and_report_signal_handlers(const std::string& provider);

}  // namespace dccl::net
