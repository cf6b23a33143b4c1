// Whether an output file named on a tool's command line can be written, tried before
// the tool's work so that a bad path fails at once (the tools' --json outputs).
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

// "" when `path` can be written, else why not. Opened for appending (nothing is
// truncated) and removed again when this made it.
inline std::string unwritable(const std::string& path) {
  if (path.empty()) return "no file name given";
  struct stat st;
  const bool existed = stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) return "it is a folder";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  close(fd);
  if (!existed) unlink(path.c_str());
  return "";
}
