// Rank-prefixed output lines; see lines.hpp.
#include "dccl-run/lines.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dcclrun {

void say(const std::string& msg) {
  const std::string line = "dccl-run: " + msg + "\n";
  write_all(STDERR_FILENO, line.data(), line.size());
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EAGAIN) {
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, 100);
    } else if (w < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

void LinePrefixer::emit(const char* p, size_t n) {
  std::string line;
  line.reserve(prefix_.size() + n + 1);
  line.append(prefix_).append(p, n).push_back('\n');
  write_all(fd_, line.data(), line.size());
}

void LinePrefixer::feed(const char* p, size_t n) {
  while (n > 0) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', n));
    if (!nl) {
      pending_.append(p, n);
      while (pending_.size() >= max_) {  // a runaway line: cut it
        emit(pending_.data(), max_);
        pending_.erase(0, max_);
      }
      return;
    }
    const size_t len = static_cast<size_t>(nl - p);
    if (pending_.empty()) {
      emit(p, len);
    } else {
      pending_.append(p, len);
      emit(pending_.data(), pending_.size());
      pending_.clear();
    }
    p = nl + 1;
    n -= len + 1;
  }
}

void LinePrefixer::finish() {
  if (!pending_.empty()) emit(pending_.data(), pending_.size());
  pending_.clear();
}

}  // namespace dcclrun
