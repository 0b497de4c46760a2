// Config precedence (flags > env > file), file syntax, and errors naming the key and source.
#include "server/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/subprocess.h"

namespace syncopate::server {
namespace {

using ::testing::HasSubstr;

TEST(ConfigTest, FlagsOverrideEnvOverrideFile) {
  testing::TempDir dir;
  const std::string file = dir.Path("syncopated.conf");
  std::ofstream(file) << "# comment\nmax_wait_ms = 1000\ndefault_wait_ms: 500\n"
                         "node_name = \"from-file\"\ntoken = file-token\ncompile_threads = 3\n";
  auto config = LoadConfig({"--config", file, "--max-wait-ms=3000"},
                           {{"SYNCOPATE_MAX_WAIT_MS", "2000"}, {"SYNCOPATE_NODE_NAME", "from-env"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_wait_ms, 3000);        // flag
  EXPECT_EQ(config->node_name, "from-env");    // env over file
  EXPECT_EQ(config->default_wait_ms, 500);     // file
  EXPECT_EQ(config->compile_threads, 3);       // file
  EXPECT_EQ(config->token, "file-token");
  EXPECT_EQ(config->config_file, file);
}

TEST(ConfigTest, LimitsAndGroupTtlAreKeys) {
  auto config = LoadConfig({"--token=t", "--group_idle_ttl_ms=250", "--tcp_max_message_bytes=65536",
                            "--max_inflight_bytes=33554432"},
                           {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->group_idle_ttl_ms, 250);
  EXPECT_EQ(config->tcp_max_message_bytes, 65536);
  EXPECT_EQ(config->max_inflight_bytes, 33554432);
  auto defaults = LoadConfig({"--token=t"}, {});
  ASSERT_TRUE(defaults.ok());
  // TCP gets a smaller limit than the Unix socket by default.
  EXPECT_LT(defaults->tcp_max_message_bytes, defaults->max_message_bytes);
  EXPECT_THAT(LoadConfig({"--token=t", "--group_idle_ttl_ms=0"}, {}).status().message(),
              HasSubstr("group_idle_ttl_ms"));
}

TEST(ConfigTest, ConfigFileFromEnvironment) {
  testing::TempDir dir;
  const std::string file = dir.Path("c.conf");
  std::ofstream(file) << "listen=\ntoken_file=" << dir.Path("token") << "\n";
  std::ofstream(dir.Path("token")) << "  secret\n";
  auto config = LoadConfig({}, {{"SYNCOPATE_CONFIG", file}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "");
  EXPECT_EQ(config->token, "secret");
}

TEST(ConfigTest, ErrorsNameKeyAndSource) {
  auto bad_flag = LoadConfig({"--max_wait_ms=soon", "--token=t"}, {});
  EXPECT_THAT(bad_flag.status().message(), HasSubstr("flag --max_wait_ms: max_wait_ms: 'soon'"));
  auto unknown = LoadConfig({"--token=t"}, {{"SYNCOPATE_BOGUS", "1"}});
  EXPECT_TRUE(unknown.ok());  // unknown variables are other programs' business
  auto unknown_flag = LoadConfig({"--bogus=1"}, {});
  EXPECT_THAT(unknown_flag.status().message(), HasSubstr("unknown key 'bogus'"));
  testing::TempDir dir;
  std::ofstream(dir.Path("c")) << "token=t\n\nnonsense line\n";
  auto bad_file = LoadConfig({"--config=" + dir.Path("c")}, {});
  EXPECT_THAT(bad_file.status().message(), HasSubstr(dir.Path("c") + ":3: expected"));
  EXPECT_THAT(LoadConfig({}, {}).status().message(), HasSubstr("token: TCP listening"));
  EXPECT_TRUE(LoadConfig({"--insecure_no_token"}, {}).ok());
  EXPECT_THAT(LoadConfig({"--token=t", "--tls_cert=a"}, {}).status().message(),
              HasSubstr("tls_cert and tls_key"));
}

}  // namespace
}  // namespace syncopate::server
