// The job secret shared through a file on one host (bootstrap/secret_file.hpp):
// private and exclusive, live while its publisher is, replaced when its publisher
// died, refused when another user could have planted or read it, removed by the
// store that adopted it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
