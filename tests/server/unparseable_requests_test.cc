// Integration (issue 17, item 6): requests whose bytes are not the method's message, against a
// real syncopated on its Unix socket and on TCP (with the token). Random bytes, a valid message
// with invalid UTF-8 in a string field, and deeply nested junk each get INVALID_ARGUMENT naming
// the method and the message type (gRPC's typed handler answered UNIMPLEMENTED with no message),
// the daemon keeps serving, and its log carries neither a raw library line ("[libprotobuf ERROR
// ...", gRPC's "E1204 12:00:00.000000 ...") nor the request's bytes. On TCP the token is still
// checked first: token-less junk is UNAUTHENTICATED, never parsed.
#include <gmock/gmock.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "syncopate/v1/service.grpc.pb.h"
#include "tests/server/raw_calls.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// In request bytes only: neither an answer nor the log may repeat it.
constexpr char kMarker[] = "MARKER_4e9b";

struct Method {
  std::string name;  // "Join"
  std::string path;  // "/syncopate.v1.Rendezvous/Join"
  std::string type;  // "syncopate.v1.JoinRequest"
  // A serialized request that is valid except for invalid UTF-8 in a string field (empty: the
  // message has no string field), and that field's full name.
  std::string bad_utf8;
  std::string bad_field;
};

std::string BadText() { return std::string("bad\xff\xfe\xc3(") + kMarker; }

std::vector<Method> Methods() {
  std::vector<Method> methods;
  {
    v1::JoinRequest r;
    r.set_world_size(1);
    methods.push_back({"Join", "/syncopate.v1.Rendezvous/Join", "syncopate.v1.JoinRequest",
                       "", "syncopate.v1.JoinRequest.job_id"});
    // Serialized by hand: protobuf refuses to write invalid UTF-8 without complaint, and the
    // point is the exact bytes. job_id (field 1, length-delimited) first, then the valid rest.
    const std::string text = BadText();
    methods.back().bad_utf8 = std::string("\x0a", 1) + static_cast<char>(text.size()) + text +
                              r.SerializeAsString();
  }
  {
    v1::AgreeRequest r;
    r.set_rank(0);
    r.mutable_proposal()->set_kernel_hash("k");
    const std::string text = BadText();
    methods.push_back({"Agree", "/syncopate.v1.Rendezvous/Agree", "syncopate.v1.AgreeRequest",
                       std::string("\x0a", 1) + static_cast<char>(text.size()) + text +
                           r.SerializeAsString(),
                       "syncopate.v1.AgreeRequest.group_id"});
  }
  {
    v1::ExchangeRequest r;
    r.set_group_id("g#1");
    r.set_blob("blob");
    const std::string text = BadText();
    // key: field 4.
    methods.push_back({"Exchange", "/syncopate.v1.Rendezvous/Exchange",
                       "syncopate.v1.ExchangeRequest",
                       r.SerializeAsString() + std::string("\x22", 1) +
                           static_cast<char>(text.size()) + text,
                       "syncopate.v1.ExchangeRequest.key"});
  }
  {
    v1::CompileRequest r;
    r.mutable_kernel()->set_source(kTestKernelSource);
    r.mutable_kernel()->set_spec(kTestKernelSpec);
    const std::string text = BadText();
    // arch: field 4.
    methods.push_back({"Compile", "/syncopate.v1.Compiler/Compile", "syncopate.v1.CompileRequest",
                       r.SerializeAsString() + std::string("\x22", 1) +
                           static_cast<char>(text.size()) + text,
                       "syncopate.v1.CompileRequest.arch"});
  }
  // StatsRequest has no fields: invalid UTF-8 can only be an unknown field, which parses.
  methods.push_back({"Stats", "/syncopate.v1.Daemon/Stats", "syncopate.v1.StatsRequest", "", ""});
  return methods;
}

// 4 KiB from a fixed seed, starting with the marker's bytes so an echo would show.
std::string RandomBytes() {
  std::mt19937 gen(17);
  std::string bytes = kMarker;
  while (bytes.size() < 4096) bytes.push_back(static_cast<char>(gen() & 0xff));
  return bytes;
}

// 200k bytes of start-group tags (field 1, wire type 3): as deep as protobuf would go.
std::string NestedGroups() { return std::string(200000, '\x0b'); }

// 200k bytes of groups opened inside each other, never closed, over fields 1..15, each level
// holding a length-delimited field with the marker: nesting with content at every level.
std::string NestedMixed() {
  std::string bytes;
  for (int level = 0; bytes.size() < 200000; ++level) {
    const int field = 1 + level % 15;
    bytes.push_back(static_cast<char>(field << 3 | 3));  // start group
    bytes.push_back(static_cast<char>((field % 15 + 1) << 3 | 2));  // length-delimited
    bytes.push_back(static_cast<char>(sizeof(kMarker) - 1));
    bytes.append(kMarker);
  }
  return bytes;
}

// Whether `bytes` parses as `type` here (the test's premise: it must not).
bool ParsesAs(const std::string& type, const std::string& bytes) {
  if (type == "syncopate.v1.JoinRequest") return v1::JoinRequest().ParseFromString(bytes);
  if (type == "syncopate.v1.AgreeRequest") return v1::AgreeRequest().ParseFromString(bytes);
  if (type == "syncopate.v1.ExchangeRequest") return v1::ExchangeRequest().ParseFromString(bytes);
  if (type == "syncopate.v1.CompileRequest") return v1::CompileRequest().ParseFromString(bytes);
  return v1::StatsRequest().ParseFromString(bytes);
}

class UnparseableRequests : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The premise checks parse junk in this process: keep its protobuf quiet.
    google::protobuf::SetLogHandler(nullptr);
  }

  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(
        SYNCOPATED_PATH, dir_, "unparseable",
        std::vector<std::string>{"--cache_dir=" + dir_.Path("cache")});
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    unix_ = grpc::CreateChannel("unix:" + daemon_->socket(), grpc::InsecureChannelCredentials());
    tcp_ = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    ExpectValidCallsServed(unix_, "");
    ExpectValidCallsServed(tcp_, kTestToken);
    ASSERT_EQ(daemon_->process().Wait(std::chrono::milliseconds(0)), std::nullopt);
    ExpectCleanLog();
    if (HasFailure()) std::printf("--- daemon log:\n%s\n", daemon_->Log().c_str());
  }

  // `bytes` to `method` on both transports: INVALID_ARGUMENT naming the method and the type,
  // and `more` in the message when given.
  void ExpectInvalid(const Method& method, const std::string& bytes, const std::string& kind,
                     const std::string& more = "") {
    ASSERT_FALSE(ParsesAs(method.type, bytes)) << kind << " parses as " << method.type;
    for (const auto& [transport, channel, token] :
         {std::tuple{"unix", unix_, std::string()}, std::tuple{"tcp", tcp_, std::string(kTestToken)}}) {
      SCOPED_TRACE(std::string(transport) + " " + method.name + " " + kind);
      auto [status, reply] = RawUnary(channel, method.path, bytes, token);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_THAT(status.error_message(),
                  HasSubstr(method.name + ": the request is not a valid " + method.type));
      if (!more.empty()) {
        EXPECT_THAT(status.error_message(), HasSubstr(more));
      }
      EXPECT_THAT(status.error_message(), Not(HasSubstr(kMarker)));
      EXPECT_TRUE(reply.empty());
    }
  }

  // A valid Join (one rank), Exchange in its group and Stats, through the typed stubs.
  void ExpectValidCallsServed(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& token) {
    auto context = [&](grpc::ClientContext& ctx) {
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      if (!token.empty()) ctx.AddMetadata("x-syncopate-token", token);
    };
    auto rendezvous = v1::Rendezvous::NewStub(channel);
    v1::JoinRequest join;
    join.set_job_id("after-" + std::to_string(counter_++));
    join.set_world_size(1);
    join.set_timeout_ms(20000);
    v1::JoinResponse group;
    {
      grpc::ClientContext ctx;
      context(ctx);
      const grpc::Status s = rendezvous->Join(&ctx, join, &group);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(group.members_size(), 1);
    }
    {
      v1::ExchangeRequest exchange;
      exchange.set_group_id(group.group_id());
      exchange.set_key("k");
      exchange.set_blob("blob");
      exchange.set_timeout_ms(20000);
      v1::ExchangeResponse blobs;
      grpc::ClientContext ctx;
      context(ctx);
      const grpc::Status s = rendezvous->Exchange(&ctx, exchange, &blobs);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_EQ(blobs.blobs_size(), 1);
      EXPECT_EQ(blobs.blobs(0), "blob");
    }
    v1::StatsResponse stats;
    grpc::ClientContext ctx;
    context(ctx);
    const grpc::Status s = v1::Daemon::NewStub(channel)->Stats(&ctx, v1::StatsRequest(), &stats);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(stats.daemon(), "unparseable@127.0.0.1:" + std::to_string(daemon_->port()));
  }

  void ExpectCleanLog() { ExpectCleanLog(daemon_->Log()); }

  static void ExpectCleanLog(const std::string& log) {
    // gRPC's own format: severity letter, MMDD, time with microseconds.
    const std::regex grpc_line(R"(^[DIWE]\d{4} \d\d:\d\d:\d\d\.\d{6})");
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
      EXPECT_FALSE(line.rfind("[libprotobuf", 0) == 0) << line;
      EXPECT_FALSE(std::regex_search(line, grpc_line)) << line;
    }
    EXPECT_THAT(log, Not(HasSubstr(kMarker)));
    EXPECT_THAT(log, Not(HasSubstr("\xff\xfe")));
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::shared_ptr<grpc::Channel> unix_;
  std::shared_ptr<grpc::Channel> tcp_;
  int counter_ = 0;
};

TEST_F(UnparseableRequests, RandomBytesAreInvalidArgument) {
  for (const Method& method : Methods()) ExpectInvalid(method, RandomBytes(), "random bytes");
}

TEST_F(UnparseableRequests, InvalidUtf8NamesTheField) {
  for (const Method& method : Methods()) {
    if (method.bad_utf8.empty()) continue;
    ExpectInvalid(method, method.bad_utf8, "invalid UTF-8",
                  "string field " + method.bad_field + " is not valid UTF-8");
  }
  const std::string log = daemon_->Log();
  EXPECT_THAT(log, HasSubstr("event=rejected rpc=Join"));
  EXPECT_THAT(log, HasSubstr("code=INVALID_ARGUMENT"));
}

TEST_F(UnparseableRequests, DeeplyNestedJunkIsInvalidArgument) {
  for (const Method& method : Methods()) {
    ExpectInvalid(method, NestedGroups(), "nested groups");
    ExpectInvalid(method, NestedMixed(), "nested groups with fields");
  }
}

TEST_F(UnparseableRequests, TcpChecksTheTokenBeforeParsing) {
  for (const Method& method : Methods()) {
    SCOPED_TRACE(method.name);
    auto [missing, reply] = RawUnary(tcp_, method.path, RandomBytes());
    EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED) << missing.error_message();
    EXPECT_THAT(missing.error_message(), HasSubstr("x-syncopate-token: missing"));
    auto [wrong, wrong_reply] = RawUnary(tcp_, method.path, NestedGroups(), "not-the-token");
    EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  }
  EXPECT_THAT(daemon_->Log(), Not(HasSubstr("the request is not a valid")));
}

// The raw path end to end with a real answer: an empty Stats request, and a Compile whose
// response (the binary) is serialized by the daemon's reactor.
TEST_F(UnparseableRequests, ValidBytesStillGetTheirAnswer) {
  auto [stats, stats_reply] = RawUnary(unix_, "/syncopate.v1.Daemon/Stats", "");
  ASSERT_TRUE(stats.ok()) << stats.error_message();
  v1::StatsResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(stats_reply));
  EXPECT_FALSE(parsed.daemon().empty());

  v1::CompileRequest compile;
  compile.mutable_kernel()->set_source(kTestKernelSource);
  compile.mutable_kernel()->set_spec(kTestKernelSpec);
  compile.set_arch("sm_90");
  compile.set_timeout_ms(60000);
  auto [status, reply] =
      RawUnary(unix_, "/syncopate.v1.Compiler/Compile", compile.SerializeAsString());
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::CompileResponse response;
  ASSERT_TRUE(response.ParseFromString(reply));
  EXPECT_FALSE(response.kernel().binary().empty());
  EXPECT_FALSE(response.cache_key().empty());
}

// gRPC core's own lines (here its debug lines, asked for with GRPC_VERBOSITY) come through the
// daemon's logger, in its format.
TEST_F(UnparseableRequests, GrpcCoreLinesComeThroughTheDaemonsLog) {
  setenv("GRPC_VERBOSITY", "debug", 1);
  DaemonProcess verbose(SYNCOPATED_PATH, dir_, "verbose");
  unsetenv("GRPC_VERBOSITY");
  ASSERT_TRUE(verbose.ok()) << verbose.Log();
  auto [status, reply] =
      RawUnary(grpc::CreateChannel("unix:" + verbose.socket(), grpc::InsecureChannelCredentials()),
               "/syncopate.v1.Rendezvous/Join", RandomBytes());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  const std::string log = verbose.Log();
  EXPECT_THAT(log, HasSubstr("level=debug event=library_log lib=grpc at="));
  ExpectCleanLog(log);
}

}  // namespace
}  // namespace syncopate::testing
