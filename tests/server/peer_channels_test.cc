// PeerChannels: one cached channel per leader address, bounded by idle time and count, and never
// dropping a channel a call still holds. Channels connect lazily, so no peer daemon is needed.
#include "server/peer_channels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace syncopate::server {
namespace {

std::string Address(int i) { return "127.0.0.1:" + std::to_string(40000 + i); }

TEST(PeerChannelsTest, OneChannelPerAddressIsReused) {
  PeerChannels peers(DaemonConfig{});
  auto first = peers.Rendezvous(Address(0));
  auto again = peers.Rendezvous(Address(0));
  EXPECT_EQ(first.get(), again.get());
  EXPECT_NE(peers.Rendezvous(Address(1)).get(), first.get());
  EXPECT_EQ(peers.cached(), 2u);
}

TEST(PeerChannelsTest, ManyLeadersKeepAtMostTheBoundAndTheMostRecent) {
  PeerChannels peers(DaemonConfig{}, {.idle = absl::Hours(1), .max_cached = 4});
  for (int i = 0; i < 100; ++i) peers.Rendezvous(Address(i));
  EXPECT_EQ(peers.cached(), 4u);
  // The most recent one is still the cached one: asking again creates nothing new.
  auto recent = peers.Rendezvous(Address(99));
  EXPECT_EQ(peers.Rendezvous(Address(99)).get(), recent.get());
  EXPECT_EQ(peers.cached(), 4u);
}

TEST(PeerChannelsTest, AChannelACallHoldsIsNeverDropped) {
  PeerChannels peers(DaemonConfig{}, {.idle = absl::ZeroDuration(), .max_cached = 2});
  auto held = peers.Rendezvous(Address(0));
  for (int i = 1; i < 10; ++i) peers.Rendezvous(Address(i));
  // Idle at once and over the count, but held: still the one cached for its address.
  EXPECT_EQ(peers.Rendezvous(Address(0)).get(), held.get());
}

// The same address asked for twice with nothing holding its channel and an idle bound of zero:
// the second ask must get a live channel, not one its own eviction just freed.
TEST(PeerChannelsTest, AskingAgainForAnIdleChannelReturnsALiveOne) {
  PeerChannels peers(DaemonConfig{}, {.idle = absl::ZeroDuration(), .max_cached = 64});
  peers.Rendezvous(Address(0));
  std::shared_ptr<v1::Rendezvous::Stub> again = peers.Rendezvous(Address(0));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(peers.Rendezvous(Address(0)).get(), again.get());  // held now: kept
  EXPECT_EQ(peers.cached(), 1u);
}

TEST(PeerChannelsTest, IdleChannelsNoCallHoldsAreDropped) {
  PeerChannels peers(DaemonConfig{}, {.idle = absl::ZeroDuration(), .max_cached = 64});
  for (int i = 0; i < 10; ++i) peers.Rendezvous(Address(i));
  // Each request dropped the ones before it (idle for zero time, unheld).
  EXPECT_EQ(peers.cached(), 1u);
  std::vector<std::shared_ptr<v1::Rendezvous::Stub>> held;
  held.reserve(5);
  for (int i = 0; i < 5; ++i) held.push_back(peers.Rendezvous(Address(i)));
  EXPECT_EQ(peers.cached(), 5u);  // all held
  held.clear();
  peers.Rendezvous(Address(7));
  EXPECT_EQ(peers.cached(), 1u);
}

}  // namespace
}  // namespace syncopate::server
