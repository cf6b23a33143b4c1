#include "bootstrap/env_init.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <cstdlib>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/secret_file.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/launcher.hpp"
#include "core/log.hpp"

namespace dccl::boot {

namespace {

const char* env(const char* n) {
  const char* v = core::env_value(n);
  return v && *v ? v : nullptr;
}

// The largest world size: tags carry a rank in 24 bits.
constexpr int64_t kMaxRanks = int64_t{1} << 24;

int64_t parse_count(const char* text, const char* var) {
  const int64_t v = core::parse_int(text, var);
  if (v < -1 || v > kMaxRanks)
    core::raise(dcclInvalidArgument, std::string(var) + "=" + text + " is out of range: allowed -1 to " +
                                   std::to_string(kMaxRanks));
  return v;
}

constexpr const char* kOp = "dcclCommInitFromEnv";

// Runs `f`; an error it raises that does not name a rank yet is raised again as
// "rank R: dcclCommInitFromEnv: [var: ]cause" (no rank while it is not known).
template <class F>
auto named(int rank, const char* var, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const core::Error& e) {
    const std::string text = e.what();
    if (text.rfind("rank ", 0) == 0 || text.rfind(kOp, 0) == 0) throw;
    core::raise(e.code(), core::describe(rank, kOp, (var ? std::string(var) + ": " : std::string()) + text));
  }
}

bool pick(const char* rank_var, const char* size_var, const char* name, EnvJob* job) {
  const char* r = env(rank_var);
  const char* s = env(size_var);
  if (!r || !s) return false;
  job->rank = static_cast<int>(named(-1, nullptr, [&] { return parse_count(r, rank_var); }));
  job->nranks = static_cast<int>(named(job->rank, nullptr, [&] { return parse_count(s, size_var); }));
  job->source = name;
  job->rank_var = rank_var;
  job->size_var = size_var;
  return true;
}

// How many dcclCommInitFromEnv calls of this process got their job (their key
// namespace is numbered the same way): keys the secret file.
std::atomic<int> g_jobs{0};

// Numeric IPv4 `host` is an address of this machine (loopback included).
bool local_address(const std::string& host) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  if ((ntohl(a.s_addr) >> 24) == 127) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next)
    found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a.s_addr;
  freeifaddrs(list);
  return found;
}

// Why the launcher's variables say the job spans several nodes ("" when they do not).
std::string launcher_spans(const EnvJob& job) {
  auto differs = [&](const char* local_var, const char* size_var) -> std::string {
    const char* l = env(local_var);
    if (!l || core::parse_int(l, local_var) == job.nranks) return "";
    return std::string(local_var) + "=" + l + " differs from the world size " + std::to_string(job.nranks) +
           (env(size_var) ? std::string(" (") + size_var + ")" : std::string()) + ": the ranks span several nodes";
  };
  if (job.source == "torchrun") return differs("LOCAL_WORLD_SIZE", "WORLD_SIZE");
  if (job.source == "Open MPI") return differs("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE");
  if (job.source == "MPICH/PMI") return differs("MPI_LOCALNRANKS", "PMI_SIZE");
  if (job.source == "Slurm")
    for (const char* v : {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"})
      if (const char* n = env(v)) {
        if (core::parse_int(n, v) > 1) return std::string(v) + "=" + n + ": the job spans several nodes";
        break;
      }
  return "";
}

// Why the job's ranks may be on several hosts ("" when all are on this one, as
// far as the address and the launcher tell).
std::string spans_hosts(const EnvJob& job, const std::string& host, const std::string& addr) {
  if (!local_address(host)) return "the rendezvous address " + addr + " is not an address of this host";
  return launcher_spans(job);
}

// A host name (not an address) that resolves to loopback here, as /etc/hosts maps a
// machine's own name (Debian: 127.0.1.1): the other nodes resolve it to this node's
// network address, which a store bound to loopback would refuse.
bool loopback_name(const std::string& name, const std::string& numeric) {
  in_addr a{};
  return inet_pton(AF_INET, name.c_str(), &a) != 1 && inet_pton(AF_INET, numeric.c_str(), &a) == 1 &&
         (ntohl(a.s_addr) >> 24) == 127;
}

std::string numeric_host(const std::string& host, const std::string& origin) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) core::raise(dcclInvalidArgument, "cannot resolve the rendezvous host '" + host + "' (" + origin + "): " +
                                         gai_strerror(rc) + (host.find(':') != std::string::npos || host[0] == '['
                                                                 ? " (IPv4 addresses and host names only)"
                                                                 : ""));
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof(buf));
  freeaddrinfo(res);
  return buf;
}

// Not secret: every rank derives the same value from what the launcher shares,
// and so can anyone who knows the address (DCCL_INSECURE=1 only).
std::array<uint8_t, 16> derived_secret(const std::string& seed) {
  std::array<uint8_t, 16> out{};
  uint64_t h1 = 1469598103934665603ULL, h2 = 0x9e3779b97f4a7c15ULL;
  for (unsigned char ch : seed) {
    h1 = (h1 ^ ch) * 1099511628211ULL;
    h2 = (h2 ^ ch) * 0x100000001b3ULL + 0x7f4a7c15;
  }
  memcpy(out.data(), &h1, 8);
  memcpy(out.data() + 8, &h2, 8);
  return out;
}

// The stores this process started for communicators from the environment, by
// requested address: a second communicator of the same job shares the first's.
std::mutex g_stores_mu;
std::map<std::string, std::weak_ptr<StoreServer>>& env_stores() {
  static auto* m = new std::map<std::string, std::weak_ptr<StoreServer>>();
  return *m;
}
std::string store_key(const UniqueIdData& id) { return id.host + ":" + std::to_string(id.port); }
std::shared_ptr<StoreServer> running_store(const UniqueIdData& id) {
  std::lock_guard<std::mutex> lk(g_stores_mu);
  auto it = env_stores().find(store_key(id));
  return it == env_stores().end() ? nullptr : it->second.lock();
}

// A communicator's handle on a shared store; holds the secret file published
// for its job, if any.
class SharedStore final : public StoreServer {
 public:
  SharedStore(std::shared_ptr<StoreServer> s, std::unique_ptr<SecretFile> file)
      : s_(std::move(s)), file_(std::move(file)) {}
  UniqueIdData id() const override { return s_->id(); }
  void set_host_label(const std::string& label) override { s_->set_host_label(label); }

 private:
  std::shared_ptr<StoreServer> s_;
  std::unique_ptr<SecretFile> file_;
};

}  // namespace

std::unique_ptr<StoreServer> env_store(EnvJob* job) {
  if (!job->host_store) return nullptr;
  if (job->running_store)
    return std::make_unique<SharedStore>(job->running_store, adopt_secret_file(job->id.secret, job->id.port));
  std::shared_ptr<StoreServer> s =
      StoreServer::start(job->listen_any ? "0.0.0.0" : job->id.host, job->id.port, job->id.secret);
  if (job->id.port == 0) {  // a single rank's private store: nobody else uses it
    job->id = s->id();
  } else {
    std::lock_guard<std::mutex> lk(g_stores_mu);
    env_stores()[store_key(job->id)] = s;
  }
  return std::make_unique<SharedStore>(std::move(s), nullptr);
}

void parse_store_addr(const std::string& a, std::string* host, int* port) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0)
    core::raise(dcclInvalidArgument, "DCCL_ADDR must be host:port, got '" + a + "'");
  const int64_t p = core::parse_int(a.substr(colon + 1), "DCCL_ADDR port");
  if (p < 1 || p > 65535) core::raise(dcclInvalidArgument, "DCCL_ADDR=" + a + ": the port must be 1 to 65535");
  *host = a.substr(0, colon);
  *port = static_cast<int>(p);
}

namespace {
// The rendezvous of `job`: its store's address and the job's secret.
void resolve_job(EnvJob* jp, const core::Config& cfg) {
  EnvJob& job = *jp;
  if (const char* id = env("DCCL_ID")) {
    job.id = named(job.rank, "DCCL_ID", [&] { return decode_id(id_from_hex(id)); });
    g_jobs.fetch_add(1);
    return;
  }
  std::string host;
  int64_t port = -1;
  if (const char* addr = env("DCCL_ADDR")) {
    int p = 0;
    parse_store_addr(addr, &host, &p);
    port = p;
    job.id.origin = "DCCL_ADDR";
  } else if (env("MASTER_ADDR") && env("MASTER_PORT")) {
    // MASTER_PORT itself belongs to the launcher's own store; ours listens on the next port.
    host = env("MASTER_ADDR");
    port = core::parse_int(env("MASTER_PORT"), "MASTER_PORT");
    if (port == 65535)
      core::raise(dcclInvalidArgument,
                  core::describe(job.rank, "dcclCommInitFromEnv",
                                 "MASTER_PORT=65535: the DirectCCL store listens on MASTER_PORT + 1 (the launcher's "
                                 "own store holds MASTER_PORT), and 65536 is not a port; choose a MASTER_PORT below "
                                 "65535 or give the store its own address with DCCL_ADDR=host:port"));
    if (port > 0 && port < 65535) ++port;
    job.id.origin = "MASTER_PORT + 1";
  } else if (job.nranks == 1) {
    // One rank meets nobody: a private store on loopback, on a port the kernel picks.
    job.id.host = "127.0.0.1";
    job.id.port = 0;
    job.id.secret = random_secret();
    job.id.origin = "private to the single rank";
    job.host_store = true;
    g_jobs.fetch_add(1);
    return;
  } else {
    const std::string missing = env("MASTER_ADDR") ? "MASTER_PORT is not set (MASTER_ADDR is)"
                                : env("MASTER_PORT") ? "MASTER_ADDR is not set (MASTER_PORT is)"
                                                     : "none of DCCL_ID, DCCL_ADDR, MASTER_ADDR/MASTER_PORT is set";
    core::raise(dcclInvalidArgument,
                core::describe(job.rank, "dcclCommInitFromEnv",
                               "no rendezvous address for " + std::to_string(job.nranks) + " ranks from " + job.source +
                                   ": " + missing +
                                   ". Set DCCL_ADDR=host:port on every rank (the store listens there), or MASTER_ADDR "
                                   "and MASTER_PORT (torchrun sets them; under mpirun or srun export them; the store "
                                   "listens on MASTER_PORT + 1), or start the job with dccl-run, which sets DCCL_ID. "
                                   "A single rank (world size 1) needs none"));
  }
  if (port <= 0 || port > 65535)
    core::raise(dcclInvalidArgument, core::describe(job.rank, "dcclCommInitFromEnv",
                                                    "rendezvous port out of range: " + std::to_string(port) + " (" +
                                                        job.id.origin + ")"));
  const char* host_var = job.id.origin == "DCCL_ADDR" ? "DCCL_ADDR" : "MASTER_ADDR";
  job.id.host = numeric_host(host, host_var);
  job.id.port = static_cast<uint16_t>(port);
  const std::string addr = job.id.host + ":" + std::to_string(port);
  // The job: the address and the launcher's job ids (the same on every rank).
  std::string seed = "dccl:" + host + ":" + std::to_string(port);
  for (const char* v : {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid",
                        "PMI_JOBID"})
    if (env(v)) seed += std::string(":") + env(v);
  if (job.rank == 0) job.running_store = running_store(job.id);
  if (const char* s = env("DCCL_SECRET")) {
    job.id.secret = named(job.rank, "DCCL_SECRET", [&] { return secret_from_hex(s); });
  } else if (cfg.insecure) {
    job.id.secret = derived_secret(seed);
    DCCL_WARN("rank %d: DCCL_INSECURE=1: the bootstrap secret is derived from the rendezvous address %s and the "
              "launcher's job variables, so any process that can reach that address can join this job, read its "
              "keys and stop it; set DCCL_SECRET (32 hex digits, the same on every rank) instead",
              job.rank, addr.c_str());
  } else if (std::string why = spans_hosts(job, job.id.host, addr); !why.empty()) {
    core::raise(dcclInvalidArgument,
          core::describe(job.rank, "dcclCommInitFromEnv",
                   "no job secret: DCCL_SECRET is not set and " + why +
                       ", so the ranks cannot share a secret through a local file. Give every rank the same "
                       "DCCL_SECRET (32 hex digits, e.g. from `openssl rand -hex 16`, exported by the launcher), "
                       "or start the job with dccl-run; DCCL_INSECURE=1 runs without one, letting any process "
                       "that can reach " + addr + " join the job"));
  } else {
    // One host: rank 0 makes a random secret, the others read it from a file of this user's.
    const std::string key = seed + " #" + std::to_string(g_jobs.load());
    const auto timeout = std::chrono::milliseconds(cfg.timeout_s * 1000);
    if (job.rank == 0) {
      const std::array<uint8_t, 16> running = job.running_store ? job.running_store->id().secret : job.id.secret;
      job.id.secret = publish_secret(key, job.nranks, job.id.port, job.rank, nullptr,
                                     job.running_store ? &running : nullptr);
    } else {
      SharedSecret sh = read_secret(key, job.rank, std::chrono::steady_clock::now() + timeout, timeout);
      job.id.secret = sh.secret;
      if (sh.nranks != job.nranks)  // the store names both claims and fails every rank
        DCCL_INFO("rank %d: rank 0 (pid %ld) was given %d ranks, this rank %d", job.rank, sh.pid, sh.nranks,
                  job.nranks);
    }
  }
  job.host_store = job.rank == 0;
  if (job.host_store && loopback_name(host, job.id.host)) {
    if (const std::string why = launcher_spans(job); !why.empty()) {
      job.listen_any = true;
      DCCL_INFO("rank 0: %s host '%s' is %s (loopback) on this node, but %s: the store listens on every "
                "interface, port %d",
                host_var, host.c_str(), job.id.host.c_str(), why.c_str(), job.id.port);
    }
  }
  if (job.running_store && job.running_store->id().secret != job.id.secret)
    core::raise(dcclInvalidUsage,
                core::describe(job.rank, "dcclCommInitFromEnv",
                               "this process already runs the store at " + addr + " (" + job.id.origin +
                                   ") for an earlier communicator from the environment, with another job secret "
                                   "(DCCL_SECRET or DCCL_INSECURE changed in between); a second communicator of "
                                   "the same address shares that store, so keep the secret, or destroy the first "
                                   "communicator before"));
  g_jobs.fetch_add(1);
}
}  // namespace

EnvJob env_job() {
  EnvJob job;
  bool found = false;
  for (const core::Launcher& l : core::launchers())
    if ((found = pick(l.rank, l.size, l.name, &job))) break;
  if (!found) {
    // A launcher's pair half set (DCCL_RANK without DCCL_WORLD_SIZE) is named: it is what was meant.
    std::string half;
    for (const core::Launcher& l : core::launchers())
      if (half.empty() && (env(l.rank) != nullptr) != (env(l.size) != nullptr))
        half = std::string(env(l.rank) ? l.rank : l.size) + " is set but " + (env(l.rank) ? l.size : l.rank) +
               " is not (" + l.name + "'s rank and size go together); ";
    core::raise(dcclInvalidArgument,
                std::string(kOp) + ": no rank/size in the environment: " + half +
                    "set DCCL_RANK and DCCL_WORLD_SIZE, or run under dccl-run, torchrun, mpirun or srun");
  }
  if (job.nranks < 1 || job.rank < 0 || job.rank >= job.nranks)
    core::raise(dcclInvalidArgument, core::describe(job.rank, kOp,
                                                    "rank " + std::to_string(job.rank) + " / size " +
                                                        std::to_string(job.nranks) + " from " + job.source + " (" +
                                                        job.rank_var + ", " + job.size_var + ") is out of range"));
  core::Config cfg;
  try {
    cfg = core::load_config();  // a bad setting is named; the job is resolved still
  } catch (const core::Error& e) {
    job.bad_setting = e.code();
    job.bad_text = core::describe(job.rank, "dcclCommInitFromEnv", e.what());
  }
  if (job.bad_setting == dcclSuccess) {
    named(job.rank, nullptr, [&] { resolve_job(&job, cfg); });
    return job;
  }
  cfg = core::Config{};
  cfg.timeout_s = Bootstrap::kTellBound.count();  // rank 0's secret file, when rank 0 is there
  try {
    resolve_job(&job, cfg);
  } catch (const core::Error&) {
    core::raise(job.bad_setting, job.bad_text);
  }
  return job;
}

}  // namespace dccl::boot
