#include "core/base/flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate {
namespace {

using ::testing::HasSubstr;

// Every kind of flag, with defaults, as a program declares them.
struct Values {
  bool fence = false;
  bool check = true;
  int reps = 20;
  int64_t total = 256;
  size_t bytes = 4096;
  double seconds = 5;
  std::string hub = "localhost:1";
  std::string gemm = "auto";
  std::vector<int> tp = {1, 2};
  std::vector<int64_t> tokens = {8192};
  std::vector<std::string> tls = {"tcp", "shm"};
  std::vector<std::string> backends = {"ce"};
};

struct Parsed {
  Values v;
  FlagSet flags{"prog", "A test program.\nSecond line."};
  Parsed() {
    flags.Bool("fence", &v.fence, "order with a fence");
    flags.Bool("check", &v.check, "check results");
    flags.Int("reps", &v.reps, "repetitions", 1, 1000);
    flags.Int("total", &v.total, "total MiB");
    flags.Int("bytes", &v.bytes, "bytes");
    flags.Double("seconds", &v.seconds, "how long", 0.5, 60);
    flags.String("hub", &v.hub, "hub address").Metavar("HOST:PORT");
    flags.Choice("gemm", &v.gemm, {"auto", "mma"}, "GEMM kernel");
    flags.IntList("tp", &v.tp, "world sizes", 1, 64);
    flags.IntList("tokens", &v.tokens, "M values");
    flags.StringList("tls", &v.tls, "UCX transports");
    flags.StringList("backends", &v.backends, "backends", {"ce", "sm"});
  }
  absl::Status Parse(std::vector<std::string> args) { return flags.Parse(args); }
};

TEST(FlagSetTest, DefaultsKeptWhenNotGiven) {
  Parsed p;
  ASSERT_TRUE(p.Parse({}).ok());
  EXPECT_FALSE(p.v.fence);
  EXPECT_TRUE(p.v.check);
  EXPECT_EQ(p.v.reps, 20);
  EXPECT_EQ(p.v.total, 256);
  EXPECT_EQ(p.v.bytes, 4096u);
  EXPECT_EQ(p.v.seconds, 5);
  EXPECT_EQ(p.v.hub, "localhost:1");
  EXPECT_EQ(p.v.gemm, "auto");
  EXPECT_EQ(p.v.tp, (std::vector<int>{1, 2}));
  EXPECT_EQ(p.v.tokens, (std::vector<int64_t>{8192}));
  EXPECT_EQ(p.v.tls, (std::vector<std::string>{"tcp", "shm"}));
  EXPECT_FALSE(p.flags.WasSet("reps"));
  EXPECT_FALSE(p.flags.help());
}

TEST(FlagSetTest, SpaceAndEqualsSyntaxes) {
  Parsed a, b;
  ASSERT_TRUE(a.Parse({"--reps", "7", "--hub", "h:9", "--tp", "4,8"}).ok());
  ASSERT_TRUE(b.Parse({"--reps=7", "--hub=h:9", "--tp=4,8"}).ok());
  for (const Values* v : {&a.v, &b.v}) {
    EXPECT_EQ(v->reps, 7);
    EXPECT_EQ(v->hub, "h:9");
    EXPECT_EQ(v->tp, (std::vector<int>{4, 8}));
  }
  EXPECT_TRUE(a.flags.WasSet("reps"));
  EXPECT_FALSE(a.flags.WasSet("total"));
  // The space syntax takes the next argument as it is, even one that starts with "-".
  Parsed c;
  ASSERT_TRUE(c.Parse({"--total", "-3", "--hub", "--x"}).ok());
  EXPECT_EQ(c.v.total, -3);
  EXPECT_EQ(c.v.hub, "--x");
  // "=" with an empty value is a value.
  Parsed d;
  ASSERT_TRUE(d.Parse({"--hub="}).ok());
  EXPECT_EQ(d.v.hub, "");
}

TEST(FlagSetTest, EachType) {
  Parsed p;
  ASSERT_TRUE(p.Parse({"--fence", "--check=false", "--reps=1000", "--total", "-5", "--bytes=0",
                       "--seconds=2.5", "--hub=a", "--gemm", "mma", "--tp=1,,64,", "--tokens=3",
                       "--tls=shm", "--backends=sm,ce"})
                  .ok());
  EXPECT_TRUE(p.v.fence);
  EXPECT_FALSE(p.v.check);
  EXPECT_EQ(p.v.reps, 1000);
  EXPECT_EQ(p.v.total, -5);
  EXPECT_EQ(p.v.bytes, 0u);
  EXPECT_DOUBLE_EQ(p.v.seconds, 2.5);
  EXPECT_EQ(p.v.hub, "a");
  EXPECT_EQ(p.v.gemm, "mma");
  EXPECT_EQ(p.v.tp, (std::vector<int>{1, 64}));  // empty entries skipped
  EXPECT_EQ(p.v.tokens, (std::vector<int64_t>{3}));
  EXPECT_EQ(p.v.tls, (std::vector<std::string>{"shm"}));  // replaced, not appended to
  EXPECT_EQ(p.v.backends, (std::vector<std::string>{"sm", "ce"}));
}

TEST(FlagSetTest, BoolFlagsWithoutAndWithValue) {
  Parsed p;
  ASSERT_TRUE(p.Parse({"--fence", "--check", "--reps", "3"}).ok());
  EXPECT_TRUE(p.v.fence);
  EXPECT_TRUE(p.v.check);
  EXPECT_EQ(p.v.reps, 3);  // a bool flag does not take the next argument
  Parsed q;
  ASSERT_TRUE(q.Parse({"--fence=1", "--check=0"}).ok());
  EXPECT_TRUE(q.v.fence);
  EXPECT_FALSE(q.v.check);
  Parsed r;
  absl::Status s = r.Parse({"--fence=yes"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--fence=yes"));
}

TEST(FlagSetTest, LastValueWins) {
  Parsed p;
  ASSERT_TRUE(p.Parse({"--reps=3", "--reps", "4"}).ok());
  EXPECT_EQ(p.v.reps, 4);
}

TEST(FlagSetTest, IntRanges) {
  for (const char* bad : {"0", "1001", "x", "3.5", "", "99999999999999999999"}) {
    Parsed p;
    absl::Status s = p.Parse({"--reps", bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(std::string("--reps=") + bad)) << bad;
    EXPECT_THAT(s.message(), HasSubstr("[1, 1000]")) << bad;
    EXPECT_EQ(p.v.reps, 20) << bad;  // untouched
  }
  Parsed p;
  absl::Status s = p.Parse({"--bytes=-1"});  // unsigned: the default range starts at 0
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--bytes=-1"));
  Parsed q;
  s = q.Parse({"--tp=2,65"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--tp=2,65"));
  EXPECT_THAT(s.message(), HasSubstr("'65'"));
  EXPECT_EQ(q.v.tp, (std::vector<int>{1, 2}));
  Parsed r;
  s = r.Parse({"--seconds=0.1"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--seconds=0.1"));
  Parsed t;
  EXPECT_EQ(t.Parse({"--seconds=abc"}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FlagSetTest, Choices) {
  Parsed p;
  absl::Status s = p.Parse({"--gemm", "wgmma"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--gemm=wgmma"));
  EXPECT_THAT(s.message(), HasSubstr("auto, mma"));
  Parsed q;
  s = q.Parse({"--backends=ce,nccl"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--backends=ce,nccl"));
  EXPECT_THAT(s.message(), HasSubstr("'nccl'"));
  EXPECT_EQ(q.v.backends, (std::vector<std::string>{"ce"}));
}

TEST(FlagSetTest, EmptyListIsAnError) {
  for (const char* flag : {"--tp=", "--tp=,", "--tls=", "--backends=,"}) {
    Parsed p;
    absl::Status s = p.Parse({flag});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_THAT(s.message(), HasSubstr(flag)) << flag;
  }
}

TEST(FlagSetTest, RepeatedFlagCollectsEveryValue) {
  std::vector<std::string> options;
  std::string arch = "sm_90";
  FlagSet flags("p");
  flags.Repeated("option", &options, "compiler option");
  flags.String("arch", &arch, "target");
  ASSERT_TRUE(flags.Parse({"--option", "-O3", "--arch=sm_80", "--option=-G,x"}).ok());
  EXPECT_EQ(options, (std::vector<std::string>{"-O3", "-G,x"}));
  EXPECT_EQ(arch, "sm_80");
  EXPECT_THAT(flags.Usage(), HasSubstr("--option VALUE"));
  EXPECT_THAT(flags.Usage(), HasSubstr("compiler option (repeatable)"));
}

TEST(FlagSetTest, UnknownFlag) {
  Parsed p;
  absl::Status s = p.Parse({"--reps=3", "--wrold=4"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown flag --wrold");
  Parsed q;
  s = q.Parse({"--wrold"});
  EXPECT_EQ(s.message(), "unknown flag --wrold");
}

TEST(FlagSetTest, MissingValue) {
  Parsed p;
  absl::Status s = p.Parse({"--fence", "--reps"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--reps needs a value");
}

TEST(FlagSetTest, Positionals) {
  Parsed p;
  absl::Status s = p.Parse({"--reps=3", "file"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'file'"));
  Parsed q;
  std::vector<std::string> positional;
  ASSERT_TRUE(q.flags.Parse({"a", "--reps=3", "-", "--", "--fence", "b"}, &positional).ok());
  EXPECT_EQ(positional, (std::vector<std::string>{"a", "-", "--fence", "b"}));
  EXPECT_FALSE(q.v.fence);
  EXPECT_EQ(q.v.reps, 3);
}

TEST(FlagSetTest, ArgvSkipsTheProgramName) {
  Parsed p;
  const char* argv[] = {"prog", "--reps", "9"};
  ASSERT_TRUE(p.flags.Parse(3, argv).ok());
  EXPECT_EQ(p.v.reps, 9);
}

TEST(FlagSetTest, HelpStopsParsingAndUsageListsEveryFlag) {
  for (const char* help : {"--help", "-h"}) {
    Parsed p;
    ASSERT_TRUE(p.Parse({"--reps=2", help, "--not-a-flag"}).ok()) << help;
    EXPECT_TRUE(p.flags.help());
    EXPECT_EQ(p.v.reps, 2);
  }
  Parsed p;
  const std::string usage = p.flags.Usage();
  EXPECT_THAT(usage, HasSubstr("usage: prog [flags]\nA test program.\nSecond line.\n"));
  for (const char* line : {"--fence ", "--check ", "--reps N ", "--total N ", "--bytes N ",
                           "--seconds X ", "--hub HOST:PORT ", "--gemm auto|mma ", "--tp N,N,.. ",
                           "--tokens N,N,.. ", "--tls A,B,.. ", "--backends ce,sm ", "--help "}) {
    EXPECT_THAT(usage, HasSubstr(line)) << usage;
  }
  for (const char* text : {"order with a fence\n", "check results [true]", "repetitions [20]",
                           "hub address [localhost:1]", "GEMM kernel [auto]", "world sizes [1,2]",
                           "UCX transports [tcp,shm]"}) {
    EXPECT_THAT(usage, HasSubstr(text)) << usage;
  }
}

TEST(FlagSetTest, UsageTextOverrides) {
  int gpus = 1;
  std::vector<int> tp;
  FlagSet flags("p");
  flags.Int("gpus", &gpus, "GPUs to use\nsecond line", 1, 64);
  flags.IntList("tp", &tp, "world sizes").DefaultText("gpus * ranks-per-gpu").Metavar("LIST");
  const std::string usage = flags.Usage();
  EXPECT_THAT(usage, HasSubstr("  --gpus N                GPUs to use\n"
                               "                          second line [1]\n"));
  EXPECT_THAT(usage, HasSubstr("  --tp LIST               world sizes [gpus * ranks-per-gpu]\n"));
}

}  // namespace
}  // namespace syncopate
