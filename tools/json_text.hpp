// A string as the inside of a JSON string literal: quotes and backslashes escaped,
// control characters dropped (the tools' --json outputs).
#pragma once
#include <string>

inline std::string json_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}
