// dccl-run: local launcher.  dccl-run -n N [--env K=V | -x K=V | -x NAME]... [--timeout SEC] prog args...
// Hosts the job's rendezvous store, starts N ranks (each in its own process
// group, so a rank's helpers die with it), prefixes their output with
// "[rank] ", and ends the job as soon as one rank fails.
// With --hosts the ranks run on emulated hosts (dccl-run/netns.hpp): each rank
// enters its host's network namespace and a UTS namespace named after the host,
// and the store listens in the job's switch namespace.
// Files: options (the command line), placement (hosts and CPUs), rank_env (each
// rank's environment), spawn (fork/exec, signal-safe), job (supervision), lines
// (prefixed output), netns (emulated hosts), fabric and netns_fabric (--fabric).
#include <sys/signalfd.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bootstrap/env_init.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "core/config.hpp"
#include "dccl-run/job.hpp"
#include "dccl-run/lines.hpp"
#include "dccl-run/netns.hpp"
#include "dccl-run/options.hpp"
#include "dccl-run/placement.hpp"

namespace {

using dcclrun::say;

// A variable as the ranks will see it: the last --env K=V, else dccl-run's own; "" unset.
std::string user_setting(const dcclrun::RunOptions& o, const std::string& key) {
  for (auto it = o.env.rbegin(); it != o.env.rend(); ++it)
    if (it->compare(0, key.size() + 1, key + "=") == 0) return it->substr(key.size() + 1);
  return dccl::core::env_text(key.c_str());
}

// Whether the ranks log at INFO or TRACE (then dccl-run describes the emulated network).
bool debug_info(const dcclrun::RunOptions& o) {
  std::string level = dccl::core::env_text("DCCL_DEBUG");
  for (const auto& kv : o.env)
    if (kv.compare(0, 11, "DCCL_DEBUG=") == 0) level = kv.substr(11);
  for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return level == "INFO" || level == "TRACE";
}

}  // namespace

int main(int argc, char** argv) {
  dcclrun::RunOptions opt;
  std::string error;
  switch (dcclrun::parse_run_args(argc, argv, &opt, &error)) {
    case 0: break;
    case 1: return 0;
    default:
      say(error);
      std::fprintf(stderr, "usage: dccl-run -n N [options] [--] prog [args...]   (dccl-run --help: every option)\n");
      return 2;
  }
  // The program is looked up in the PATH the ranks will have.
  std::string path = dccl::core::env_value("PATH") ? dccl::core::env_text("PATH") : "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : opt.env) {
    if (kv.compare(0, 5, "PATH=") == 0) path = kv.substr(5);
  }
  std::string why;
  const std::string program = dcclrun::resolve_program(opt.argv[0], path, &why);
  if (program.empty()) {
    say("cannot run '" + opt.argv[0] + "': " + why);
    return 2;
  }

  // Signals arrive through a signalfd; block them before any thread starts.
  sigset_t old_mask, mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, &old_mask);
  ::signal(SIGPIPE, SIG_IGN);
  const int sigfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }

  // Emulated hosts: built before the store, which listens in their switch.
  std::unique_ptr<dcclrun::EmuNet> net;
  if (!opt.ranks_per_host.empty()) {
    const std::string own_path =
        dccl::core::env_value("PATH") ? dccl::core::env_text("PATH") : "/usr/sbin:/usr/bin:/sbin:/bin";
    const std::string missing = dcclrun::emulation_unavailable(opt.rate_bps > 0 || opt.flow_bps > 0, own_path);
    if (!missing.empty()) {
      say("--hosts " + missing);
      return 1;
    }
    for (const auto& line : dcclrun::EmuNet::remove_stale(own_path, old_mask)) say("stale namespaces: " + line);
    dcclrun::NetSpec spec;
    spec.hosts = static_cast<int>(opt.ranks_per_host.size());
    spec.rails = opt.rails;
    spec.rate_bps = opt.rate_bps;
    spec.mtu = opt.mtu;
    spec.default_route = !opt.no_default_route;
    spec.fabric = opt.fabric;
    spec.leaves = opt.leaves;
    spec.spines = opt.spines;
    spec.flow_bps = opt.flow_bps;
    spec.interleave = opt.interleave;
    net = dcclrun::EmuNet::create(spec, own_path, old_mask, &why);
    if (!net) {
      say("--hosts: " + why);
      return 1;
    }
    if (opt.keep_net) net->keep();
    if (debug_info(opt)) say(net->summary());
  }

  std::unique_ptr<dccl::boot::StoreServer> store;
  std::string id_hex;
  // DCCL_ADDR / DCCL_SECRET given to the job (--env, or dccl-run's environment): the
  // store takes that address (with --hosts, only when it is the emulated network's
  // store address) and secret, so that an observer (dccl-info --job) can find it;
  // otherwise a free port and a random secret.
  const std::string addr = user_setting(opt, "DCCL_ADDR"), secret = user_setting(opt, "DCCL_SECRET");
  std::string store_host = net ? net->store_address() : "127.0.0.1";
  int store_port = 0;
  auto start_store = [&] {
    store = dccl::boot::StoreServer::start(store_host, store_port, secret.empty() ? dccl::boot::random_secret()
                                                                                   : dccl::boot::secret_from_hex(secret));
  };
  try {
    if (!addr.empty()) {
      std::string host;
      dccl::boot::parse_store_addr(addr, &host, &store_port);
      if (!net) store_host = host;
      else if (host != store_host) store_port = 0;  // a store of the ranks' own
    }
    if (net && !net->in_switch(start_store, &why)) {
      say("cannot start the rendezvous store: " + why);
      return 1;
    }
    if (!net) start_store();
    dcclUniqueId uid;
    dccl::boot::encode_id(store->id(), &uid);
    id_hex = dccl::boot::id_to_hex(uid);
  } catch (const std::exception& e) {
    say(std::string("cannot start the rendezvous store: ") + e.what());
    return 1;
  }

  std::vector<dcclrun::Placement> place = dcclrun::place_ranks(opt, net.get());
  dcclrun::bind_ranks(opt, &place);
  dcclrun::Job job(opt, std::move(place));
  int rc;
  if (job.start(program, id_hex, old_mask)) {
    rc = job.supervise(sigfd);
  } else {
    job.terminate();  // the ranks that did start cannot complete the job
    job.supervise(sigfd);
    rc = 1;
  }
  store.reset();
  if (net && opt.keep_net) {
    std::string names;
    for (const auto& n : net->all_ns()) names += (names.empty() ? "" : " ") + n;
    say("kept the emulated network (--keep-net): namespaces " + names +
        "; the next dccl-run --hosts removes them, or run: for n in " + names + "; do ip netns del $n; done");
  } else if (net) {
    const std::string failed = net->remove();
    if (!failed.empty()) say(failed);
  }
  ::close(sigfd);
  return rc;
}
