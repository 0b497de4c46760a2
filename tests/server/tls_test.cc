// Integration: TLS on the TCP port. Two daemons with certificates; a rank on the second daemon
// joins a group led by the first, so the forwarded call goes over TLS with the token. A client
// that connects over TCP needs the CA and the token. Skips when openssl is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <future>

#include "syncopate/client.h"
#include "tests/testing/subprocess.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TlsTest, PeersForwardOverTlsAndClientsNeedCaAndToken) {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "openssl not installed; cannot make a test certificate";
  }
  TempDir dir;
  const std::string cert = dir.Path("node.crt"), key = dir.Path("node.key");
  const std::string make_cert =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " + key + " -out " + cert +
      " > " + dir.Path("openssl.log") + " 2>&1";
  ASSERT_EQ(std::system(make_cert.c_str()), 0) << ReadFile(dir.Path("openssl.log"));
  const std::vector<std::string> tls = {"--tls_cert=" + cert, "--tls_key=" + key,
                                        "--tls_ca=" + cert};
  DaemonProcess leader(SYNCOPATED_PATH, dir, "tls0", tls);
  DaemonProcess other(SYNCOPATED_PATH, dir, "tls1", tls);
  ASSERT_TRUE(leader.ok()) << leader.Log();
  ASSERT_TRUE(other.ok()) << other.Log();

  auto join = [&](const std::string& socket, int rank) {
    auto client = Client::Connect(socket);
    JoinOptions options;
    options.job_id = "tls-job";
    options.world_size = 2;
    options.rank = rank;
    options.leader_address = leader.address();
    options.timeout = std::chrono::seconds(30);
    return client->Join(options);
  };
  auto remote = std::async(std::launch::async, [&] { return join(other.socket(), 1); });
  auto local = join(leader.socket(), 0);
  ASSERT_TRUE(local.ok()) << local.status().ToString() << "\n" << other.Log();
  auto forwarded = remote.get();
  ASSERT_TRUE(forwarded.ok()) << forwarded.status().ToString();
  EXPECT_EQ(local->group_id, forwarded->group_id);
  EXPECT_THAT(forwarded->members[1].daemon, HasSubstr("tls1@"));

  // A TCP client with the CA and the token is served; without TLS it is not.
  ClientOptions options;
  options.token = kTestToken;
  options.tls_ca = ReadFile(cert);
  auto tcp = Client::Connect(leader.address(), options);
  ASSERT_TRUE(tcp.ok());
  auto stats = tcp->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->groups_formed, 1u);
  options.tls_ca.clear();
  options.rpc_timeout = std::chrono::seconds(3);
  auto plain = Client::Connect(leader.address(), options);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Stats().status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace syncopate::testing
