// Logging: DCCL_DEBUG=WARN|INFO|TRACE (default WARN). Lines carry host, pid and rank.
#pragma once
#include <cstdarg>
#include <string>

namespace dccl::core {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel log_level();
// Sets the level from DCCL_DEBUG text (each communicator applies its own settings).
void log_configure(const std::string& level);
void log_set_rank(int rank);  // per thread: which rank this thread speaks for
void log_msg(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace dccl::core

#define DCCL_WARN(...) ::dccl::core::log_msg(::dccl::core::LogLevel::Warn, __VA_ARGS__)
#define DCCL_INFO(...)                                                                   \
  do {                                                                                  \
    if (::dccl::core::log_level() >= ::dccl::core::LogLevel::Info)                      \
      ::dccl::core::log_msg(::dccl::core::LogLevel::Info, __VA_ARGS__);                 \
  } while (0)
#define DCCL_TRACE(...)                                                                  \
  do {                                                                                  \
    if (::dccl::core::log_level() >= ::dccl::core::LogLevel::Trace)                     \
      ::dccl::core::log_msg(::dccl::core::LogLevel::Trace, __VA_ARGS__);                \
  } while (0)
