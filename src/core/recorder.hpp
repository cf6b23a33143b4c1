// The flight recorder: a fixed ring of a communicator's recent calls (what was
// called, how it ran, when each step completed, how it ended), written by the
// thread running the call without a lock or an allocation, and dumped as JSON
// lines when something goes wrong (tools/dccl-trace reads the dumps of every rank).
//
// One writer per recorder: a communicator runs one submission at a time. Readers
// (a dump, the status record) read the ring as it is: a dump taken while a call
// runs shows that call as running. Dumps are async-signal-safe (write(2) of text
// formatted here, no allocation), so a fatal signal's handler may take one.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dccl::core {

// One completed transfer of a call: its peer, direction, size and completion time.
struct RecStep {
  int32_t peer = -1;
  uint32_t send = 0;  // 1: sent to peer, 0: received from peer
  uint64_t bytes = 0;
  uint64_t posted_t = 0, done_t = 0;  // ticks (core/ticks.hpp); done 0: still in flight
};

// Every call writes all of its entry but the steps, which come last: the entries start
// on a cache line, so that a call touches three lines (recorder.cc asserts it) and its
// first steps, which begin() fetches ahead for the next call (see there).
struct alignas(64) RecEntry {
  static constexpr uint32_t kSteps = 24;  // steps kept per call; later ones are only counted
  uint64_t seq = 0;                       // the communicator's collective sequence number
  uint64_t user_seq = 0;                  // the caller's own number (dcclCommSetCallTag), 0: none
  const char* coll = "";                  // static names (async-signal-safe to print)
  const char* type = "";
  const char* op = "";
  const char* algo = "";
  const char* path = "";
  uint64_t count = 0;
  int32_t root = -1, peer = -1;
  int32_t result = -1;                    // dcclResult_t once ended; -1: running
  int32_t error = 0;                      // the error the call is failing with (Recorder::failing)
  uint32_t nsteps = 0, dropped = 0;
  uint64_t start_t = 0, end_t = 0;    // ticks (core/ticks.hpp): Recorder::ns() converts
  uint64_t sent = 0, recvd = 0;           // bytes over every step, kept or not
  char tag[32] = {};                      // the caller's group name (dcclCommSetCallTag)
  RecEntry* prev = nullptr;  // the thread's entry before this one began (restored at its end)
  class Recorder* prev_rec = nullptr;
  RecStep steps[kSteps];
};

class Recorder {
 public:
  // `capacity` entries (0: recording off; every call below is then a no-op).
  explicit Recorder(size_t capacity);
  // The longest folder a dump goes to, and the longest file name it writes (PATH_MAX):
  // a longer one fails the dump with ENAMETOOLONG, never writes a name cut short.
  static constexpr size_t kMaxPath = 4096;
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  bool on() const { return cap_ > 0; }
  // Who this ring belongs to, for the dump's first line (called once, at init).
  // `comm`: the same on every rank of the communicator; `dir`: where dumps go ("": nowhere).
  void identify(int rank, int nranks, const char* host, const char* comm, const char* dir);
  // Every rank's host, by rank, for the dump's header (called once, at init).
  void set_hosts(const std::vector<std::string>& hosts);
  const char* dir() const { return dir_; }
  const char* comm_id() const { return comm_; }
  const char* host() const { return host_; }

  // The hot path. begin() takes the next slot (the oldest call's) and makes it
  // the thread's current entry, so that the transfers of the call record their
  // steps (step()); end() closes it and restores the previous current entry.
  RecEntry* begin(uint64_t seq, const char* coll, uint64_t count, const char* type, const char* op, int root,
                  int peer);
  void end(RecEntry* e, int result);
  // The caller's tag for its next call (copied; at most 31 bytes kept).
  void set_tag(const char* tag, uint64_t user_seq);

  // The entry of the call this thread runs, if any.
  static RecEntry* current();
  static void set_current(RecEntry* e);
  // A transfer of the current call was posted, then completed (no-op when no call
  // is recorded). The steps past the kept ones are only counted.
  static void posted(int peer, bool send, uint64_t bytes);
  static void step(int peer, bool send, uint64_t bytes);

  // The current call is failing with `code` (its error is on its way out).
  static void failing(int code);

  // Live state for the status record.
  uint64_t calls() const { return head_.load(std::memory_order_relaxed); }
  int64_t last_progress_ns() const { return ns(last_t_.load(std::memory_order_relaxed)); }
  // The status publisher reached the store (comm/status.cc): the dump's header says
  // when last ("store_ns"; 0: never), so that a rank cut off from the others shows.
  void store_reached();
  // Copies the latest entry (running or not) into *out; false when there is none.
  bool latest(RecEntry* out) const;

  // Writes the ring as JSON lines: a header line, then one line per call, oldest
  // first, to <dir>/dccl-rec.<comm>.r<rank>.jsonl (replaced). Async-signal-safe.
  // `dir` null: the identified one; a `dir` given is made (with its parents) where
  // missing. Returns false, errno saying why, when nothing could be written.
  bool dump(const char* reason, const char* dir = nullptr) const noexcept;
  // Makes `dir` (and its parents) where missing and checks that this process can
  // write there: "" or the cause, for a warning at init (a dump cannot report).
  static std::string prepare_dir(const std::string& dir);
  // dump() for every recorder of this process with a folder (the signal handlers).
  static void dump_all(const char* reason) noexcept;
  // Installs the handlers once per process: fatal signals (SIGSEGV, SIGBUS, SIGILL,
  // SIGFPE, SIGABRT) dump and then take their previous action; SIGUSR2 dumps on
  // demand. A signal whose handler the application set already is left alone.
  static void install_signal_handlers();

  // CLOCK_REALTIME now, and of a recorded tick (0 stays 0).
  static int64_t now_ns();
  static int64_t ns(uint64_t tick);

 private:
  size_t cap_;
  size_t slots_ = 0;  // cap_ + 1: the ring keeps cap_ calls and a spare slot (recorder.cc)
  std::unique_ptr<RecEntry[]> ring_;
  std::atomic<uint64_t> head_{0};  // calls begun
  size_t slot_next_ = 0;            // the slot the next call takes: head_ % slots_
  std::atomic<uint64_t> last_t_{0};  // ticks
  std::atomic<uint64_t> store_t_{0};  // ticks; 0: never
  char tag_[32] = {};
  uint64_t user_seq_ = 0;
  int rank_ = 0, nranks_ = 0;
  char host_[64] = {}, comm_[80] = {};
  char dir_[kMaxPath] = {};  // DCCL_RECORDER_DIR in full (a longer one is named by prepare_dir)
  std::string hosts_json_ = "[]";  // written once at init; dumps only read it
  int slot_ = -1;  // in the process's registry
};

}  // namespace dccl::core
