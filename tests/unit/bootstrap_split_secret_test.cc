// A split communicator's store secret never travels: the parent's store carries
// the child store's address and a salt, and each member derives the secret from
// the salt and the parent's secret (boot::child_secret). What a listener on the
// parent's store traffic reads does not open the child's store.
#include <gtest/gtest.h>

#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/unique_id.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"
#include "core/hmac.hpp"
#include "rank_threads.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;

[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new ShmApiEnv("20"));

TEST(SplitSecret, ChildSecretIsAnHmacOfTheSalt) {
  const auto parent = random_secret(), salt = random_secret();
  const auto child = child_secret(parent, salt);
  const std::string label = "dccl child communicator secret";
  const std::string flat = std::string("\0\0\0\x1e", 4) + label + std::string("\0\0\0\x10", 4) +
                           std::string(reinterpret_cast<const char*>(salt.data()), salt.size());
  const dccl::core::Digest d = dccl::core::hmac_sha256(parent.data(), parent.size(), flat.data(), flat.size());
  EXPECT_TRUE(std::equal(child.begin(), child.end(), d.begin()));
  auto other = parent;
  other[0] ^= 1;
  EXPECT_NE(child_secret(other, salt), child);
  EXPECT_NE(child, salt);
}

TEST(SplitSecret, ParentStoreDoesNotCarryTheChildSecret) {
  dcclUniqueId uid;
  ASSERT_EQ(dcclGetUniqueId(&uid), dcclSuccess) << last_error();
  std::vector<dcclComm_t> cs(2, nullptr), kids(2, nullptr);
  on_ranks(2, [&](int r) {
    ASSERT_EQ(dcclCommInitRank(&cs[static_cast<size_t>(r)], 2, uid, r), dcclSuccess) << last_error();
    ASSERT_EQ(dcclCommSplit(cs[static_cast<size_t>(r)], 0, r, &kids[static_cast<size_t>(r)], nullptr), dcclSuccess)
        << last_error();
    float x = static_cast<float>(r + 1), y = 0;
    ASSERT_EQ(dcclAllReduce(&x, &y, 1, dcclFloat32, dcclSum, kids[static_cast<size_t>(r)], nullptr), dcclSuccess)
        << last_error();
    EXPECT_EQ(y, 3.0f);
  });
  {
    const UniqueIdData parent = decode_id(uid);
    Bootstrap watch(parent, 0, 2, 5s, nullptr, "", Bootstrap::Role::Watch);
    const UniqueIdData published = decode_id(id_from_hex(watch.get("split0/color0")));
    Error e = catch_error([&] { Bootstrap b(published, 1, 2, 2s, nullptr, "", Bootstrap::Role::Watch); });
    EXPECT_EQ(e.code(), dcclRemoteError) << e.what();
    EXPECT_NE(std::string(e.what()).find("wrong job secret"), std::string::npos) << e.what();
    UniqueIdData derived = published;
    derived.secret = child_secret(parent.secret, published.secret);
    Bootstrap ok(derived, 1, 2, 5s, nullptr, "", Bootstrap::Role::Watch);  // the derived secret opens it
  }
  destroy_all(kids);
  destroy_all(cs);
}
