// CudaOrder's stream ordering on a simulated GPU: streams run their operations
// in order when they can (kernels, event records, waits on events and on the
// host flag), so the test sees what a CUDA device would run, and when.
#include "cuda_order.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace torch_dccl {
namespace {

using namespace std::chrono_literals;

// The simulated device: one lock over every stream and event.
struct Sim {
  struct Op {
    enum Kind { Kernel, Record, WaitEvent, WaitFlag } kind;
    std::string name;
    intptr_t event = 0;
    uint64_t generation = 0;
    volatile uint32_t* flag = nullptr;
    uint32_t value = 0;
  };
  std::mutex mu;
  bool paused = false;
  std::map<intptr_t, std::deque<Op>> streams;
  std::map<intptr_t, uint64_t> recorded, completed;  // per event: records queued, records run
  std::vector<std::string> log;                        // kernels as they ran, and the host's notes
  intptr_t next = 1;
  int host_syncs = 0;

  // Runs every stream as far as it can go.
  void step_locked() {
    if (paused) return;
    for (bool moved = true; moved;) {
      moved = false;
      for (auto& [id, q] : streams) {
        while (!q.empty()) {
          Op& op = q.front();
          if (op.kind == Op::WaitEvent && completed[op.event] < op.generation) break;
          if (op.kind == Op::WaitFlag && static_cast<int32_t>(*op.flag - op.value) < 0) break;
          if (op.kind == Op::Kernel) log.push_back(op.name);
          if (op.kind == Op::Record) completed[op.event] = op.generation;
          q.pop_front();
          moved = true;
        }
      }
    }
  }
  void step() {
    std::lock_guard<std::mutex> lk(mu);
    step_locked();
  }
  intptr_t new_stream() {
    std::lock_guard<std::mutex> lk(mu);
    const intptr_t id = next++;
    streams[id];
    return id;
  }
  void kernel(intptr_t s, const std::string& name) {
    std::lock_guard<std::mutex> lk(mu);
    streams[s].push_back({Op::Kernel, name});
  }
  void note(const std::string& what) {
    std::lock_guard<std::mutex> lk(mu);
    log.push_back(what);
  }
  bool ran(const std::string& name) {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& l : log)
      if (l == name) return true;
    return false;
  }
  void set_paused(bool p) {
    std::lock_guard<std::mutex> lk(mu);
    paused = p;
    step_locked();
  }
};

class SimOps final : public GpuOps {
 public:
  explicit SimOps(Sim& sim) : sim_(sim) {}
  Event create_event() override {
    std::lock_guard<std::mutex> lk(sim_.mu);
    return reinterpret_cast<Event>(sim_.next++);
  }
  void destroy_event(Event) override {}
  void record(Event e, Stream s) override {
    std::lock_guard<std::mutex> lk(sim_.mu);
    const auto id = reinterpret_cast<intptr_t>(e);
    sim_.streams[reinterpret_cast<intptr_t>(s)].push_back({Sim::Op::Record, "", id, ++sim_.recorded[id]});
    sim_.step_locked();
  }
  bool query(Event e) override {
    std::lock_guard<std::mutex> lk(sim_.mu);
    sim_.step_locked();
    const auto id = reinterpret_cast<intptr_t>(e);
    return sim_.completed[id] >= sim_.recorded[id];
  }
  void stream_wait_event(Stream s, Event e) override {
    std::lock_guard<std::mutex> lk(sim_.mu);
    const auto id = reinterpret_cast<intptr_t>(e);
    sim_.streams[reinterpret_cast<intptr_t>(s)].push_back({Sim::Op::WaitEvent, "", id, sim_.recorded[id]});
    sim_.step_locked();
  }
  Stream create_side_stream() override { return reinterpret_cast<Stream>(sim_.new_stream()); }
  void destroy_side_stream(Stream s) override {
    // Like cudaStreamSynchronize then destroy: the stream must be able to drain.
    sim_.step();
    std::lock_guard<std::mutex> lk(sim_.mu);
    side_left_ = sim_.streams[reinterpret_cast<intptr_t>(s)].size();
    ++sim_.host_syncs;
  }
  volatile uint32_t* alloc_flag() override { return &flag_; }
  void free_flag(volatile uint32_t*) override {}
  void stream_wait_flag(Stream s, volatile uint32_t* flag, uint32_t value) override {
    std::lock_guard<std::mutex> lk(sim_.mu);
    sim_.streams[reinterpret_cast<intptr_t>(s)].push_back({Sim::Op::WaitFlag, "", 0, 0, flag, value});
  }
  void run_on_work_stream(const std::function<void()>& body) override { body(); }

  static inline size_t side_left_ = 0;

 private:
  Sim& sim_;
  volatile uint32_t flag_ = 0;
};

GpuOps::Stream as_stream(intptr_t id) { return reinterpret_cast<GpuOps::Stream>(id); }

TEST(CudaOrder, CollectiveRunsAfterTheWorkQueuedBeforeIt) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream();
  sim.set_paused(true);
  sim.kernel(user, "produce");
  auto t = order.before(as_stream(user));
  std::atomic<bool> ran{false};
  std::thread worker([&] {
    EXPECT_TRUE(order.run(*t, std::chrono::steady_clock::now() + 10s, [&] {
      sim.note("collective");
      ran = true;
    }));
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(ran) << "the collective started before the stream's earlier work ran";
  sim.set_paused(false);
  worker.join();
  ASSERT_EQ(sim.log.size(), 2u);
  EXPECT_EQ(sim.log[0], "produce");
  EXPECT_EQ(sim.log[1], "collective");
}

TEST(CudaOrder, WaitOrdersTheConsumerWithoutBlockingTheHost) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream();
  auto t = order.before(as_stream(user));
  const auto t0 = std::chrono::steady_clock::now();
  CudaOrder::consumer_wait(*t, as_stream(user));  // Work.wait(): queued, returns at once
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 50ms);
  sim.kernel(user, "consume");
  for (int i = 0; i < 10; ++i) sim.step();
  EXPECT_FALSE(sim.ran("consume")) << "the consumer ran before the collective";
  ASSERT_TRUE(order.run(*t, std::chrono::steady_clock::now() + 10s, [&] { sim.note("collective"); }));
  sim.step();
  ASSERT_EQ(sim.log.size(), 2u);
  EXPECT_EQ(sim.log[0], "collective");
  EXPECT_EQ(sim.log[1], "consume");
}

TEST(CudaOrder, AnotherStreamIsNotHeldUp) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream(), other = sim.new_stream();
  auto t = order.before(as_stream(user));
  CudaOrder::consumer_wait(*t, as_stream(user));
  sim.kernel(other, "independent");
  sim.step();
  EXPECT_TRUE(sim.ran("independent"));
  order.run(*t, std::chrono::steady_clock::now() + 10s, [] {});
}

TEST(CudaOrder, AFailedCollectiveStillReleasesTheStream) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream();
  auto t = order.before(as_stream(user));
  CudaOrder::consumer_wait(*t, as_stream(user));
  sim.kernel(user, "consume");
  EXPECT_THROW(order.run(*t, std::chrono::steady_clock::now() + 10s, [] { throw std::runtime_error("peer gone"); }),
               std::runtime_error);
  sim.step();
  EXPECT_TRUE(sim.ran("consume")) << "a failed collective left the stream waiting forever";
}

TEST(CudaOrder, StartTimeoutSkipsTheBodyAndReleases) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream();
  sim.set_paused(true);  // the earlier work never finishes
  sim.kernel(user, "stuck");
  auto t = order.before(as_stream(user));
  CudaOrder::consumer_wait(*t, as_stream(user));
  bool ran = false;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(order.run(*t, t0 + 100ms, [&] { ran = true; }));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(ran);
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 2s);
  sim.set_paused(false);
  EXPECT_TRUE(sim.ran("stuck"));
}

TEST(CudaOrder, TicketsRunInOrderAndEachReleasesOnlyItsOwn) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream();
  auto a = order.before(as_stream(user));
  auto b = order.before(as_stream(user));
  EXPECT_EQ(a->seq + 1, b->seq);
  CudaOrder::consumer_wait(*b, as_stream(user));
  sim.kernel(user, "after b");
  order.run(*a, std::chrono::steady_clock::now() + 10s, [&] { sim.note("a"); });
  sim.step();
  EXPECT_FALSE(sim.ran("after b")) << "releasing a let b's consumer through";
  order.run(*b, std::chrono::steady_clock::now() + 10s, [&] { sim.note("b"); });
  sim.step();
  EXPECT_TRUE(sim.ran("after b"));
}

TEST(CudaOrder, WithoutTheGateOnlyTheStartIsOrdered) {
  Sim sim;
  CudaOrder order(std::make_unique<SimOps>(sim));
  const intptr_t user = sim.new_stream();
  sim.kernel(user, "produce");
  auto t = order.before(as_stream(user), /*gate=*/false);
  EXPECT_EQ(t->end, nullptr);
  sim.kernel(user, "independent of the collective");
  sim.step();
  EXPECT_TRUE(sim.ran("independent of the collective")) << "no gate: the stream does not wait";
  ASSERT_TRUE(order.run(*t, std::chrono::steady_clock::now() + 10s, [&] { sim.note("collective"); }));
  EXPECT_EQ(sim.log.front(), "produce");
}

TEST(CudaOrder, DestroyingReleasesTicketsNeverRun) {
  Sim sim;
  const intptr_t user = sim.new_stream();
  {
    CudaOrder order(std::make_unique<SimOps>(sim));
    auto a = order.before(as_stream(user));
    auto b = order.before(as_stream(user));
    CudaOrder::consumer_wait(*b, as_stream(user));
    sim.kernel(user, "after b");
  }  // an aborted group: its jobs never ran
  EXPECT_EQ(SimOps::side_left_, 0u) << "the side stream could not drain";
  sim.step();
  EXPECT_TRUE(sim.ran("after b"));
}

}  // namespace
}  // namespace torch_dccl
