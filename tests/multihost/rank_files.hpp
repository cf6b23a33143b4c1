// What the cross-host fault programs (host_fault.cc, soak_rank.cc) leave for their
// drivers: wall-clock milliseconds, and files written whole.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

inline long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Readers see the whole text or nothing (written aside, then renamed into place).
inline void put(const std::string& path, const std::string& text) {
  FILE* f = fopen((path + ".tmp").c_str(), "w");
  if (!f) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename((path + ".tmp").c_str(), path.c_str());
}
