// The one table of DCCL_* settings: X(field, env name, type, default, help).
// dccl-info --env and docs/env.md are generated from it. Types: Str, Int, Bytes, Bool.
// Every Int and Bytes setting has a range in DCCL_CONFIG_RANGES below: load_config
// refuses a value outside it, naming the setting (config_test checks that none lacks one).
#pragma once

// Defaults that structs carrying settings also start from (their one home).
#define DCCL_DEFAULT_TIMEOUT_S 600
#define DCCL_DEFAULT_SPIN_US 50
#define DCCL_CFG_STR2(x) #x
#define DCCL_CFG_STR(x) DCCL_CFG_STR2(x)

#define DCCL_CONFIG_TABLE(X)                                                                      \
  X(debug, "DCCL_DEBUG", Str, "WARN", "Log level: NONE, WARN, INFO or TRACE")                      \
  X(timeout_s, "DCCL_TIMEOUT_S", Int, DCCL_CFG_STR(DCCL_DEFAULT_TIMEOUT_S), "Bound in seconds on every call: its waits (and init's phases) share one deadline")          \
  X(provider, "DCCL_PROVIDER", Str, "", "libfabric provider for all peers (e.g. shm, tcp); empty: shm on one host, tcp;ofi_rxm across hosts; else FI_PROVIDER when it names one provider") \
  X(algo, "DCCL_ALGO", Str, "", "Force an algorithm (the list comes from the algorithm table)") \
  X(chunk_bytes, "DCCL_CHUNK_BYTES", Bytes, "0", "Pipeline chunk size; 0 lets the tuner choose")  \
  X(host_id, "DCCL_HOST_ID", Str, "", "Names this rank's host: ranks with the same id share a host (shm, shared segment, hierarchy); empty: hostname + boot id") \
  X(hier, "DCCL_HIER", Bool, "1", "Across hosts with the same number of ranks each: build intra-host and cross-host sub-communicators for hierarchical algorithms (0: flat algorithms only)") \
  X(hier_piece_bytes, "DCCL_HIER_PIECE_BYTES", Bytes, "4M", "Hierarchical allreduce above 64 KiB runs in pieces of this many bytes, the cross-host step of one piece beside the intra-host steps of its neighbours (0: one piece)") \
  X(net_ifname, "DCCL_NET_IFNAME", Str, "", "Network rails (NICs) by interface name, comma list in rail order, exact names; init fails naming what exists when one is not offered. Empty: every non-loopback IPv4 interface tcp;ofi_rxm offers (docker*, virbr* left out). A rank's rail is its local rank mod the rail count") \
  X(net_stripe_bytes, "DCCL_NET_STRIPE_BYTES", Bytes, "128K", "With one rank per host and >= 2 rails at both ends: message parts of at least this size are cut into one piece per rail (0: never stripe)") \
  X(net_sock_bytes, "DCCL_NET_SOCK_BYTES", Bytes, "64M", "With DCCL_TRUST_NETWORK=1: host-memory messages up to this size to peers reached over tcp;ofi_rxm take DirectCCL's own socket path: one TCP connection per pair (DCCL_NET_FLOWS across hosts), one system call per message at each end, payloads read straight into the receive (0: every message through libfabric, refused unless DCCL_TRUST_NETWORK=1; larger messages go through libfabric, whose rendezvous waits for the receive where the socket path would buffer an early message)") \
  X(net_flows, "DCCL_NET_FLOWS", Int, "0", "Connections (flows) per peer, each from its own port so that multipath routing and per-flow rate caps tell them apart. On DirectCCL's socket path: TCP connections per pair, messages of at least 256 KiB cut into chunks sent over whichever flow has the fewest bytes queued; 0: automatic, 1 to a peer on the same host or over loopback, 8 across hosts. On libfabric: endpoints per rail (at most 16), messages of at least 256 KiB cut into one piece per flow (DCCL_NET_LANE_BALANCE); 0: automatic, tcp;ofi_rxm 8 across hosts, 1 on the same host, on shm (always) and on every other provider (efa sprays by itself). A pair takes the smaller of both ends' numbers") \
  X(net_lane_balance, "DCCL_NET_LANE_BALANCE", Bool, "1", "On libfabric with several flows or striped rails per peer: each message goes to the lanes with the fewest of the pair's bytes outstanding (sent, not yet completed), filled up to a common level, so that while a pipeline keeps messages in flight a flow that collides with another on a path, or a slower rail, is handed less (idle lanes share a message equally); the sender tells the receiver each part's cut in a small note ahead of the pieces. 0: equal pieces always") \
  X(net_lane_window_bytes, "DCCL_NET_LANE_WINDOW_BYTES", Bytes, "256K", "On libfabric with DCCL_NET_LANE_BALANCE: a send waits in DirectCCL while every lane (flow or rail) to its peer has at least its window outstanding (sent, not yet completed), and goes out, into the lanes that drained, once one drains below it, so that a burst of messages (an allgather posts a whole block at once) hands a slower lane less. A lane's window is this many bytes, or what it drains in 1 ms at its measured rate where that is more, so that a fast lane keeps work queued between the caller's progress calls. 0: never hold") \
  X(net_tcp_congestion, "DCCL_NET_TCP_CONGESTION", Str, "auto", "TCP congestion control of DirectCCL's socket path: auto: cubic (else reno) for a pair on one host, whatever the system's default (a pacing one such as bbr reorders a connection's segments on loopback and veth, and TCP then retransmits them), the system's across hosts; system: the system's for every pair; a name (cubic, reno, bbr, ...): every connection, and init fails naming the kernel's refusal where it cannot be set") \
  X(net_flow_window_bytes, "DCCL_NET_FLOW_WINDOW_BYTES", Bytes, "128K", "On DirectCCL's socket path with several flows per peer: a flow takes a message's next chunk while fewer than this many of its bytes wait (queued and unacknowledged), so that a slow (capped or colliding) flow gets fewer chunks; smaller holds less data in the network's queues ahead of a call's last chunk; a flow carries at most this much per round trip, so raise it where one flow's rate times the round trip is larger") \
  X(trust_network, "DCCL_TRUST_NETWORK", Bool, "0", "1: trust the network, so that libfabric providers that identify a peer by its address (tcp;ofi_rxm, udp;ofi_rxd, sockets) carry the job's data as they are: DCCL_NET_SOCK_BYTES, striping over rails and peer-direct device memory across hosts then apply (logged as a warning). 0: host memory to peers reached over tcp takes DirectCCL's socket path, authenticated with the job secret, at every size; device memory to them is staged through it; tcp;ofi_rxm is not opened; another such DCCL_PROVIDER is refused. shm, efa and verbs are trusted as they are (docs/reliability.md)") \
  X(sim_dmabuf, "DCCL_SIM_DMABUF", Bool, "1", "sim accelerator memory offers dma-buf export (0: not, as memory a NIC cannot reach; tests the staged fallback)") \
  X(socket_ifname, "DCCL_SOCKET_IFNAME", Str, "", "Interface for the bootstrap store; empty: the one that reaches the root") \
  X(peer_direct, "DCCL_PEER_DIRECT", Str, "auto", "auto: direct where viable; 1: require direct; 0: force host staging") \
  X(staging_slot_bytes, "DCCL_STAGING_SLOT_BYTES", Bytes, "1M", "Size of one host staging slot")   \
  X(staging_slots, "DCCL_STAGING_SLOTS", Int, "4", "Host staging slots per peer (at least 2)")     \
  X(reg_cache_bytes, "DCCL_REG_CACHE_BYTES", Bytes, "8G", "Bound on memory kept registered by the peer-direct registration cache (LRU eviction)") \
  X(segment_bytes, "DCCL_SEGMENT_BYTES", Bytes, "64K", "Largest allreduce done one-shot through host shared memory when all ranks share a host (16K cap above 4 ranks; 0 disables)") \
  X(segment_chunk_bytes, "DCCL_SEGMENT_CHUNK_BYTES", Bytes, "256K", "Chunk of the pipelined allreduce through host shared memory (each rank's slot holds one), used above DCCL_SEGMENT_BYTES when all ranks share a host; unset, 512K for 2 ranks (0 disables)") \
  X(rxm_eager_bytes, "DCCL_RXM_EAGER_BYTES", Bytes, "256K", "Sets FI_OFI_RXM_EAGER_LIMIT (tcp;ofi_rxm sends up to this size eagerly, without a rendezvous round trip) unless it is set; 0 leaves libfabric's default") \
  X(stats, "DCCL_STATS", Bool, "0", "Print the communicator's data-path statistics at destroy")  \
  X(check, "DCCL_CHECK", Bool, "0", "Check every operation's signature across ranks")           \
  X(recorder, "DCCL_RECORDER", Int, "512", "Calls kept in each communicator's flight recorder: what was called, the algorithm and data path, each step's completion, how it ended (0: off; docs/observability.md)") \
  X(recorder_dir, "DCCL_RECORDER_DIR", Str, "", "Folder (made at init where missing) where each rank writes its flight recorder as JSON lines on a timeout, a failure (its own or another rank's), an abort, a fatal signal, SIGUSR2 or dcclCommDumpRecorder (empty: only where dcclCommDumpRecorder names a folder); dccl-trace reads them") \
  X(status_ms, "DCCL_STATUS_MS", Int, "1000", "Every this many milliseconds each rank publishes its current call, sequence number and last progress to the store, for dccl-info --job, and takes the dumps other ranks asked for (0: off)") \
  X(spin_us, "DCCL_SPIN_US", Int, DCCL_CFG_STR(DCCL_DEFAULT_SPIN_US), "Microseconds to poll a completion queue before yielding") \
  X(busy_widen_bytes, "DCCL_BUSY_WIDEN_BYTES", Bytes, "64K", "While other processes keep the host's CPUs busy, a thread that its launcher bound to one CPU runs calls of at least this many bytes on every CPU of its NUMA node that it may use, and returns to its CPU for smaller calls and once the host is quiet again (core/affinity.hpp; 0: never)") \
  X(rank, "DCCL_RANK", Int, "-1", "This process's rank (dcclCommInitFromEnv)")                   \
  X(local_rank, "DCCL_LOCAL_RANK", Int, "-1", "This process's rank on its host: picks its network rail and its GPU; -1: from the launcher (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID), else the topology") \
  X(world_size, "DCCL_WORLD_SIZE", Int, "-1", "Number of ranks (dcclCommInitFromEnv)")           \
  X(addr, "DCCL_ADDR", Str, "", "Rendezvous host:port served by rank 0 (dcclCommInitFromEnv)")   \
  X(id, "DCCL_ID", Str, "", "Serialised unique id in hex, as dccl-run hands it out")             \
  X(secret, "DCCL_SECRET", Str, "", "Job secret (32 hex digits, the same on every rank) when the rendezvous comes from DCCL_ADDR or launcher variables; required when the ranks span several hosts. Unset on one host: rank 0 makes a random one and the others read it from a file only this user can read") \
  X(insecure, "DCCL_INSECURE", Bool, "0", "1: without DCCL_SECRET across hosts, derive the job secret from the rendezvous address and job variables, so that any process that can reach the address can join the job (logged as a warning on every rank)")

// R(env name, smallest, largest) for every Int and Bytes setting. Bounds keep the
// arithmetic done with the values (deadlines, segment and buffer sizes, tags) from
// overflowing; they are printed in the settings' help.
#define DCCL_CONFIG_RANGES(R)                                     \
  R("DCCL_TIMEOUT_S", 1, 31536000) /* one year */                 \
  R("DCCL_CHUNK_BYTES", 0, 1ULL << 30)                            \
  R("DCCL_NET_STRIPE_BYTES", 0, 1ULL << 30)                       \
  R("DCCL_NET_SOCK_BYTES", 0, 1ULL << 40)                         \
  R("DCCL_NET_FLOWS", 0, 64)                                      \
  R("DCCL_NET_FLOW_WINDOW_BYTES", 4096, 1ULL << 30)               \
  R("DCCL_NET_LANE_WINDOW_BYTES", 0, 1ULL << 30)                  \
  R("DCCL_HIER_PIECE_BYTES", 0, 1ULL << 30)                       \
  R("DCCL_STAGING_SLOT_BYTES", 4096, 1ULL << 30)                  \
  R("DCCL_STAGING_SLOTS", 2, 1024)                                \
  R("DCCL_REG_CACHE_BYTES", 0, 16ULL << 40)                       \
  R("DCCL_SEGMENT_BYTES", 0, 256ULL << 20)                           \
  R("DCCL_SEGMENT_CHUNK_BYTES", 0, 256ULL << 20)                     \
  R("DCCL_RXM_EAGER_BYTES", 0, 64ULL << 20)                       \
  R("DCCL_SPIN_US", 0, 10000000)                                  \
  R("DCCL_BUSY_WIDEN_BYTES", 0, 1ULL << 40)                       \
  R("DCCL_RECORDER", 0, 1ULL << 20)                               \
  R("DCCL_STATUS_MS", 0, 3600000)                                 \
  R("DCCL_RANK", -1, 16777215)                                    \
  R("DCCL_LOCAL_RANK", -1, 16777215)                              \
  R("DCCL_WORLD_SIZE", -1, 16777216)
