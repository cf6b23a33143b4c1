// The flight recorder's ring: wrap-around keeps the newest calls (as many as its
// capacity), a dump makes the folder it is given, steps beyond the kept ones are
// counted, a nested call restores its parent, and a dump writes one header line
// and one line per kept call, oldest first.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>
#include <vector>

#include "core/recorder.hpp"

using dccl::core::RecEntry;
using dccl::core::Recorder;

namespace {
std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST(Recorder, RingKeepsTheNewestCalls) {
  char dir[] = "/tmp/dccl-rec-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Recorder r(4);
  r.identify(3, 8, "node\"7", "abc", dir);
  for (uint64_t s = 0; s < 10; ++s) {
    RecEntry* e = r.begin(s, "all_reduce", 100 + s, "float32", "sum", 0, -1);
    ASSERT_EQ(Recorder::current(), e);
    r.end(e, s == 9 ? 5 : 0);
  }
  EXPECT_EQ(Recorder::current(), nullptr);
  EXPECT_EQ(r.calls(), 10u);
  ASSERT_TRUE(r.dump("test"));
  const auto lines = lines_of(std::string(dir) + "/dccl-rec.abc.r3.jsonl");
  ASSERT_EQ(lines.size(), 5u);  // the header and the newest 4: as many as the capacity
  EXPECT_NE(lines[0].find("\"header\":1"), std::string::npos);
  EXPECT_NE(lines[0].find("\"host\":\"node\\\"7\""), std::string::npos);  // quoted
  EXPECT_NE(lines[0].find("\"first\":6"), std::string::npos);
  EXPECT_NE(lines[1].find("\"seq\":6,"), std::string::npos);
  EXPECT_NE(lines[1].find("\"count\":106,"), std::string::npos);
  EXPECT_NE(lines[4].find("\"seq\":9,"), std::string::npos);
  EXPECT_NE(lines[4].find("\"result\":5,"), std::string::npos);
  unlink((std::string(dir) + "/dccl-rec.abc.r3.jsonl").c_str());
  rmdir(dir);
}

// DCCL_RECORDER=N keeps N calls, N=1 included, and a call running at the dump is
// one of them (shown running).
TEST(Recorder, KeepsAsManyCallsAsItsCapacity) {
  char dir[] = "/tmp/dccl-rec-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/dccl-rec.cap.r0.jsonl";
  for (size_t cap : {1, 2, 5}) {
    Recorder r(cap);
    r.identify(0, 2, "h", "cap", dir);
    ASSERT_TRUE(r.dump("empty"));
    EXPECT_EQ(lines_of(file).size(), 1u) << cap;  // the header alone: no call yet
    for (uint64_t s = 0; s < 7; ++s) r.end(r.begin(s, "all_reduce", 1, "float32", "sum", 0, -1), 0);
    ASSERT_TRUE(r.dump("ended"));
    auto lines = lines_of(file);
    ASSERT_EQ(lines.size(), cap + 1) << cap;
    EXPECT_NE(lines[1].find("\"seq\":" + std::to_string(7 - cap) + ","), std::string::npos) << lines[1];
    EXPECT_NE(lines[cap].find("\"seq\":6,"), std::string::npos) << lines[cap];
    RecEntry* e = r.begin(7, "broadcast", 1, "float32", "sum", 0, -1);
    ASSERT_TRUE(r.dump("running"));
    lines = lines_of(file);
    ASSERT_EQ(lines.size(), cap + 1) << cap;
    EXPECT_NE(lines[cap].find("\"seq\":7,"), std::string::npos) << lines[cap];
    EXPECT_NE(lines[cap].find("\"result\":-1,"), std::string::npos) << lines[cap];
    r.end(e, 0);
    RecEntry last;
    ASSERT_TRUE(r.latest(&last));
    EXPECT_EQ(last.seq, 7u);
  }
  unlink(file.c_str());
  rmdir(dir);
}

// A folder given to dump() is made where missing, parents too; one that cannot be
// made fails with errno saying why.
TEST(Recorder, DumpMakesTheFolderGiven) {
  char dir[] = "/tmp/dccl-rec-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Recorder r(2);
  r.identify(1, 2, "h", "mk", "");
  r.end(r.begin(0, "all_reduce", 1, "float32", "sum", 0, -1), 0);
  const std::string nested = std::string(dir) + "/a/b/";
  ASSERT_TRUE(r.dump("on demand", nested.c_str()));
  EXPECT_EQ(lines_of(nested + "dccl-rec.mk.r1.jsonl").size(), 2u);
  const std::string file = std::string(dir) + "/file";
  { std::ofstream(file) << "x"; }
  errno = 0;
  EXPECT_FALSE(r.dump("on demand", (file + "/d").c_str()));
  EXPECT_EQ(errno, ENOTDIR);
  unlink((nested + "dccl-rec.mk.r1.jsonl").c_str());
  rmdir(nested.c_str());
  rmdir((std::string(dir) + "/a").c_str());
  unlink(file.c_str());
  rmdir(dir);
}

// A long folder gets its dump under the file's full name, made where missing (a
// 749-character folder once got "dccl-rec.long.r0" cut short, reported written; an
// 829-character one was never made); a name longer than a path can be fails with
// ENAMETOOLONG and writes nothing.
TEST(Recorder, DumpTakesLongFolders) {
  char dir[] = "/tmp/dccl-rec-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Recorder r(2);
  r.identify(0, 2, "h", "long", "");
  r.end(r.begin(0, "all_reduce", 1, "float32", "sum", 0, -1), 0);
  std::string mid = std::string(dir) + "/" + std::string(200, 'a') + "/" + std::string(200, 'b') + "/" +
                    std::string(200, 'c') + "/" + std::string(120, 'd');
  ASSERT_EQ(mid.size(), 749u);
  std::filesystem::create_directories(mid);
  ASSERT_TRUE(r.dump("on demand", mid.c_str())) << strerror(errno);
  EXPECT_EQ(lines_of(mid + "/dccl-rec.long.r0.jsonl").size(), 2u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(mid), std::filesystem::directory_iterator()), 1);
  const std::string deep = mid + "/" + std::string(79, 'e');
  ASSERT_TRUE(r.dump("on demand", deep.c_str())) << strerror(errno);
  EXPECT_EQ(lines_of(deep + "/dccl-rec.long.r0.jsonl").size(), 2u);
  std::string huge = dir;
  while (huge.size() < Recorder::kMaxPath - 10) huge += "/" + std::string(200, 'f');
  errno = 0;
  EXPECT_FALSE(r.dump("on demand", huge.c_str()));
  EXPECT_EQ(errno, ENAMETOOLONG);
  EXPECT_NE(Recorder::prepare_dir(huge).find("characters long"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Recorder, StepsAreKeptThenCounted) {
  Recorder r(2);
  RecEntry* e = r.begin(1, "all_gather", 8, "int32", "sum", 0, -1);
  for (uint32_t i = 0; i < RecEntry::kSteps + 3; ++i) Recorder::posted(static_cast<int>(i % 3), i % 2 == 0, 10);
  EXPECT_EQ(e->steps[1].done_t, 0);  // in flight
  for (uint32_t i = 0; i < RecEntry::kSteps + 3; ++i) Recorder::step(static_cast<int>(i % 3), i % 2 == 0, 10);
  EXPECT_EQ(e->nsteps, RecEntry::kSteps);
  EXPECT_EQ(e->dropped, 3u);
  EXPECT_EQ(e->sent + e->recvd, 10u * (RecEntry::kSteps + 3));
  EXPECT_EQ(e->steps[1].peer, 1);
  EXPECT_EQ(e->steps[1].send, 0u);
  EXPECT_GE(e->steps[1].posted_t, e->start_t);
  EXPECT_GE(e->steps[1].done_t, e->steps[1].posted_t);
  r.end(e, 0);
  Recorder::step(0, true, 99);  // no call: nothing recorded
  RecEntry last;
  ASSERT_TRUE(r.latest(&last));
  EXPECT_EQ(last.sent + last.recvd, 10u * (RecEntry::kSteps + 3));
}

TEST(Recorder, NestedCallRestoresItsParent) {
  Recorder parent(2), child(2);
  RecEntry* p = parent.begin(1, "all_reduce", 4, "float32", "sum", 0, -1);
  RecEntry* c = child.begin(7, "reduce_scatter", 2, "float32", "sum", 0, -1);
  Recorder::posted(1, true, 8);
  Recorder::step(1, true, 8);
  child.end(c, 0);
  EXPECT_EQ(Recorder::current(), p);
  Recorder::posted(2, false, 16);
  Recorder::step(2, false, 16);
  parent.end(p, 0);
  EXPECT_EQ(c->sent, 8u);
  EXPECT_EQ(p->recvd, 16u);
  EXPECT_EQ(p->sent, 0u);
  EXPECT_EQ(Recorder::current(), nullptr);
}

TEST(Recorder, OffRecordsNothing) {
  Recorder r(0);
  EXPECT_EQ(r.begin(1, "all_reduce", 4, "float32", "sum", 0, -1), nullptr);
  EXPECT_FALSE(r.dump("test", "/tmp"));
}

TEST(Recorder, TagNamesOneCall) {
  Recorder r(4);
  r.set_tag("pg0", 41);
  RecEntry* a = r.begin(1, "barrier", 0, "float32", "sum", 0, -1);
  r.end(a, 0);
  RecEntry* b = r.begin(2, "barrier", 0, "float32", "sum", 0, -1);
  r.end(b, 0);
  EXPECT_STREQ(a->tag, "pg0");
  EXPECT_EQ(a->user_seq, 41u);
  EXPECT_STREQ(b->tag, "");
  EXPECT_EQ(b->user_seq, 0u);
}
