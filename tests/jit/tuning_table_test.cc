// Tests for jit/tune/tuning_table: round trip, keys that must not collide, malformed files named
// with their bad line, concurrent writers of one key, and the directory created on first Store.
#include "jit/tune/tuning_table.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/scratch_dir.h"

namespace syncopate::tune {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A fresh directory under the test temp dir, removed when the object goes.
class ScratchDir : public syncopate::testing::ScratchDir {
 public:
  ScratchDir() : syncopate::testing::ScratchDir("syncopate_tuning") {}
};

TuningKey Key(int64_t m = 8192, int64_t n = 4096, int64_t k = 1024) {
  return {"gemm_wgmma", "sm_90a", plan::DType::kBF16, m, n, k};
}

TunedGemm Value(int tile_n = 128, int stages = 6, std::string loads = "cpasync") {
  return {tile_n, stages, std::move(loads), 1.2345678901234, 0.987654321};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::trunc) << data;
}

TEST(TuningTableTest, RoundTripsExactly) {
  ScratchDir dir;
  TuningTable table(dir.path());
  ASSERT_TRUE(table.Store(Key(), Value()).ok());
  absl::StatusOr<TunedGemm> back = table.Lookup(Key());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Value());
  // Without the optional cuBLAS ratio, and replacing the earlier value.
  TunedGemm plain = Value(256, 4, "tma");
  plain.vs_cublas.reset();
  ASSERT_TRUE(table.Store(Key(), plain).ok());
  back = table.Lookup(Key());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, plain);
  // Human-readable: the file says what it holds.
  EXPECT_THAT(ReadFile(table.PathFor(Key())),
              AllOf(HasSubstr("arch sm_90a\n"), HasSubstr("m 8192\n"), HasSubstr("tile_n 256\n"),
                    HasSubstr("loads tma\n")));
}

TEST(TuningTableTest, MissingKeyIsNotFound) {
  ScratchDir dir;
  EXPECT_EQ(TuningTable(dir.path()).Lookup(Key()).status().code(), absl::StatusCode::kNotFound);
}

TEST(TuningTableTest, DifferentKeysDoNotCollide) {
  ScratchDir dir;
  TuningTable table(dir.path());
  std::vector<TuningKey> keys = {Key(), Key(4096, 8192, 1024), Key(8192, 1024, 4096),
                                 Key(8192, 4096, 1024), Key(81, 924, 4096)};
  keys[3].dtype = plan::DType::kF16;
  TuningKey other_arch = Key();
  other_arch.arch = "sm_100a";
  keys.push_back(other_arch);
  TuningKey other_family = Key();
  other_family.family = "gemm_mma";
  keys.push_back(other_family);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(table.Store(keys[i], Value(128, 2 + static_cast<int>(i))).ok()) << i;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<TunedGemm> v = table.Lookup(keys[i]);
    ASSERT_TRUE(v.ok()) << i << ": " << v.status();
    EXPECT_EQ(v->stages, 2 + static_cast<int>(i)) << i;
  }
}

TEST(TuningTableTest, RefusesWhatCouldNotBeReadBack) {
  ScratchDir dir;
  TuningTable table(dir.path());
  TuningKey bad_arch = Key();
  bad_arch.arch = "../sm_90";
  EXPECT_EQ(table.Store(bad_arch, Value()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Store(Key(0, 1, 1), Value()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Store(Key(), Value(128, 4, "dma")).code(), absl::StatusCode::kInvalidArgument);
  TunedGemm no_time = Value();
  no_time.ms = 0;
  EXPECT_EQ(table.Store(Key(), no_time).code(), absl::StatusCode::kInvalidArgument);
}

// Each damage, with the line number the error must name (0: the file only).
struct Damage {
  std::string what;
  std::string from;  // replaced in a good file
  std::string to;
  std::string message;
  int line;
};

TEST(TuningTableTest, MalformedFileIsAnErrorNamingFileAndLine) {
  ScratchDir dir;
  TuningTable table(dir.path());
  ASSERT_TRUE(table.Store(Key(), Value()).ok());
  const std::string path = table.PathFor(Key());
  const std::string good = ReadFile(path);
  // Line numbers of the good file: 1 comment, 2 format, ..., 6 m, ..., 9 tile_n, 10 stages,
  // 11 loads, 12 ms.
  const std::vector<Damage> damages = {
      {"not a number", "tile_n 128", "tile_n 12x8", "tile_n \"12x8\" is not a number", 9},
      {"bad loads", "loads cpasync", "loads dma", "neither tma nor cpasync", 11},
      {"negative time", "ms 1.2", "ms -1.2", "not a positive time", 12},
      {"unknown key", "stages 6", "stagez 6", "unknown key \"stagez\"", 10},
      {"no value", "stages 6", "stages", "expected \"key value\"", 10},
      {"two values", "stages 6", "stages 6 7", "expected \"key value\"", 10},
      {"another shape", "m 8192", "m 4096", "m should be 8192", 6},
      {"another format", "format 1", "format 2", "format should be 1", 2},
      {"duplicate", "loads cpasync", "loads cpasync\nloads tma", "\"loads\" given twice", 12},
      {"missing line", "stages 6\n", "", "no \"stages\" line", 0},
  };
  for (const Damage& d : damages) {
    std::string bad = good;
    const size_t at = bad.find(d.from);
    ASSERT_NE(at, std::string::npos) << d.what;
    bad.replace(at, d.from.size(), d.to);
    WriteFile(path, bad);
    absl::StatusOr<TunedGemm> v = table.Lookup(Key());
    ASSERT_FALSE(v.ok()) << d.what;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << d.what;
    const std::string where = d.line > 0 ? path + ":" + std::to_string(d.line) + ":" : path + ":";
    EXPECT_THAT(v.status().message(), AllOf(HasSubstr(where), HasSubstr(d.message))) << d.what;
  }
  WriteFile(path, std::string("\0\xff\x01garbage", 10));
  EXPECT_EQ(table.Lookup(Key()).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TuningTableTest, ConcurrentStoresLeaveAReadableWinner) {
  ScratchDir dir;
  TuningTable table(dir.path());
  constexpr int kWriters = 8;
  constexpr int kRounds = 50;
  std::atomic<bool> writing{true};
  std::atomic<int> torn{0};
  // A reader that only ever sees NotFound (before the first rename) or a whole file.
  std::thread reader([&] {
    while (writing.load()) {
      absl::StatusOr<TunedGemm> v = table.Lookup(Key());
      if (!v.ok() && v.status().code() != absl::StatusCode::kNotFound) ++torn;
    }
  });
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int r = 0; r < kRounds; ++r) {
        if (!table.Store(Key(), Value(w % 2 ? 128 : 256, 2 + w)).ok()) ++failed;
      }
    });
  }
  for (std::thread& t : writers) t.join();
  writing = false;
  reader.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  absl::StatusOr<TunedGemm> v = table.Lookup(Key());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, Value(v->stages % 2 ? 128 : 256, v->stages));  // one writer's value, whole
  EXPECT_GE(v->stages, 2);
  EXPECT_LT(v->stages, 2 + kWriters);
  // No temp file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(table.dir())) {
    ++files;
    EXPECT_EQ(entry.path().string(), table.PathFor(Key()));
  }
  EXPECT_EQ(files, 1);
}

TEST(TuningTableTest, CreatesMissingDirectories) {
  ScratchDir dir;
  const std::string cache = dir.path() + "/not/yet/there";
  TuningTable table(cache);
  EXPECT_EQ(table.dir(), cache + "/tuning");
  EXPECT_EQ(table.Lookup(Key()).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(table.Store(Key(), Value()).ok());
  EXPECT_TRUE(std::filesystem::is_directory(table.dir()));
  EXPECT_TRUE(table.Lookup(Key()).ok());
}

}  // namespace
}  // namespace syncopate::tune
