// Which of this job's ranks on this host sleep in the kernel right now, so that a
// long yield (core/contention.hpp) can tell the job's own ranks from other work.
//
// Where ranks outnumber cores, a rank's sched_yield() also waits behind a peer
// rank's slice, so a long yield alone is no evidence of other work. The host's
// runnable count (nr_running) is, once the job's own runnable ranks are taken out
// of it, and those are the job's ranks there less the ones asleep in a wait: a
// rank in a futex on the shared segment, a poll on its sockets or a nap is not
// runnable and leaves its core to whoever is.
//
// The board: one page per host and communicator, shared by the job's processes
// there only (its name derives from the job's secret). A thread that goes to sleep
// in a wait (core::Backoff's naps: every path's sleep) writes its thread id into a
// free slot and clears it when it wakes; nothing else touches the page, so waits
// that never sleep keep their cost. A slot says "went to sleep", not "asleep now":
// a woken rank stays in its slot until it gets a core, which where ranks outnumber
// cores can take a slice. The reader therefore asks the kernel for each slot's
// thread (its state in /proc/<tid>/stat) and counts it asleep only when the state
// says so before and after the runnable count is read; what it cannot read counts
// as runnable (a long yield then marks the process busy, as before the board).
//
// A process keeps one board: that of its communicator with the most ranks on this
// host. Boards stay mapped for the life of the process (a page each, replaced only
// by a wider communicator's), so a sleeper clears the slot it took even when its
// communicator is gone.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dccl::core {

class HostSleepers {
 public:
  static constexpr int kSlots = 64;
  struct Page {
    std::atomic<int32_t> tid[kSlots];
  };
  static_assert(std::atomic<int32_t>::is_always_lock_free && sizeof(std::atomic<int32_t>) == 4,
                "the board's slots are shared between processes");

  // This thread sleeps in the kernel for its lifetime (a wait's nap).
  class Asleep {
   public:
    Asleep() : page_(board_.load(std::memory_order_acquire)) {
      if (page_) slot_ = take(*page_);
    }
    ~Asleep() {
      if (slot_ >= 0) page_->tid[slot_].store(0, std::memory_order_release);
    }
    Asleep(const Asleep&) = delete;
    Asleep& operator=(const Asleep&) = delete;

   private:
    Page* page_;
    int slot_ = -1;
  };

  // Maps the board `name` (the job's ranks on this host use the same) and makes it
  // the process's when `local_ranks` exceeds the present one's. Returns false when
  // it was not needed (a board at least as wide, or one rank here) or could not be
  // mapped (no board then: a long yield counts as before). A caller that got true
  // unlinks the name once every rank there has mapped it.
  static bool join(const std::string& name, int local_ranks);
  static void unlink(const std::string& name);
  // The board's name for a job (its secret, the communicator's namespace, the host).
  static std::string board_name(const std::string& job, const std::string& host);

  // The job's ranks on this host (the board's width; 1 without a board).
  static int local_ranks() { return local_ranks_.load(std::memory_order_acquire); }
  // Threads of the board's ranks asleep before and after `between()` (which reads
  // the host's runnable count), by their state in the kernel.
  template <class F>
  static int asleep_around(F between) {
    int32_t tids[kSlots];
    const int n = sleeping(tids, kSlots);
    between();
    int still = 0;
    for (int i = 0; i < n; ++i) still += asleep(tids[i]) ? 1 : 0;
    return still;
  }
  // The threads whose slots are taken and which the kernel has asleep (at most max).
  static int sleeping(int32_t* tids, int max);
  // Whether thread `tid` sleeps (state S or D in /proc/<tid>/stat); false when unknown.
  static bool asleep(int32_t tid);
  // The state letter in a /proc/<tid>/stat text, 0 when there is none.
  static char parse_state(const char* text, size_t len);

  // For tests: a board in this process's own memory (nullptr: none).
  static void use(Page* page, int local_ranks);

 private:
  static int take(Page& page);
  static inline std::atomic<Page*> board_{nullptr};
  static inline std::atomic<int> local_ranks_{1};
};

}  // namespace dccl::core
