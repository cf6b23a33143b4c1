// The unique id: rendezvous address + port + random 128-bit job secret,
// serialised into dcclUniqueId's 128 bytes.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "dccl/dccl.h"

namespace dccl::boot {

struct UniqueIdData {
  std::string host;                 // numeric IPv4/IPv6 address of the store
  uint16_t port = 0;
  std::array<uint8_t, 16> secret{};  // random job secret
  std::string origin;  // where the address came from ("MASTER_PORT + 1"); in messages, not in the id
};

void encode_id(const UniqueIdData& d, dcclUniqueId* out);
// Throws core::Error(dcclInvalidArgument) when the bytes are not a valid id.
UniqueIdData decode_id(const dcclUniqueId& id);
std::string id_to_hex(const dcclUniqueId& id);
dcclUniqueId id_from_hex(const std::string& hex);  // throws on bad text
std::array<uint8_t, 16> random_secret();            // from getrandom()
std::array<uint8_t, 16> secret_from_hex(const std::string& hex);  // 32 hex digits
// The secret of a communicator split from one with secret `parent`: the first
// 16 bytes of HMAC-SHA256(parent, label, salt). The salt may travel in the clear
// (through the parent's store); the result is known only to holders of `parent`.
std::array<uint8_t, 16> child_secret(const std::array<uint8_t, 16>& parent, const std::array<uint8_t, 16>& salt);

}  // namespace dccl::boot
