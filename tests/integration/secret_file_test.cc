// The job secret shared through a file on one host (bootstrap/secret_file.hpp):
// private and exclusive, live while its publisher is, replaced when its publisher
// died, refused when another user could have planted or read it, removed by the
// store that adopted it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "bootstrap/secret_file.hpp"
#include "bootstrap/store.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;
using Clock = std::chrono::steady_clock;

namespace {

bool exists(const std::string& p) {
  struct stat st{};
  return lstat(p.c_str(), &st) == 0;
}

std::string job_name(const char* what) {
  return std::string("secret-file-test:") + what + ":" + std::to_string(getpid());
}

SharedSecret read_soon(const std::string& job, std::chrono::milliseconds t = 300ms) {
  return read_secret(job, 1, Clock::now() + t, t);
}

}  // namespace

TEST(SecretFile, PublishReadAdoptRemove) {
  const std::string job = job_name("basic");
  std::string path;
  auto secret = publish_secret(job, 4, 40001, 0, &path);
  EXPECT_EQ(path, secret_path(job));
  struct stat st{};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  SharedSecret got = read_soon(job);
  EXPECT_EQ(got.secret, secret);
  EXPECT_EQ(got.nranks, 4);
  EXPECT_EQ(got.pid, getpid());
  EXPECT_EQ(adopt_secret_file(secret, 40002), nullptr);  // another port: not this store's
  auto file = adopt_secret_file(secret, 40001);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(adopt_secret_file(secret, 40001), nullptr);
  file.reset();
  EXPECT_FALSE(exists(path));
}

// A second publisher of a live job's file is refused (two jobs on one address).
TEST(SecretFile, LiveFileIsNotTaken) {
  const std::string job = job_name("live");
  auto secret = publish_secret(job, 2, 40003, 0, nullptr);
  Error e = catch_error([&] { publish_secret(job, 2, 40003, 0, nullptr); });
  EXPECT_EQ(e.code(), dcclInvalidUsage);
  EXPECT_NE(std::string(e.what()).find("another job on this host"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(getpid())), std::string::npos) << e.what();
  adopt_secret_file(secret, 40003).reset();
}

// A file whose publisher died (kill -9: nobody removed it) is not read, and the
// next publisher replaces it.
TEST(SecretFile, DeadPublishersFileIsReplaced) {
  const std::string job = job_name("dead");
  pid_t pid = fork();
  if (pid == 0) {
    publish_secret(job, 2, 40004, 0, nullptr);
    _exit(0);  // no destructors: the file stays, unlocked
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(exists(secret_path(job)));
  auto t0 = Clock::now();
  Error e = catch_error([&] { read_soon(job); });
  EXPECT_EQ(e.code(), dcclTimeout);
  EXPECT_GE(Clock::now() - t0, 250ms);
  EXPECT_NE(std::string(e.what()).find("gone"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("DCCL_SECRET"), std::string::npos) << e.what();
  auto secret = publish_secret(job, 2, 40004, 0, nullptr);
  EXPECT_EQ(read_soon(job).secret, secret);
  adopt_secret_file(secret, 40004).reset();
}

// A reader waits for a publisher that comes late, within its timeout.
TEST(SecretFile, ReaderWaitsForThePublisher) {
  const std::string job = job_name("late");
  std::array<uint8_t, 16> secret{};
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    secret = publish_secret(job, 3, 40005, 0, nullptr);
  });
  SharedSecret got = read_soon(job, 5s);
  late.join();
  EXPECT_EQ(got.secret, secret);
  adopt_secret_file(secret, 40005).reset();
}

// A file another user could have planted or read is refused by both sides.
TEST(SecretFile, UntrustedFilesAreRefused) {
  const std::string job = job_name("planted");
  const std::string path = secret_path(job);
  {
    std::ofstream f(path);
    f << "DCCL-SECRET 1\njob " << job << "\nnranks 2\npid 1\nhost x\nsecret 00112233445566778899aabbccddeeff\n";
  }
  chmod(path.c_str(), 0644);
  Error e = catch_error([&] { read_soon(job); });
  EXPECT_EQ(e.code(), dcclSystemError);
  EXPECT_NE(std::string(e.what()).find("mode is 0644"), std::string::npos) << e.what();
  e = catch_error([&] { publish_secret(job, 2, 40006, 0, nullptr); });
  EXPECT_EQ(e.code(), dcclSystemError);
  EXPECT_NE(std::string(e.what()).find("others may read"), std::string::npos) << e.what();
  if (geteuid() == 0) {  // root may give it away: a file of another user
    chmod(path.c_str(), 0600);
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
    e = catch_error([&] { read_soon(job); });
    EXPECT_NE(std::string(e.what()).find("belongs to uid 65534"), std::string::npos) << e.what();
  }
  unlink(path.c_str());
}

// The store started for (secret, port) adopts the file and removes it when it
// stops, or at once when it cannot start.
TEST(SecretFile, TheStoreRemovesItsFile) {
  const std::string job = job_name("store");
  std::string path;
  auto secret = publish_secret(job, 2, 0, 0, &path);  // port 0: any port
  auto server = StoreServer::start("127.0.0.1", 0, secret);
  EXPECT_TRUE(exists(path));
  server.reset();
  EXPECT_FALSE(exists(path));
  auto taken = StoreServer::start("127.0.0.1", 0, dccl::boot::random_secret());
  const uint16_t busy_port = taken->id().port;
  secret = publish_secret(job, 2, busy_port, 0, &path);
  EXPECT_EQ(catch_error([&] { StoreServer::start("127.0.0.1", busy_port, secret); }).code(), dcclSystemError);
  EXPECT_FALSE(exists(path));
}

namespace {

// A fresh directory that anyone may create entries in, as /dev/shm and /tmp
// (mode 1777), standing in for them; removed with what it holds.
struct SharedBase {
  std::string path;
  SharedBase() {
    char t[] = "/tmp/dccl-secret-base-XXXXXX";
    path = mkdtemp(t);
    chmod(path.c_str(), 01777);
  }
  ~SharedBase() { std::filesystem::remove_all(path); }
  std::string user_dir() const { return path + "/dccl-" + std::to_string(geteuid()); }
};

// Restores /dev/shm and /tmp as the bases, and XDG_RUNTIME_DIR, at the end of a test.
struct BasesGuard {
  std::string xdg;
  bool had_xdg = false;
  BasesGuard() {
    if (const char* x = getenv("XDG_RUNTIME_DIR")) {
      had_xdg = true;
      xdg = x;
    }
    unsetenv("XDG_RUNTIME_DIR");
  }
  ~BasesGuard() {
    set_secret_bases({});
    if (had_xdg) setenv("XDG_RUNTIME_DIR", xdg.c_str(), 1);
  }
};

// The name every rank used before the per-user directory: /dev/shm/dccl-secret-<uid>-<hash>.
std::string old_path(const std::string& job) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : job) h = (h ^ ch) * 1099511628211ULL;
  char hex[17];
  snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return "/dev/shm/dccl-secret-" + std::to_string(geteuid()) + "-" + hex;
}

}  // namespace

// Another user creates the file's old name in /dev/shm before the job starts
// ("link ...: File exists" stopped the job): the file now lives in this user's
// own directory, and the job starts.
TEST(SecretFile, NameTakenByAnotherUserInDevShmDoesNotBlock) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a file of another user's";
  BasesGuard guard;
  const std::string job = job_name("squatted");
  const std::string planted = old_path(job);
  {
    std::ofstream f(planted);
    f << "not yours\n";
  }
  ASSERT_EQ(chown(planted.c_str(), 65534, 65534), 0);
  std::string path;
  std::array<uint8_t, 16> secret{};
  try {
    secret = publish_secret(job, 2, 40007, 0, &path);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  EXPECT_NE(path, planted);
  EXPECT_EQ(path.rfind("/dev/shm/dccl-" + std::to_string(geteuid()) + "/", 0), 0u) << path;
  EXPECT_EQ(read_soon(job).secret, secret);
  adopt_secret_file(secret, 40007).reset();
  unlink(planted.c_str());
}

// The per-user directory: made mode 0700; one planted by another user, one that
// others may write to, or a link in its place is passed over for the next base,
// and when no base is left the error names what is in the way and its owner.
TEST(SecretFile, PlantedUserDirectoryIsPassedOverNamingItsOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a directory of another user's";
  BasesGuard guard;
  SharedBase a, b, c;
  ASSERT_EQ(mkdir(a.user_dir().c_str(), 0700), 0);
  ASSERT_EQ(chown(a.user_dir().c_str(), 65534, 65534), 0);  // another user got there first
  set_secret_bases({a.path, b.path});
  const std::string job = job_name("planted-dir");
  std::string path;
  const auto secret = publish_secret(job, 2, 40008, 0, &path);
  EXPECT_EQ(path.rfind(b.user_dir() + "/", 0), 0u) << path;
  struct stat st{};
  ASSERT_EQ(lstat(b.user_dir().c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(read_soon(job).secret, secret);
  adopt_secret_file(secret, 40008).reset();

  // Nothing usable left: a's directory is another user's, c's is writable by all.
  ASSERT_EQ(mkdir(c.user_dir().c_str(), 0700), 0);
  chmod(c.user_dir().c_str(), 0777);
  set_secret_bases({a.path, c.path});
  Error e = catch_error([&] { publish_secret(job_name("nowhere"), 2, 40009, 0, nullptr); });
  EXPECT_EQ(e.code(), dcclSystemError);
  const std::string what = e.what();
  EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
  EXPECT_NE(what.find(a.user_dir() + " is unusable: it belongs to uid 65534"), std::string::npos) << what;
  EXPECT_NE(what.find(c.user_dir() + " is unusable: its mode is 0777"), std::string::npos) << what;
  e = catch_error([&] { read_soon(job_name("nowhere")); });
  EXPECT_NE(std::string(e.what()).find("belongs to uid 65534"), std::string::npos) << e.what();

  // A symbolic link in its place (to a private directory) is not a directory.
  std::filesystem::remove_all(c.user_dir());
  ASSERT_EQ(symlink(b.user_dir().c_str(), c.user_dir().c_str()), 0);
  set_secret_bases({c.path});
  e = catch_error([&] { publish_secret(job_name("link"), 2, 40010, 0, nullptr); });
  EXPECT_NE(std::string(e.what()).find("it is not a directory"), std::string::npos) << e.what();
}
