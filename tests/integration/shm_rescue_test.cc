// The libfabric shm regions of dead peers (net/shm_rescue.hpp): a peer killed a
// moment before this process closes its transport is often still a zombie; its
// region must go all the same, and a live peer's region must stay.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "net/fabric/shm_rescue.hpp"

using dccl::net::ShmPeer;

namespace {

bool exists(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0;
}

// A child that writes a region file named as the provider names its own, then
// exits (exit_now) or waits to be killed. Returns its pid and the region's path.
pid_t child_with_region(bool exit_now, std::string* path) {
  int pfd[2];
  EXPECT_EQ(pipe(pfd), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string p = "/dev/shm/" + std::to_string(getpid()) + ":7:0";
    FILE* f = fopen(p.c_str(), "w");
    if (f) fclose(f);
    char c = 'r';
    if (write(pfd[1], &c, 1) != 1) _exit(2);
    if (exit_now) _exit(0);
    pause();
    _exit(0);
  }
  close(pfd[1]);
  char c;
  EXPECT_EQ(read(pfd[0], &c, 1), 1);
  close(pfd[0]);
  *path = "/dev/shm/" + std::to_string(pid) + ":7:0";
  return pid;
}

int pidfd_of(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

TEST(ShmRescue, ZombiePeersRegionIsUnlinked) {
  std::string path;
  const pid_t pid = child_with_region(true, &path);
  const int fd = pidfd_of(pid);
  ASSERT_GE(fd, 0);
  // Exited but not reaped (WNOWAIT): a zombie. kill(pid, 0) still finds it, so
  // the reaper by pid leaves the region.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  dccl::net::reap_orphaned_shm_regions();
  EXPECT_TRUE(exists(path)) << "a zombie counts as live for the reaper by pid";
  dccl::net::unlink_exited_peers_regions({ShmPeer{fd, pid, "fi_shm://" + std::to_string(pid) + ":7:0"}});
  EXPECT_FALSE(exists(path)) << "the exited peer's region " << path << " was left";
  close(fd);
  waitpid(pid, nullptr, 0);
}

TEST(ShmRescue, LivePeersRegionStays) {
  std::string path;
  const pid_t pid = child_with_region(false, &path);
  const int fd = pidfd_of(pid);
  ASSERT_GE(fd, 0);
  dccl::net::unlink_exited_peers_regions({ShmPeer{fd, pid, "fi_shm://" + std::to_string(pid) + ":7:0"}});
  EXPECT_TRUE(exists(path)) << "a live peer's region was removed";
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(fd);
  unlink(path.c_str());
}

TEST(ShmRescue, RegionOfAnotherProcessIsNotTouched) {
  std::string path;
  const pid_t pid = child_with_region(true, &path);
  const int fd = pidfd_of(pid);
  ASSERT_GE(fd, 0);
  // The address names a different pid than the exited process: left alone.
  const std::string other = "/dev/shm/" + std::to_string(getpid()) + ":7:0";
  FILE* f = fopen(other.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  dccl::net::unlink_exited_peers_regions({ShmPeer{fd, pid, "fi_shm://" + std::to_string(getpid()) + ":7:0"}});
  EXPECT_TRUE(exists(other));
  unlink(other.c_str());
  waitpid(pid, nullptr, 0);
  close(fd);
  unlink(path.c_str());
}
