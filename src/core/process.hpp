// Which process image this is. fork() copies a communicator into the child, but
// not its threads, and its sockets, endpoints and shared segments stay shared with
// the parent: a call from the child would pair with the parent's peers or corrupt
// them. The generation is bumped in the child of every fork (pthread_atfork), so
// that an object made before a fork tells a call from the child by one load.
#pragma once
#include <cstdint>
#include <string>

namespace dccl::core {

uint32_t fork_generation();
// "pid P": the process that made an object of generation `gen`, for errors.
struct ProcessMark {
  uint32_t gen = fork_generation();
  int pid = current_pid();
  bool forked() const { return gen != fork_generation(); }
  // "this process (pid C) is a fork of pid P, which created the <what>"
  std::string fork_text(const char* what) const;
  static int current_pid();
};

}  // namespace dccl::core
