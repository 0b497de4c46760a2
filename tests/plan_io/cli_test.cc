// `syncopate plan ...` end to end: runs the built binary (SYNCOPATE_BIN) and checks exit codes
// (0 ok, 1 the plan failed, 2 bad usage/input), stdout and the one-line stderr messages.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/plan/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kSourceDir = SYNCOPATE_SOURCE_DIR;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

Result RunCli(const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string base = absl::StrCat(::testing::TempDir(), "/cli_", getpid(), "_", counter++);
  std::string command = Quote(SYNCOPATE_BIN);
  for (const std::string& arg : args) absl::StrAppend(&command, " ", Quote(arg));
  absl::StrAppend(&command, " >", base, ".out 2>", base, ".err");
  const int status = std::system(command.c_str());
  Result result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = Slurp(base + ".out");
  result.err = Slurp(base + ".err");
  return result;
}

std::string Data(const std::string& relative) { return (kSourceDir / relative).string(); }

// Prints the command's output when an expectation fails.
std::string Describe(const Result& r) {
  return absl::StrCat("exit ", r.code, "\nstdout: ", r.out.substr(0, 2000), "\nstderr: ", r.err);
}

void ExpectUsageError(const std::vector<std::string>& args, const std::string& message) {
  Result r = RunCli(args);
  EXPECT_EQ(r.code, 2) << absl::StrJoin(args, " ") << "\n" << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(message)) << absl::StrJoin(args, " ");
  // One line.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Template-specific flags for world 7.
std::vector<std::string> TemplateFlags(const std::string& name) {
  std::vector<std::string> flags = {"--template", name, "--world", "7", "--shape", "64,32"};
  if (name.find("two_level") != std::string::npos) {
    flags.insert(flags.end(), {"--ranks-per-node", "7"});
  }
  if (name == "allreduce.split") flags.insert(flags.end(), {"--sub-collectives", "2"});
  if (name == "alltoall.uniform") flags[5] = "70,4";
  if (name == "alltoall.variable") {
    std::vector<std::string> rows;
    for (int src = 0; src < 7; ++src) {
      std::vector<int> row;
      for (int dst = 0; dst < 7; ++dst) row.push_back((src + dst) % 3);
      rows.push_back(absl::StrJoin(row, ","));
    }
    flags.insert(flags.end(), {"--splits", absl::StrJoin(rows, ";")});
  }
  return flags;
}

class CliTemplateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CliTemplateTest, SimulatesAtWorld7) {
  std::vector<std::string> args = {"plan", "simulate"};
  for (const std::string& f : TemplateFlags(GetParam())) args.push_back(f);
  Result r = RunCli(args);
  EXPECT_EQ(r.code, 0) << Describe(r);
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_FALSE(r.out.empty());
}

TEST_P(CliTemplateTest, ValidatesAtWorld7) {
  std::vector<std::string> args = {"plan", "validate"};
  for (const std::string& f : TemplateFlags(GetParam())) args.push_back(f);
  Result r = RunCli(args);
  EXPECT_EQ(r.code, 0) << Describe(r);
  EXPECT_EQ(r.out, "OK\n");
}

INSTANTIATE_TEST_SUITE_P(Templates, CliTemplateTest, ::testing::ValuesIn(plan::TemplateNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '.' ? '_' : c;
                           return name;
                         });

TEST(CliTest, ShowPrintsTimeline) {
  Result r =
      RunCli({"plan", "show", "--template", "allgather.ring", "--world", "2", "--shape", "8,4"});
  EXPECT_EQ(r.code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("allgather.ring"));
}

TEST(CliTest, TemplatesListsNames) {
  Result r = RunCli({"plan", "templates"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, absl::StrCat(absl::StrJoin(plan::TemplateNames(), "\n"), "\n"));
}

TEST(CliTest, HelpExitsZero) {
  Result r = RunCli({"plan", "show", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--template"));
}

TEST(CliTest, PlanFilesValidateAndSimulate) {
  for (const char* file :
       {"examples/plans/allgather_push_2.textproto", "examples/plans/allreduce_2.textproto"}) {
    Result v = RunCli({"plan", "validate", "--file", Data(file)});
    EXPECT_EQ(v.code, 0) << file << "\n" << Describe(v);
    EXPECT_EQ(v.out, "OK\n");
    Result s = RunCli({"plan", "simulate", "--file", Data(file), "--seed", "5"});
    EXPECT_EQ(s.code, 0) << file << "\n" << Describe(s);
  }
}

TEST(CliTest, MscclFileSimulates) {
  Result r = RunCli({"plan", "simulate", "--file", Data("tests/data/msccl/allreduce_2.xml"),
                     "--shape", "64,16", "--dtype", "f32"});
  EXPECT_EQ(r.code, 0) << Describe(r);
}

TEST(CliTest, SaveThenLoadKeepsHash) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/saved_", getpid(), ".textproto");
  const std::vector<std::string> flags = {
      "--template", "reducescatter.ring", "--world", "3", "--shape", "12,4", "--chunks", "2"};
  std::vector<std::string> save = {"plan", "save", "--out", path};
  save.insert(save.end(), flags.begin(), flags.end());
  Result s = RunCli(save);
  ASSERT_EQ(s.code, 0) << Describe(s);
  EXPECT_THAT(s.out, HasSubstr("wrote " + path));
  std::vector<std::string> hash = {"plan", "hash"};
  hash.insert(hash.end(), flags.begin(), flags.end());
  Result h1 = RunCli(hash);
  Result h2 = RunCli({"plan", "hash", "--file", path});
  EXPECT_EQ(h1.code, 0);
  EXPECT_EQ(h1.out.size(), 65u) << h1.out;
  EXPECT_EQ(h1.out, h2.out);
}

TEST(CliTest, BrokenPlanFailsWithExit1) {
  const std::string file = Data("tests/data/plans/allgather_missing_chunk.textproto");
  Result v = RunCli({"plan", "validate", "--file", file});
  EXPECT_EQ(v.code, 1) << Describe(v);
  EXPECT_THAT(v.err, HasSubstr("syncopate plan validate: "));
  EXPECT_THAT(v.err, HasSubstr("rank 0 data[2:4,0:4)"));
  EXPECT_THAT(v.err, HasSubstr("missing chunk"));
  EXPECT_EQ(std::count(v.err.begin(), v.err.end(), '\n'), 1) << v.err;
  Result s = RunCli({"plan", "simulate", "--file", file});
  EXPECT_EQ(s.code, 1) << Describe(s);
  EXPECT_THAT(s.err, HasSubstr("syncopate plan simulate: "));
}

TEST(CliTest, BadUsageExits2) {
  ExpectUsageError({"plan"}, "missing verb");
  ExpectUsageError({"plan", "frobnicate"}, "unknown verb 'frobnicate'");
  ExpectUsageError({"plan", "show"}, "give exactly one of --template NAME or --file PATH");
  ExpectUsageError({"plan", "show", "--wrold", "7"}, "unknown flag --wrold");
  ExpectUsageError({"plan", "show", "--template"}, "--template needs a value");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--world", "x"},
                   "--world=x: want an integer");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--shape", "6,x"},
                   "--shape: 'x' is not an integer");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--shape", "6,0"},
                   "--shape: extents must be positive");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--dtype", "f13"}, "--dtype");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--op", "prod"},
                   "--op: 'prod' is not sum or max");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--splits", "1,2;x"},
                   "--splits");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "stray"},
                   "unexpected argument 'stray'");
  ExpectUsageError({"plan", "save", "--template", "allgather.ring"}, "missing --out PATH");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--seed", "3"},
                   "--seed applies to simulate only");
  ExpectUsageError({"plan", "show", "--file", "x.textproto", "--world", "3"},
                   "--world applies to --template only");
  ExpectUsageError({"plan", "show", "--template", "allgather.ring", "--file", "x.textproto"},
                   "give exactly one of");
}

TEST(CliTest, ImpossibleParametersExit2) {
  ExpectUsageError({"plan", "simulate", "--template", "no.such.template"}, "no.such.template");
  ExpectUsageError({"plan", "simulate", "--template", "allgather.ring", "--world", "0"}, "world");
  ExpectUsageError({"plan", "simulate", "--template", "allgather.ring", "--world", "100"}, "world");
  ExpectUsageError({"plan", "simulate", "--template", "allgather.ring", "--axis", "5"}, "axis");
  ExpectUsageError({"plan", "simulate", "--template", "allgather.ring", "--world", "4", "--shape",
                    "8,4", "--chunks", "3"},
                   "chunks");
  ExpectUsageError({"plan", "simulate", "--template", "allgather.two_level", "--world", "6",
                    "--ranks-per-node", "4"},
                   "ranks_per_node");
}

TEST(CliTest, BadFilesExit2) {
  ExpectUsageError({"plan", "validate", "--file", "/nonexistent/plan.textproto"}, "cannot open");
  ExpectUsageError({"plan", "validate", "--file", "plan.json"}, "unknown plan file extension");
  const std::string bad = absl::StrCat(::testing::TempDir(), "/bad_", getpid(), ".textproto");
  std::ofstream(bad) << "name: \"x\"\nworld_size: two\n";
  ExpectUsageError({"plan", "validate", "--file", bad}, bad + ":2:");
  ExpectUsageError({"plan", "simulate", "--file", Data("tests/data/msccl/malformed_bad_step.xml")},
                   "line 12: <gpu id=1> <tb id=0> <step s=1>: unknown step type");
  ExpectUsageError({"plan", "simulate", "--file", Data("tests/data/msccl/allgather_ring_4.xml"),
                    "--shape", "6,4"},
                   "shape[0] = 6 does not divide into the 4 chunks");
}

}  // namespace
}  // namespace syncopate
