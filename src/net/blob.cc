#include <cstdlib>
#include "net/blob.hpp"

#include <unistd.h>

#include <cstdint>
#include <fstream>

#include "core/error.hpp"

namespace dccl::net {

namespace {
constexpr char kMagic[4] = {'D', 'N', 'B', '2'};

void put_str(std::string& out, const std::string& s) {
  if (s.size() > 0xffff) core::raise(dcclInternalError, "blob field too long");
  out.push_back(static_cast<char>(s.size() & 0xff));
  out.push_back(static_cast<char>(s.size() >> 8));
  out += s;
}

struct Reader {
  const std::string& in;
  const std::string& whose;
  size_t pos = 0;
  [[noreturn]] void bad() const {
    core::raise(dcclInvalidArgument, "malformed transport blob from " + whose + " (" +
                                         std::to_string(in.size()) + " bytes)");
  }
  size_t u8() {
    if (pos >= in.size()) bad();
    return static_cast<unsigned char>(in[pos++]);
  }
  std::string str() {
    size_t n = u8();
    n |= u8() << 8;
    if (in.size() - pos < n) bad();
    std::string s = in.substr(pos, n);
    pos += n;
    return s;
  }
};
}  // namespace

std::string Blob::encode() const {
  std::string out(kMagic, sizeof(kMagic));
  put_str(out, host);
  put_str(out, boot_id);
  put_str(out, std::to_string(pid));
  if (endpoints.size() > 255) core::raise(dcclInternalError, "too many endpoints in blob");
  out.push_back(static_cast<char>(endpoints.size()));
  for (const auto& [prov, addr] : endpoints) {
    put_str(out, prov);
    put_str(out, addr);
  }
  return out;
}

Blob Blob::decode(const std::string& bytes, const std::string& whose) {
  Reader r{bytes, whose};
  if (bytes.size() < sizeof(kMagic) || bytes.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)))
    r.bad();
  r.pos = sizeof(kMagic);
  Blob b;
  b.host = r.str();
  b.boot_id = r.str();
  {
    std::string p = r.str();
    char* end = nullptr;
    long v = strtol(p.c_str(), &end, 10);
    if (p.empty() || *end || v < 0) r.bad();
    b.pid = static_cast<int>(v);
  }
  size_t n = r.u8();
  for (size_t i = 0; i < n; ++i) {
    std::string prov = r.str();
    std::string addr = r.str();
    b.endpoints.emplace_back(std::move(prov), std::move(addr));
  }
  if (r.pos != bytes.size()) r.bad();
  return b;
}

const std::string* Blob::address_for(const std::string& provider) const {
  for (const auto& [prov, addr] : endpoints)
    if (prov == provider) return &addr;
  return nullptr;
}

std::string local_hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string local_boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

}  // namespace dccl::net
