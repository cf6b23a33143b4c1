// dcclCommInitFromEnv: rank, size and rendezvous from each launcher's variables
// (DCCL_*, torchrun, Open MPI, MPICH/PMI, Slurm), its refusals, and the checks
// made at init (job secret, wire settings). Every multi-rank case runs its ranks
// as children forked from this single-threaded process; each child sets its
// environment, initialises, all-reduces one int and reports through a pipe.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dccl/dccl.h"

namespace {

using Vars = std::map<std::string, std::string>;

// Every variable dcclCommInitFromEnv may read; cleared before each case.
const char* const kLauncherVars[] = {
    "DCCL_RANK", "DCCL_WORLD_SIZE", "DCCL_ADDR", "DCCL_ID", "DCCL_SECRET", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "OMPI_MCA_ess_base_jobid", "PMI_JOBID", "DCCL_STAGING_SLOT_BYTES", "DCCL_CHUNK_BYTES", "DCCL_ALGO",
    "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NNODES", "SLURM_STEP_NUM_NODES",
    "SLURM_JOB_NUM_NODES", "DCCL_INSECURE", "DCCL_DEBUG", "DCCL_SEGMENT_BYTES", "TEST_STDERR_FILE", "TEST_SECOND_INIT"};

void clear_launcher_vars() {
  for (const char* v : kLauncherVars) unsetenv(v);
}

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    clear_launcher_vars();  // this test may itself run under srun or mpirun
    setenv("DCCL_PROVIDER", "shm", 1);
    setenv("DCCL_TIMEOUT_S", "10", 1);
  }
};
[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new Env);

// A TCP port on 127.0.0.1 that nothing listens on right now.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

struct Outcome {
  int init = -1, allreduce = -1, rank = -1, size = -1, sum = -1;
  int second = -1;        // a second dcclCommInitFromEnv while the first lives (TEST_SECOND_INIT)
  long second_ms = -1;    // how long it took
  std::string error;  // dcclGetLastError after the first failure
  int status = -1;    // wait status of the child
};

// The child's whole life: never returns.
[[noreturn]] void child(const Vars& vars, int out_fd) {
  alarm(40);  // a hang ends the child, and the parent sees a signal
  clear_launcher_vars();
  for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  if (const char* f = getenv("TEST_STDERR_FILE")) {
    (void)!freopen(f, "w", stderr);
    setvbuf(stderr, nullptr, _IONBF, 0);
  }
  Outcome o;
  dcclComm_t c = nullptr;
  o.init = dcclCommInitFromEnv(&c);
  if (o.init == dcclSuccess) {
    dcclCommUserRank(c, &o.rank);
    dcclCommCount(c, &o.size);
    int32_t mine = o.rank + 1;
    o.allreduce = dcclAllReduce(&mine, &o.sum, 1, dcclInt32, dcclSum, c, nullptr);
    if (o.allreduce != dcclSuccess) o.error = dcclGetLastError(c);
    if (getenv("TEST_SECOND_INIT")) {
      dcclComm_t c2 = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      o.second = dcclCommInitFromEnv(&c2);
      o.second_ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - t0).count());
      o.error = o.second == dcclSuccess ? "" : dcclGetLastError(nullptr);
      if (c2) {
        int32_t one = 1, sum2 = 0;
        if (dcclAllReduce(&one, &sum2, 1, dcclInt32, dcclSum, c2, nullptr) != dcclSuccess || sum2 != o.size)
          o.second = -2;
        dcclCommDestroy(c2);
      }
    }
    dcclBarrier(c, nullptr);  // no rank leaves before the others are done
    dcclCommDestroy(c);
  } else {
    o.error = dcclGetLastError(nullptr);
  }
  char head[128];
  int n = snprintf(head, sizeof(head), "%d %d %d %d %d %d %ld\n", o.init, o.allreduce, o.rank, o.size, o.sum,
                   o.second, o.second_ms);
  std::string msg = std::string(head, static_cast<size_t>(n)) + o.error;
  for (size_t off = 0; off < msg.size();) {
    ssize_t w = write(out_fd, msg.data() + off, msg.size() - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  _exit(0);
}

// Starts one child per entry of `ranks` at once and collects their outcomes.
std::vector<Outcome> run_ranks(const std::vector<Vars>& ranks) {
  fflush(nullptr);
  std::vector<std::pair<pid_t, int>> kids;
  for (const Vars& v : ranks) {
    int p[2];
    if (pipe(p) != 0) {
      ADD_FAILURE() << "pipe failed";
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      child(v, p[1]);
    }
    close(p[1]);
    kids.emplace_back(pid, p[0]);
  }
  std::vector<Outcome> out;
  for (auto [pid, fd] : kids) {
    std::string text;
    char buf[4096];
    ssize_t got;
    while ((got = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(got));
    close(fd);
    Outcome o;
    waitpid(pid, &o.status, 0);
    auto nl = text.find('\n');
    if (nl != std::string::npos) {
      sscanf(text.c_str(), "%d %d %d %d %d %d %ld", &o.init, &o.allreduce, &o.rank, &o.size, &o.sum, &o.second,
             &o.second_ms);
      o.error = text.substr(nl + 1);
    }
    out.push_back(o);
  }
  return out;
}

std::string describe(const Outcome& o) {
  return "init " + std::to_string(o.init) + ", allreduce " + std::to_string(o.allreduce) + ", rank " +
         std::to_string(o.rank) + "/" + std::to_string(o.size) + ", sum " + std::to_string(o.sum) +
         ", second init " + std::to_string(o.second) + " in " + std::to_string(o.second_ms) + " ms, wait status " +
         std::to_string(o.status) + ", error '" + o.error + "'";
}

// Every rank initialised from `make(rank)`, got its rank and size, and all-reduced.
void expect_world_works(int n, const std::function<Vars(int)>& make) {
  std::vector<Vars> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(make(r));
  std::vector<Outcome> out = run_ranks(ranks);
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + describe(o));
    EXPECT_TRUE(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
    EXPECT_EQ(o.init, dcclSuccess);
    EXPECT_EQ(o.allreduce, dcclSuccess);
    EXPECT_EQ(o.rank, r);
    EXPECT_EQ(o.size, n);
    EXPECT_EQ(o.sum, n * (n + 1) / 2);
  }
}

const char kSecretA[] = "0123456789abcdef0123456789abcdef";
const char kSecretB[] = "fedcba9876543210fedcba9876543210";

TEST(EnvInit, DcclVariables) {
  for (int n : {1, 3}) {
    const std::string addr = "127.0.0.1:" + std::to_string(free_port());
    expect_world_works(n, [&](int r) {
      return Vars{{"DCCL_RANK", std::to_string(r)}, {"DCCL_WORLD_SIZE", std::to_string(n)},
                  {"DCCL_ADDR", addr}, {"DCCL_SECRET", kSecretA}};
    });
  }
}

TEST(EnvInit, Torchrun) {
  const int port = free_port();  // the store listens on MASTER_PORT + 1
  expect_world_works(2, [&](int r) {
    return Vars{{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", std::to_string(r)},
                {"MASTER_ADDR", "localhost"}, {"MASTER_PORT", std::to_string(port - 1)},
                {"TORCHELASTIC_RUN_ID", "job-17"}};
  });
}

TEST(EnvInit, OpenMpi) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  expect_world_works(3, [&](int r) {
    return Vars{{"OMPI_COMM_WORLD_RANK", std::to_string(r)}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"DCCL_ADDR", addr}};
  });
}

TEST(EnvInit, MpichPmi) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  expect_world_works(2, [&](int r) {
    return Vars{{"PMI_RANK", std::to_string(r)}, {"PMI_SIZE", "2"}, {"DCCL_ADDR", addr}, {"DCCL_SECRET", kSecretB}};
  });
}

TEST(EnvInit, Slurm) {
  const int port = free_port();
  expect_world_works(2, [&](int r) {
    return Vars{{"SLURM_PROCID", std::to_string(r)}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port - 1)}, {"SLURM_JOB_ID", "4242"}};
  });
}

// An IPv4 address of this machine other than loopback ("" when there is none).
std::string network_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* i = list; i && out.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    const in_addr a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    char buf[INET_ADDRSTRLEN] = {0};
    if ((ntohl(a.s_addr) >> 24) != 127 && inet_ntop(AF_INET, &a, buf, sizeof(buf))) out = buf;
  }
  freeifaddrs(list);
  return out;
}

// DCCL_ADDR names rank 0's node by a host name that resolves to loopback there (as
// /etc/hosts maps a machine's own name, Debian: 127.0.1.1) and the launcher says the
// job spans nodes: the other nodes resolve the name to the node's network address
// (here: this machine's), which rank 0's store accepts. It listened on loopback only,
// and every other rank timed out connecting.
TEST(EnvInit, HostNameOnLoopbackAcrossNodes) {
  const std::string ip = network_address();
  if (ip.empty()) GTEST_SKIP() << "no IPv4 address but loopback on this machine";
  const std::string port = std::to_string(free_port());
  expect_world_works(2, [&](int r) {
    return Vars{{"SLURM_PROCID", std::to_string(r)}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "2"},
                {"DCCL_SECRET", kSecretA}, {"DCCL_ADDR", (r == 0 ? "localhost:" : ip + ":") + port}};
  });
}

// A second dcclCommInitFromEnv under the same launcher variables while the first
// communicator lives (before: rank 0 failed to bind MASTER_PORT + 1 and the
// others waited out the timeout): it shares rank 0's store in a key namespace
// of its own and works, with and without DCCL_SECRET.
TEST(EnvInit, SecondInitFromTheSameEnvironmentWorks) {
  for (bool with_secret : {false, true}) {
    SCOPED_TRACE(with_secret ? "DCCL_SECRET set" : "secret through the file");
    const int port = free_port();
    std::vector<Vars> ranks;
    for (int r = 0; r < 3; ++r) {
      Vars v{{"RANK", std::to_string(r)}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", std::to_string(port - 1)}, {"DCCL_TIMEOUT_S", "8"}, {"TEST_SECOND_INIT", "1"}};
      if (with_secret) v["DCCL_SECRET"] = kSecretA;
      ranks.push_back(v);
    }
    std::vector<Outcome> out = run_ranks(ranks);
    ASSERT_EQ(out.size(), 3u);
    for (const Outcome& o : out) {
      SCOPED_TRACE(describe(o));
      EXPECT_TRUE(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
      EXPECT_EQ(o.init, dcclSuccess);
      EXPECT_EQ(o.sum, 6);
      EXPECT_EQ(o.second, dcclSuccess) << "the second communicator failed or all-reduced wrong";
      EXPECT_LT(o.second_ms, 4000) << "the second init waited for the timeout";
    }
  }
}

// World size 1 needs no rendezvous address: a private store on loopback.
TEST(EnvInit, SingleRankNeedsNoAddress) {
  for (const Vars& vars : {Vars{{"RANK", "0"}, {"WORLD_SIZE", "1"}}, Vars{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "1"}},
                           Vars{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}}) {
    std::vector<Outcome> out = run_ranks({vars, vars});  // two independent single-rank jobs at once
    for (const Outcome& o : out) {
      SCOPED_TRACE(vars.begin()->first + ": " + describe(o));
      EXPECT_EQ(o.init, dcclSuccess);
      EXPECT_EQ(o.allreduce, dcclSuccess);
      EXPECT_EQ(o.rank, 0);
      EXPECT_EQ(o.size, 1);
      EXPECT_EQ(o.sum, 1);
    }
  }
}

// The store listens on MASTER_PORT + 1 under every launcher: the messages say so.
TEST(EnvInit, MessagesNameMasterPortPlusOne) {
  const int port = free_port();
  Vars v{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port - 1)},
         {"DCCL_SECRET", kSecretA}, {"DCCL_TIMEOUT_S", "1"}};
  std::vector<Outcome> out = run_ranks({v});  // rank 0 never comes: the store is unreachable
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].init, dcclTimeout) << describe(out[0]);
  EXPECT_NE(out[0].error.find("127.0.0.1:" + std::to_string(port) + " (MASTER_PORT + 1)"), std::string::npos)
      << describe(out[0]);
}

// DCCL_* wins over the other launchers' variables when both are present.
TEST(EnvInit, DcclVariablesTakePrecedence) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  expect_world_works(2, [&](int r) {
    return Vars{{"DCCL_RANK", std::to_string(r)}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", addr},
                {"RANK", std::to_string(1 - r)}, {"WORLD_SIZE", "5"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}};
  });
}

TEST(EnvInit, WrongSecretIsRefusedByTheStore) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  auto rank = [&](int r, const char* secret) {
    return Vars{{"DCCL_RANK", std::to_string(r)}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", addr},
                {"DCCL_SECRET", secret}, {"DCCL_TIMEOUT_S", "3"}};
  };
  std::vector<Outcome> out = run_ranks({rank(0, kSecretA), rank(1, kSecretB)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].init, dcclRemoteError) << describe(out[1]);
  EXPECT_NE(out[1].error.find("secret"), std::string::npos) << describe(out[1]);
  EXPECT_EQ(out[1].error.find(kSecretA), std::string::npos) << "the secret must not be echoed";
  EXPECT_NE(out[0].init, dcclSuccess) << "rank 0 cannot complete without rank 1: " << describe(out[0]);
  for (const Outcome& o : out) EXPECT_TRUE(WIFEXITED(o.status)) << describe(o);
}

TEST(EnvInit, DifferentWireSettingsFailEveryRank) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  auto rank = [&](int r, const char* slot) {
    return Vars{{"DCCL_RANK", std::to_string(r)}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", addr},
                {"DCCL_STAGING_SLOT_BYTES", slot}};
  };
  std::vector<Outcome> out = run_ranks({rank(0, "1M"), rank(1, "2M")});
  ASSERT_EQ(out.size(), 2u);
  for (const Outcome& o : out) {
    EXPECT_EQ(o.init, dcclInvalidUsage) << describe(o);
    EXPECT_NE(o.error.find("DCCL_STAGING_SLOT_BYTES"), std::string::npos) << describe(o);
    EXPECT_TRUE(WIFEXITED(o.status)) << describe(o);
  }
}

// A refusal made before any rendezvous, and a word its message must contain.
struct Refusal {
  Vars vars;
  std::string word;  // the last error must contain it
};

// Without DCCL_SECRET on one host the ranks share a random secret (rank 0's file);
// DCCL_INSECURE=1 is the explicit opt-out where they cannot, and every rank warns.
TEST(EnvInit, InsecureOptOutWarnsOnEveryRank) {
  const std::string addr = "127.0.0.1:" + std::to_string(free_port());
  const std::string log = "/tmp/dccl-env-init-test-" + std::to_string(getpid()) + "-";
  expect_world_works(2, [&](int r) {
    return Vars{{"SLURM_PROCID", std::to_string(r)}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "2"},
                {"DCCL_ADDR", addr}, {"DCCL_INSECURE", "1"}, {"TEST_STDERR_FILE", log + std::to_string(r)}};
  });
  for (int r = 0; r < 2; ++r) {
    FILE* f = fopen((log + std::to_string(r)).c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    fclose(f);
    unlink((log + std::to_string(r)).c_str());
    EXPECT_NE(text.find("WARN rank " + std::to_string(r) + ": DCCL_INSECURE=1"), std::string::npos) << text;
  }
}

// Across hosts without DCCL_SECRET init fails at once, saying how to set one; so
// do settings out of their range and unknown log levels.
TEST(EnvInit, NoSecretAcrossHostsAndBadSettingsAreRefused) {
  const std::string local = "127.0.0.1:" + std::to_string(free_port());
  const std::vector<Refusal> cases = {
      {{{"DCCL_RANK", "1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "192.0.2.1:29500"}},
       "192.0.2.1:29500 is not an address of this host"},
      {{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"DCCL_ADDR", local}},
       "OMPI_COMM_WORLD_LOCAL_SIZE=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"}},
       "LOCAL_WORLD_SIZE=2"},
      {{{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "1"}, {"DCCL_ADDR", local}}, "MPI_LOCALNRANKS=1"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "2"}, {"DCCL_ADDR", local}},
       "SLURM_NNODES=2"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", local}, {"DCCL_TIMEOUT_S", "9999999999"}},
       "DCCL_TIMEOUT_S=9999999999 is out of range"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", local}, {"DCCL_SEGMENT_BYTES", "18446744073709551615"}},
       "DCCL_SEGMENT_BYTES"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", local}, {"DCCL_DEBUG", "LOUD"}},
       "DCCL_DEBUG=LOUD"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "9999999999"}, {"DCCL_ADDR", local}}, "DCCL_WORLD_SIZE"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "4294967298"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}},
       "WORLD_SIZE=4294967298"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:4294967297"}}, "port"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "65535"}},
       "MASTER_PORT=65535: the DirectCCL store listens on MASTER_PORT + 1"},
  };
  const std::string timeout = getenv("DCCL_TIMEOUT_S");
  for (const Refusal& k : cases) {
    std::string what;
    for (const auto& [name, value] : k.vars) what += name + "=" + value + " ";
    SCOPED_TRACE(what);
    clear_launcher_vars();
    setenv("DCCL_TIMEOUT_S", timeout.c_str(), 1);
    for (const auto& [name, value] : k.vars) setenv(name.c_str(), value.c_str(), 1);
    dcclComm_t c = nullptr;
    EXPECT_EQ(dcclCommInitFromEnv(&c), dcclInvalidArgument);
    const std::string text = dcclGetLastError(nullptr);
    EXPECT_NE(text.find(k.word), std::string::npos) << "last error '" << text << "' does not mention " << k.word;
    if (text.find("no job secret") != std::string::npos) {
      EXPECT_NE(text.find("DCCL_SECRET"), std::string::npos) << text;
      EXPECT_NE(text.find("DCCL_INSECURE=1"), std::string::npos) << text;
    }
    if (c) dcclCommDestroy(c);
  }
  clear_launcher_vars();
  setenv("DCCL_TIMEOUT_S", timeout.c_str(), 1);
}

// Refusals made before any rendezvous: run in this process, one rank each.

TEST(EnvInit, BadEnvironmentIsRefused) {
  const std::string id_hex(2 * DCCL_UNIQUE_ID_BYTES, '0');
  std::string bad_digit = id_hex;
  bad_digit[10] = 'g';
  const std::vector<Refusal> cases = {
      {{}, "DCCL_RANK"},
      {{{"DCCL_RANK", "0"}}, "DCCL_RANK"},  // size missing: no launcher matched
      {{{"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}}, "DCCL_RANK"},
      {{{"DCCL_RANK", "2"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:29500"}}, "out of range"},
      {{{"DCCL_RANK", "5"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:29500"}}, "rank 5"},
      {{{"DCCL_RANK", "-1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:29500"}}, "rank -1"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "0"}, {"DCCL_ADDR", "127.0.0.1:29500"}}, "size 0"},
      {{{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}},
       "Slurm"},
      {{{"DCCL_RANK", "x1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:29500"}}, "DCCL_RANK"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1"}}, "DCCL_ADDR"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:"}}, "DCCL_ADDR"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:http"}}, "DCCL_ADDR"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:70000"}}, "port"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}}, "DCCL_ADDR"},  // no rendezvous at all
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}}, "MASTER_ADDR and MASTER_PORT (torchrun sets them"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}}, "A single rank (world size 1) needs none"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}, "MASTER_ADDR is not set (MASTER_PORT is)"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}}, "MASTER_PORT"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ID", "abc"}}, "hex"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ID", bad_digit}}, "hex"},
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ID", id_hex}}, "unique id"},  // hex, but not an id
      {{{"DCCL_RANK", "0"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:29500"}, {"DCCL_SECRET", "12"}},
       "secret"},
      // Each names the rank, the operation and the variable (they named neither rank nor call).
      {{{"DCCL_RANK", "1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1"}},
       "rank 1: dcclCommInitFromEnv: DCCL_ADDR must be host:port"},
      {{{"DCCL_RANK", "1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "127.0.0.1:29500"}, {"DCCL_SECRET", "12"}},
       "rank 1: dcclCommInitFromEnv: DCCL_SECRET: "},
      {{{"DCCL_RANK", "1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ID", "abc"}}, "rank 1: dcclCommInitFromEnv: DCCL_ID: "},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "x"}},
       "rank 1: dcclCommInitFromEnv: MASTER_PORT: not an integer"},
      {{{"DCCL_RANK", "1"}, {"DCCL_WORLD_SIZE", "2"}, {"DCCL_ADDR", "[::1]:29500"}},
       "rank 1: dcclCommInitFromEnv: cannot resolve the rendezvous host '[::1]' (DCCL_ADDR)"},
      {{{"DCCL_RANK", "x1"}, {"DCCL_WORLD_SIZE", "2"}}, "dcclCommInitFromEnv: DCCL_RANK: not an integer"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "two"}, {"DCCL_ADDR", "127.0.0.1:29500"}},
       "rank 0: dcclCommInitFromEnv: SLURM_NNODES: not an integer"},
      {{{"DCCL_RANK", "3"}, {"DCCL_WORLD_SIZE", "2"}}, "rank 3: dcclCommInitFromEnv: rank 3 / size 2 from DCCL (DCCL_RANK"},
      // Half a launcher's pair is named (was: "no rank/size" alone).
      {{{"DCCL_RANK", "0"}}, "DCCL_RANK is set but DCCL_WORLD_SIZE is not"},
      {{{"SLURM_NTASKS", "4"}}, "SLURM_NTASKS is set but SLURM_PROCID is not"},
  };
  for (const Refusal& k : cases) {
    std::string what;
    for (const auto& [name, value] : k.vars) what += name + "=" + value + " ";
    SCOPED_TRACE(what);
    clear_launcher_vars();
    for (const auto& [name, value] : k.vars) setenv(name.c_str(), value.c_str(), 1);
    dcclComm_t c = reinterpret_cast<dcclComm_t>(0x1);
    EXPECT_EQ(dcclCommInitFromEnv(&c), dcclInvalidArgument);
    EXPECT_EQ(c, nullptr);
    const std::string text = dcclGetLastError(nullptr);
    EXPECT_NE(text.find(k.word), std::string::npos) << "last error '" << text << "' does not mention " << k.word;
    if (c != nullptr && c != reinterpret_cast<dcclComm_t>(0x1)) dcclCommDestroy(c);
  }
  clear_launcher_vars();
  EXPECT_EQ(dcclCommInitFromEnv(nullptr), dcclInvalidArgument);
  EXPECT_NE(std::string(dcclGetLastError(nullptr)).find("comm"), std::string::npos);
}

}  // namespace
