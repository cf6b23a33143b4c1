#include "core/log.hpp"
#include "core/host.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/config.hpp"
#include "core/error.hpp"

namespace dccl::core {

namespace {
thread_local int t_rank = -1;

std::atomic<int> g_level{-1};

bool parse_level(std::string v, LogLevel* out) {
  for (auto& c : v) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (v == "TRACE") *out = LogLevel::Trace;
  else if (v == "INFO") *out = LogLevel::Info;
  else if (v == "NONE" || v == "OFF") *out = LogLevel::None;
  else if (v == "WARN") *out = LogLevel::Warn;
  else return false;
  return true;
}

LogLevel parse_level(const std::string& v) {
  LogLevel l = LogLevel::Warn;
  parse_level(v, &l);
  return l;
}
}  // namespace

bool valid_log_level(const std::string& text) {
  LogLevel l;
  return parse_level(text, &l);
}

bool LogLimiter::allow(uint64_t* suppressed) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  if (now < next_) {
    ++held_;
    return false;
  }
  next_ = now + every_;
  *suppressed = held_;
  held_ = 0;
  return true;
}

uint64_t LogLimiter::take_suppressed() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  if (held_ == 0 || now < next_) return 0;
  const uint64_t n = held_;
  held_ = 0;
  next_ = now + every_;
  return n;
}

LogLevel log_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = static_cast<int>(parse_level(config().debug));
    g_level.store(l, std::memory_order_relaxed);
  }
  return static_cast<LogLevel>(l);
}

void log_configure(const std::string& level) { g_level.store(static_cast<int>(parse_level(level))); }

void log_set_rank(int rank) { t_rank = rank; }
int log_rank() { return t_rank; }

void log_msg(LogLevel level, const char* fmt, ...) {
  if (level > log_level()) return;
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
  const std::string host = host_name();
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  char line[2300];
  if (t_rank >= 0)
    snprintf(line, sizeof(line), "%s:%d [rank %d] DCCL %s %s\n", host.c_str(), getpid(), t_rank,
             names[static_cast<int>(level)], body);
  else
    snprintf(line, sizeof(line), "%s:%d DCCL %s %s\n", host.c_str(), getpid(), names[static_cast<int>(level)],
             body);
  fputs(line, stderr);
}

std::string describe(int rank, const std::string& op, const std::string& cause) {
  if (rank < 0) return op + ": " + cause;  // before the rank is known
  return "rank " + std::to_string(rank) + ": " + op + ": " + cause;
}

}  // namespace dccl::core
