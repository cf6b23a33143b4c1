// Logging: DCCL_DEBUG=WARN|INFO|TRACE (default WARN). Lines carry host, pid and rank.
#pragma once
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <mutex>
#include <string>

namespace dccl::core {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel log_level();
// True when `text` names a level (NONE, OFF, WARN, INFO, TRACE; any case).
bool valid_log_level(const std::string& text);
// Sets the level from DCCL_DEBUG text (each communicator applies its own settings;
// load_config has refused unknown text; it counts as WARN here).
void log_configure(const std::string& level);
void log_set_rank(int rank);  // per thread: which rank this thread speaks for
int log_rank();               // this thread's (-1: none)
void log_msg(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// At most one line per interval for one kind of message that a peer can make us
// repeat (a flood of connections must not become a flood of log lines). Lines
// in between are counted, and the count is reported with the next line let
// through, or by take_suppressed() once the interval has passed. Thread-safe.
class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::milliseconds every = std::chrono::seconds(1)) : every_(every) {}
  // True when a line may be written now; *suppressed is then the number of lines
  // held back since the last one written.
  bool allow(uint64_t* suppressed);
  // Lines held back, once the interval since the last line written has passed
  // (0 otherwise); they count as reported.
  uint64_t take_suppressed();

 private:
  std::mutex mu_;
  std::chrono::milliseconds every_;
  std::chrono::steady_clock::time_point next_{};
  uint64_t held_ = 0;
};
}  // namespace dccl::core

#define DCCL_WARN(...) ::dccl::core::log_msg(::dccl::core::LogLevel::Warn, __VA_ARGS__)
#define DCCL_INFO(...)                                                                   \
  do {                                                                                  \
    if (::dccl::core::log_level() >= ::dccl::core::LogLevel::Info)                      \
      ::dccl::core::log_msg(::dccl::core::LogLevel::Info, __VA_ARGS__);                 \
  } while (0)
// A WARN through a LogLimiter; the suppressed count is appended to the line.
#define DCCL_WARN_LIMITED(limiter, fmt, ...)                                                          \
  do {                                                                                              \
    uint64_t dccl_held_ = 0;                                                                        \
    if ((limiter).allow(&dccl_held_)) {                                                             \
      if (dccl_held_ == 0)                                                                          \
        ::dccl::core::log_msg(::dccl::core::LogLevel::Warn, fmt, __VA_ARGS__);                      \
      else                                                                                          \
        ::dccl::core::log_msg(::dccl::core::LogLevel::Warn, fmt " (and %llu similar lines suppressed)", \
                              __VA_ARGS__, static_cast<unsigned long long>(dccl_held_));            \
    }                                                                                               \
  } while (0)
#define DCCL_TRACE(...)                                                                  \
  do {                                                                                  \
    if (::dccl::core::log_level() >= ::dccl::core::LogLevel::Trace)                     \
      ::dccl::core::log_msg(::dccl::core::LogLevel::Trace, __VA_ARGS__);                \
  } while (0)
