#include <cstdlib>
#include "net/blob.hpp"
#include "core/host.hpp"

#include <unistd.h>

#include <cstdint>
#include <fstream>

#include "core/error.hpp"

namespace dccl::net {

namespace {
constexpr char kMagic[4] = {'D', 'N', 'B', '4'};
constexpr char kMagicV3[4] = {'D', 'N', 'B', '3'};  // before flows: still read
constexpr char kMagicV2[4] = {'D', 'N', 'B', '2'};  // before rails: still read
constexpr size_t kMaxFlowAddrs = 255;  // further flows of one endpoint (u8)
constexpr size_t kMaxEndpoints = 40;  // shm + up to 16 rails, with room (the blob stays < kMaxBlobBytes)

void put_str(std::string& out, const std::string& s) {
  if (s.size() > 0xffff) core::raise(dcclInternalError, "blob field too long");
  out.push_back(static_cast<char>(s.size() & 0xff));
  out.push_back(static_cast<char>(s.size() >> 8));
  out += s;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
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
  uint64_t le(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
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
  if (endpoints.size() > kMaxEndpoints)
    core::raise(dcclInternalError, "transport blob: " + std::to_string(endpoints.size()) + " endpoints (at most " +
                                       std::to_string(kMaxEndpoints) + ")");
  if (!rails.empty() && rails.size() != endpoints.size())
    core::raise(dcclInternalError, "transport blob: rail names do not match the endpoints");
  out.push_back(static_cast<char>(endpoints.size()));
  for (const auto& [prov, addr] : endpoints) {
    put_str(out, prov);
    put_str(out, addr);
  }
  put_le(out, static_cast<uint32_t>(local_rank < 0 ? 0 : local_rank), 4);
  put_le(out, static_cast<uint32_t>(local_size < 0 ? 0 : local_size), 4);
  put_le(out, stripe_bytes, 8);
  for (size_t i = 0; i < endpoints.size(); ++i) put_str(out, rail_name(i));
  put_str(out, sock);
  if (!flow_addrs.empty() && flow_addrs.size() != endpoints.size())
    core::raise(dcclInternalError, "transport blob: flow addresses do not match the endpoints");
  out.push_back(static_cast<char>(flows < 0 ? 0 : flows > 255 ? 255 : flows));
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const size_t k = i < flow_addrs.size() ? flow_addrs[i].size() : 0;
    if (k > kMaxFlowAddrs) core::raise(dcclInternalError, "transport blob: too many flows on one endpoint");
    out.push_back(static_cast<char>(k));
    for (size_t f = 0; f < k; ++f) put_str(out, flow_addrs[i][f]);
  }
  if (out.size() > kMaxBlobBytes)
    core::raise(dcclInternalError, "transport blob of " + std::to_string(out.size()) + " bytes exceeds " +
                                       std::to_string(kMaxBlobBytes));
  return out;
}

Blob Blob::decode(const std::string& bytes, const std::string& whose) {
  Reader r{bytes, whose};
  if (bytes.size() > kMaxBlobBytes || bytes.size() < sizeof(kMagic)) r.bad();
  const bool v4 = bytes.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)) == 0;
  const bool v3 = v4 || bytes.compare(0, sizeof(kMagicV3), kMagicV3, sizeof(kMagicV3)) == 0;
  if (!v3 && bytes.compare(0, sizeof(kMagicV2), kMagicV2, sizeof(kMagicV2)) != 0) r.bad();
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
  if (n > kMaxEndpoints) r.bad();
  for (size_t i = 0; i < n; ++i) {
    std::string prov = r.str();
    std::string addr = r.str();
    b.endpoints.emplace_back(std::move(prov), std::move(addr));
  }
  if (v3) {
    const uint64_t lr = r.le(4), ls = r.le(4);
    if (lr > 0x7fffffff || ls > 0x7fffffff) r.bad();
    b.local_rank = static_cast<int>(lr);
    b.local_size = static_cast<int>(ls);
    b.stripe_bytes = r.le(8);
    for (size_t i = 0; i < n; ++i) b.rails.push_back(r.str());
    if (v4 || r.pos < bytes.size()) b.sock = r.str();
  }
  if (v4) {
    b.flows = static_cast<int>(r.u8());
    b.flow_addrs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t k = r.u8();
      for (size_t f = 0; f < k; ++f) b.flow_addrs[i].push_back(r.str());
    }
  }
  if (r.pos != bytes.size()) r.bad();
  return b;
}

const std::string* Blob::address_for(const std::string& provider) const {
  for (const auto& [prov, addr] : endpoints)
    if (prov == provider) return &addr;
  return nullptr;
}

std::vector<size_t> Blob::rails_of(const std::string& provider) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < endpoints.size(); ++i)
    if (endpoints[i].first == provider) out.push_back(i);
  return out;
}

std::string local_hostname() { return core::host_name(); }

std::string local_boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

}  // namespace dccl::net
