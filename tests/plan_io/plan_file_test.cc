// Plan files: text and binary save/load round trips, parse errors with file:line:column,
// structural errors with the field path, MSCCL XML through LoadPlanFile, and the example plans
// under examples/plans validate and simulate.
#include "core/plan_io/plan_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "core/plan/simulate.h"
#include "core/plan/templates.h"
#include "core/plan/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::plan_io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const fs::path kSourceDir = SYNCOPATE_SOURCE_DIR;

std::string TempPath(const std::string& name) {
  return (fs::path(::testing::TempDir()) / name).string();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

plan::Plan Ring(int world = 4) {
  plan::TemplateParams params;
  params.world_size = world;
  params.shape = {16, 8};
  params.chunks_per_shard = 2;
  auto plan = plan::BuildTemplate("allgather.ring", params);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(PlanFileTest, FormatForPath) {
  EXPECT_EQ(*FormatForPath("a.textproto"), PlanFileFormat::kText);
  EXPECT_EQ(*FormatForPath("dir/a.txtpb"), PlanFileFormat::kText);
  EXPECT_EQ(*FormatForPath("a.pbtxt"), PlanFileFormat::kText);
  EXPECT_EQ(*FormatForPath("a.pb"), PlanFileFormat::kBinary);
  EXPECT_EQ(*FormatForPath("a.binpb"), PlanFileFormat::kBinary);
  EXPECT_EQ(*FormatForPath("a.xml"), PlanFileFormat::kMsccl);
  EXPECT_THAT(FormatForPath("a.json").status().message(),
              HasSubstr("a.json: unknown plan file extension"));
}

TEST(PlanFileTest, TextRoundTrip) {
  const plan::Plan plan = Ring();
  const std::string path = TempPath("ring.textproto");
  ASSERT_TRUE(SavePlanFile(plan, path).ok());
  const std::string text = ReadText(path);
  EXPECT_THAT(text, StartsWith("# proto-file: proto/syncopate/v1/plan.proto\n"
                               "# proto-message: syncopate.v1.Plan\n"));
  EXPECT_THAT(text, HasSubstr("# plan hash: " + plan::PlanHash(plan)));
  auto loaded = LoadPlanFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(*loaded == plan);
  EXPECT_EQ(plan::PlanHash(*loaded), plan::PlanHash(plan));
}

TEST(PlanFileTest, BinaryRoundTrip) {
  const plan::Plan plan = Ring(3);
  const std::string path = TempPath("ring.pb");
  ASSERT_TRUE(SavePlanFile(plan, path).ok());
  auto loaded = LoadPlanFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(*loaded == plan);
}

TEST(PlanFileTest, SaveOverwritesAtomically) {
  const std::string path = TempPath("overwrite.txtpb");
  ASSERT_TRUE(SavePlanFile(Ring(2), path).ok());
  ASSERT_TRUE(SavePlanFile(Ring(3), path).ok());
  auto loaded = LoadPlanFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->world_size, 3);
  for (const auto& entry : fs::directory_iterator(::testing::TempDir())) {
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr("overwrite.txtpb.tmp")));
  }
}

TEST(PlanFileTest, SyntaxErrorNamesLineAndColumn) {
  const std::string path = TempPath("syntax.textproto");
  WriteText(path, "# comment\nname: \"x\"\nworld_size: 2\nranks {\n  rank: x\n}\n");
  auto loaded = LoadPlanFile(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr(path + ":5:9: "));
  EXPECT_THAT(loaded.status().message(), HasSubstr("integer"));
}

TEST(PlanFileTest, UnknownFieldNamesLine) {
  auto plan = ParsePlanText("name: \"x\"\n\nworld_sise: 2\n", "in.txtpb");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("in.txtpb:3:"));
  EXPECT_THAT(plan.status().message(), HasSubstr("world_sise"));
}

TEST(PlanFileTest, StructuralErrorNamesFileAndField) {
  std::string text = PlanToText(Ring(2));
  // Drop the first transfer's id.
  size_t pos = text.find("id: 0\n");
  ASSERT_NE(pos, std::string::npos);
  text.erase(pos, 6);
  auto plan = ParsePlanText(text, "ring.txtpb");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "ring.txtpb: ranks[0].channels[0].transfers[0].id: missing");
}

TEST(PlanFileTest, MissingFileIsNotFound) {
  auto plan = LoadPlanFile(TempPath("does_not_exist.textproto"));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(plan.status().message(), HasSubstr("does_not_exist.textproto: cannot open"));
}

TEST(PlanFileTest, MalformedBinary) {
  const std::string path = TempPath("garbage.pb");
  WriteText(path, "\xff\xff\xff garbage");
  auto plan = LoadPlanFile(path);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("not a binary syncopate.v1.Plan"));
}

TEST(PlanFileTest, LoadsMsccl) {
  LoadOptions options;
  options.msccl.shape = {8, 2};
  options.msccl.dtype = plan::DType::kF16;
  auto plan =
      LoadPlanFile((kSourceDir / "tests/data/msccl/allgather_ring_4.xml").string(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->buffers[0].shape, (plan::Shape{8, 2}));
  EXPECT_EQ(plan->buffers[0].dtype, plan::DType::kF16);
  EXPECT_TRUE(plan::ValidatePlan(*plan).ok());

  auto bad = LoadPlanFile((kSourceDir / "tests/data/msccl/malformed_bad_step.xml").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("malformed_bad_step.xml: line 12: <gpu id=1> <tb id=0> <step s=1>"));
}

TEST(PlanFileTest, SavingXmlIsUnimplemented) {
  EXPECT_EQ(SavePlanFile(Ring(2), TempPath("x.xml")).code(), absl::StatusCode::kUnimplemented);
}

TEST(PlanFileTest, ExamplePlansValidateAndSimulate) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "examples/plans")) {
    if (entry.path().extension() != ".textproto") continue;
    ++count;
    auto plan = LoadPlanFile(entry.path().string());
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan::ValidatePlan(*plan).ok())
        << entry.path() << ": " << plan::ValidatePlan(*plan);
    auto report = plan::SimulatePlan(*plan, plan::SimulationOptions{});
    EXPECT_TRUE(report.ok()) << entry.path() << ": " << report.status();
  }
  EXPECT_GE(count, 2);
}

TEST(PlanFileTest, BrokenPlanFailsValidation) {
  auto plan =
      LoadPlanFile((kSourceDir / "tests/data/plans/allgather_missing_chunk.textproto").string());
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::Status status = plan::ValidatePlan(*plan);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("rank 0"));
  EXPECT_FALSE(plan::SimulatePlan(*plan, plan::SimulationOptions{}).ok());
}

}  // namespace
}  // namespace syncopate::plan_io
