// Prefixes each line a child writes with its rank. Only whole lines are
// written, each in one write(2), so lines of different ranks never interleave.
#pragma once
#include <cstddef>
#include <string>

namespace dcclrun {

// Writes all of [p, p+n) to fd, retrying on EINTR/EAGAIN. False on other errors
// (e.g. EPIPE when our own output was closed): the caller drops the output.
bool write_all(int fd, const char* p, size_t n);
// dccl-run's own message: "dccl-run: <msg>" as one line on stderr.
void say(const std::string& msg);

class LinePrefixer {
 public:
  // A partial line longer than max_line is written out as a line of its own.
  LinePrefixer(std::string prefix, int out_fd, size_t max_line = size_t{1} << 16)
      : prefix_(std::move(prefix)), fd_(out_fd), max_(max_line) {}
  void feed(const char* p, size_t n);  // writes every completed line
  void finish();                       // writes what is left, ending it with '\n'
  bool has_partial() const { return !pending_.empty(); }

 private:
  void emit(const char* p, size_t n);
  std::string prefix_;
  std::string pending_;
  int fd_;
  size_t max_;
};

}  // namespace dcclrun
