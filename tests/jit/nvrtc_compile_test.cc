// Generated fused and local kernels compile with NVRTC for sm_80 and sm_90 (no GPU needed): the
// device headers go in as in-memory NVRTC headers, only cuda_bf16.h / cuda_fp16.h come from the
// toolkit's include directory.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/embedded_headers.h"
#include "tests/jit/test_plans.h"

#if SYNCOPATE_HAVE_NVRTC_WRAPPER
#include "jit/nvrtc/nvrtc_compiler.h"
#else
#include <nvrtc.h>
#endif

namespace syncopate::jit {
namespace {

using testing::AllGatherPlan;
using testing::ReduceScatterPlan;

struct Compiled {
  bool ok = false;
  std::string binary;
  std::string log;
};

// `extra`: more NVRTC options (what SYNCOPATE_NVRTC_OPTIONS adds to the runtime's builds).
Compiled CompileForArch(const GeneratedKernel& k, const std::string& arch,
                        const std::vector<std::string>& extra = {}) {
  const std::string cuda_include = SYNCOPATE_CUDA_INCLUDE;
  Compiled out;
#if SYNCOPATE_HAVE_NVRTC_WRAPPER
  nvrtc::CompileOptions options;
  options.arch = arch;
  options.want_ptx_fallback = false;
  options.include_paths = {cuda_include, cuda_include + "/cccl"};
  options.headers = k.headers;
  options.extra_options = {"-std=c++17"};
  options.extra_options.insert(options.extra_options.end(), extra.begin(), extra.end());
  options.program_name = "syncopate_generated.cu";
  auto compiled = nvrtc::Compile(k.source, options);
  if (!compiled.ok()) {
    out.log = std::string(compiled.status().message());
    return out;
  }
  out.ok = !compiled->is_ptx;
  out.binary = compiled->binary;
  out.log = compiled->log;
#else
  std::vector<const char*> names, contents;
  for (const auto& [name, content] : k.headers) {
    names.push_back(name.c_str());
    contents.push_back(content.c_str());
  }
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, k.source.c_str(), "syncopate_generated.cu",
                         static_cast<int>(names.size()), contents.data(), names.data()) !=
      NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const std::string inc1 = "-I" + cuda_include;
  const std::string inc2 = "-I" + cuda_include + "/cccl";
  std::vector<const char*> opts = {arch_opt.c_str(), inc1.c_str(), inc2.c_str(), "-std=c++17"};
  for (const std::string& o : extra) opts.push_back(o.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  nvrtcGetProgramLog(prog, out.log.data());
  if (rc == NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    out.binary.resize(size);
    nvrtcGetCUBIN(prog, out.binary.data());
    out.ok = size > 0;
  }
  nvrtcDestroyProgram(&prog);
#endif
  return out;
}

void ExpectCompiles(const GeneratedKernel& k, const std::string& arch) {
  const Compiled c = CompileForArch(k, arch);
  ASSERT_TRUE(c.ok) << arch << ": " << c.log << "\n--- source head ---\n"
                    << k.source.substr(0, 3000);
  // The entry is extern "C": its unmangled name is in the cubin's symbol table.
  EXPECT_NE(c.binary.find(k.entry_symbol), std::string::npos) << k.entry_symbol;
}

std::string Example(const std::string& name) {
  auto src = ExampleKernelSource(name);
  EXPECT_TRUE(src.ok()) << src.status();
  return src.ok() ? std::string(*src) : std::string();
}

// `spec` over `plan` with push_tiles, through the example kernel `kernel`; an error too when no
// chunk of the tables moves in tile parts (the case would then test whole chunks).
absl::StatusOr<GeneratedKernel> InTileParts(const plan::Plan& plan, KernelSpec spec,
                                            const std::string& kernel) {
  spec.push_tiles = true;
  absl::StatusOr<GeneratedKernel> k = GenerateFusedKernel(plan, spec, Example(kernel), {kernel});
  if (k.ok() && k->source.find("kTileParts = true") == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(plan.name, ": no chunk in tile parts"));
  }
  return k;
}

class NvrtcCompileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcCompileTest, FusedAllGatherGemmBf16) {
  const plan::Plan plan = AllGatherPlan("ring", 4, 1000, 256, 2);
  const KernelSpec spec = GemmSpecForAllGather(1000, 384, 256, plan::DType::kBF16);
  auto k = GenerateFusedKernel(plan, spec, Example("gemm_mma.cuh"), {"gemm_mma.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  ExpectCompiles(*k, GetParam());
}

TEST_P(NvrtcCompileTest, FusedGemmReduceScatterF16) {
  const plan::Plan plan = ReduceScatterPlan("ring", 4, 512, 384, 2, plan::DType::kF16);
  const KernelSpec spec = GemmSpecForReduceScatter(512, 384, 200, plan::DType::kF16, 128, 64);
  auto k = GenerateFusedKernel(plan, spec, Example("gemm_mma.cuh"), {"gemm_mma.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  ExpectCompiles(*k, GetParam());
}

// Tile parts (push_tiles) through the CTA-collective done() of the mma.sync GEMM.
TEST_P(NvrtcCompileTest, FusedGemmReduceScatterInTileParts) {
  const plan::Plan plan = ReduceScatterPlan("direct", 4, 512, 384, 2, plan::DType::kBF16);
  auto k = InTileParts(plan, GemmSpecForReduceScatter(512, 384, 200, plan::DType::kBF16, 128, 64),
                       "gemm_mma.cuh");
  ASSERT_TRUE(k.ok()) << k.status();
  ExpectCompiles(*k, GetParam());
}

TEST_P(NvrtcCompileTest, LocalGemmBf16AndF16) {
  for (plan::DType dtype : {plan::DType::kBF16, plan::DType::kF16}) {
    const KernelSpec spec = GemmSpecForAllGather(777, 300, 72, dtype, 64, 64);
    auto k = GenerateLocalKernel(spec, Example("gemm_mma.cuh"), {"gemm_mma.cuh"});
    ASSERT_TRUE(k.ok()) << k.status();
    ExpectCompiles(*k, GetParam());
  }
}

TEST_P(NvrtcCompileTest, FusedAndLocalRmsNorm) {
  const plan::Plan plan = AllGatherPlan("push", 2, 64, 96, 3, plan::DType::kF32);
  const KernelSpec spec = RmsNormSpecForAllGather(64, 96, plan::DType::kF32, 8);
  auto fused = GenerateFusedKernel(plan, spec, Example("rowwise.cuh"), {"rowwise.cuh"});
  ASSERT_TRUE(fused.ok()) << fused.status();
  ExpectCompiles(*fused, GetParam());
  auto local = GenerateLocalKernel(spec, Example("rowwise.cuh"), {"rowwise.cuh"});
  ASSERT_TRUE(local.ok()) << local.status();
  ExpectCompiles(*local, GetParam());
}

TEST_P(NvrtcCompileTest, FusedReduceScatterDirectF32Reductions) {
  // f32 reduce transfers exercise the atomic reduction paths of the comm CTAs; direct_inplace's
  // land behind landing guards and end in local copies.
  for (const char* algo : {"direct", "direct_inplace"}) {
    const plan::Plan plan = ReduceScatterPlan(algo, 3, 48, 32, 2, plan::DType::kF32);
    const KernelSpec spec = testing::TinyCopySpec(48, 32, 16, "", "input");
    auto k = GenerateFusedKernel(plan, spec, testing::kTinyKernel, {"tiny_copy.cuh"});
    ASSERT_TRUE(k.ok()) << algo << ": " << k.status();
    ExpectCompiles(*k, GetParam());
  }
}

// The Hopper GEMM (gemm_wgmma.cuh): wgmma needs the arch-specific target sm_90a. Fused (both
// workloads, both dtypes, 128 x 256 and 128 x 128 tiles) and local variants compile to a cubin
// with no ptxas warning (C7518 would mean serialised wgmmas; spills would show as warnings too);
// on sm_80 / sm_90 the header still compiles (its body is a trap the runtime never launches).
// The kernel decides by itself whether its epilogue stages through shared memory; the host sizes
// the dynamic shared memory with GemmWgmmaSmemBytes. The two rules must agree, or the kernel
// writes past its allocation: the kernel's own constants, checked by static_asserts that NVRTC
// compiles into the generated source.
TEST(NvrtcCompileWgmma, KernelAndHostAgreeOnSharedMemory) {
  auto k = GenerateLocalKernel(GemmWgmmaSpecForAllGather(256, 256, 64, plan::DType::kBF16),
                               Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  std::string checks = absl::StrCat(
      "\nstatic_assert(syncopate_examples::wgmma_detail::kMaxDynamicSmem == ",
      kHopperMaxDynamicSmem, ", \"the 227 KB limit\");\n");
  for (int tile_n : {128, 256}) {
    for (int stages = 2; stages <= 7; ++stages) {
      const bool staged =
          GemmWgmmaSmemBytes(128, tile_n, stages) > stages * (128 + tile_n) * 128 + 2048;
      absl::StrAppend(&checks, "static_assert(syncopate_examples::wgmma_detail::",
                      "StagedEpilogueFits<128, ", tile_n, ", ", stages, ">() == ",
                      staged ? "true" : "false", ", \"", tile_n, "x", stages, "\");\n");
    }
  }
  k->source += checks;
  const Compiled c = CompileForArch(*k, "sm_90a");
  EXPECT_TRUE(c.ok) << c.log;
}

TEST(NvrtcCompileWgmma, FusedAndLocalForSm90a) {
  const plan::Plan ag = AllGatherPlan("push", 4, 1000, 264, 2);
  const plan::Plan rs = ReduceScatterPlan("direct", 2, 512, 384, 2, plan::DType::kF16);
  std::vector<GeneratedKernel> kernels;
  auto f1 = GenerateFusedKernel(ag, GemmWgmmaSpecForAllGather(1000, 384, 264, plan::DType::kBF16),
                                Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
  ASSERT_TRUE(f1.ok()) << f1.status();
  kernels.push_back(*f1);
  auto f2 = GenerateFusedKernel(
      rs, GemmWgmmaSpecForReduceScatter(512, 384, 200, plan::DType::kF16, 128, 128, 3),
      Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
  ASSERT_TRUE(f2.ok()) << f2.status();
  kernels.push_back(*f2);
  // The same in tile parts: the warp-specialised done_by_group's path.
  auto f3 =
      InTileParts(rs, GemmWgmmaSpecForReduceScatter(512, 384, 200, plan::DType::kF16, 128, 128, 3),
                  "gemm_wgmma.cuh");
  ASSERT_TRUE(f3.ok()) << f3.status();
  kernels.push_back(*f3);
  for (plan::DType dtype : {plan::DType::kBF16, plan::DType::kF16}) {
    auto l = GenerateLocalKernel(GemmWgmmaSpecForAllGather(777, 300, 72, dtype),
                                 Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
    ASSERT_TRUE(l.ok()) << l.status();
    kernels.push_back(*l);
  }
  for (const GeneratedKernel& k : kernels) {
    const Compiled c = CompileForArch(k, "sm_90a");
    ASSERT_TRUE(c.ok) << c.log;
    EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
    EXPECT_EQ(k.metadata.block_dim, 384);
  }
  ExpectCompiles(kernels[0], "sm_90");
  ExpectCompiles(kernels[3], "sm_80");
}

// Bytes of static shared memory in a cubin: the sizes of its ".nv.shared.<kernel>" sections
// (ELF64 section headers; ".nv.shared.reserved.*" are the toolchain's, not the kernel's). -1
// when the binary is not an ELF64 file.
int64_t StaticSharedBytes(const std::string& elf) {
  auto read = [&elf](size_t at, size_t n) {
    uint64_t v = 0;
    if (at + n <= elf.size()) std::memcpy(&v, elf.data() + at, n);  // little-endian host
    return v;
  };
  if (elf.size() < 64 ||
      elf.compare(0, 4,
                  "\x7f"
                  "ELF") != 0 ||
      elf[4] != 2)
    return -1;
  const uint64_t shoff = read(0x28, 8);
  const uint64_t shentsize = read(0x3A, 2);
  const uint64_t shnum = read(0x3C, 2);
  const uint64_t names = read(shoff + read(0x3E, 2) * shentsize + 0x18, 8);  // shstrtab offset
  int64_t total = 0;
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t header = shoff + i * shentsize;
    const uint64_t name_at = names + read(header, 4);
    if (name_at >= elf.size()) return -1;
    const std::string name(elf.c_str() + name_at);
    if (name.rfind(".nv.shared.", 0) == 0 && name.rfind(".nv.shared.reserved", 0) != 0) {
      total += static_cast<int64_t>(read(header + 0x20, 8));  // sh_size
    }
  }
  return total;
}

// A fused gemm_wgmma kernel's static shared memory (the kernel's aligned arrays, the comm CTAs'
// channel cursors, the claimed pieces' words) stays within kFusedStaticSmemReserve, which the
// dynamic size rule leaves free: static plus dynamic must fit Hopper's 227 KB per block, or the
// launch of the largest configurations fails. Checked on the compiled cubins of an AllGather and
// two ReduceScatters (transfers in pieces; the direct plan at 6 stages, a ring at 3 ranks).
TEST(NvrtcCompileWgmma, FusedStaticSharedMemoryFitsTheReserve) {
  std::vector<GeneratedKernel> kernels;
  const plan::Plan ag = AllGatherPlan("push", 4, 1000, 264, 2);
  auto f1 = GenerateFusedKernel(ag, GemmWgmmaSpecForAllGather(1000, 384, 264, plan::DType::kBF16),
                                Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
  ASSERT_TRUE(f1.ok()) << f1.status();
  kernels.push_back(*f1);
  const plan::Plan rs = ReduceScatterPlan("direct", 2, 512, 384, 2, plan::DType::kBF16);
  auto f2 = GenerateFusedKernel(
      rs, GemmWgmmaSpecForReduceScatter(512, 384, 200, plan::DType::kBF16, 128, 128, 6),
      Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
  ASSERT_TRUE(f2.ok()) << f2.status();
  kernels.push_back(*f2);
  const plan::Plan ring = ReduceScatterPlan("ring", 3, 384, 384, 2, plan::DType::kBF16);
  auto f3 =
      GenerateFusedKernel(ring, GemmWgmmaSpecForReduceScatter(384, 384, 200, plan::DType::kBF16),
                          Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
  ASSERT_TRUE(f3.ok()) << f3.status();
  kernels.push_back(*f3);
  // Tile parts add their own guard words in shared memory.
  auto f4 =
      InTileParts(rs, GemmWgmmaSpecForReduceScatter(512, 384, 200, plan::DType::kBF16, 128, 128, 6),
                  "gemm_wgmma.cuh");
  ASSERT_TRUE(f4.ok()) << f4.status();
  kernels.push_back(*f4);
  for (const GeneratedKernel& k : kernels) {
    const Compiled c = CompileForArch(k, "sm_90a");
    ASSERT_TRUE(c.ok) << c.log;
    const int64_t bytes = StaticSharedBytes(c.binary);
    EXPECT_GT(bytes, 0) << k.entry_symbol;  // the kernel has some: the parse worked
    EXPECT_LE(bytes, kFusedStaticSmemReserve) << k.entry_symbol;
    EXPECT_LE(bytes + k.metadata.dynamic_smem_bytes, kHopperMaxSmemPerBlock) << k.entry_symbol;
  }
}

// The device headers' A/B knobs for the reductions' transfers (README, "For A/B runs"): the
// pieces' size, the loads in flight per thread and the joined CTAs' wait for peers (and the
// joined CTAs that stop following their tile progress, in the ring), each into
// the fused wgmma kernel of a 4-rank direct ReduceScatter (three channels); the plain path for
// reductions no write can race into the ring's (its hops into the inputs). Each must change the
// kernel's binary, so a knob that stopped reaching the code would be noticed.
TEST(NvrtcCompileWgmma, ReductionKnobsCompileAndChangeTheKernel) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"direct",
       {"-DSYNCOPATE_TRANSFER_PIECE_KB=128", "-DSYNCOPATE_COPY_UNROLL=8",
        "-DSYNCOPATE_JOIN_PEER_WAIT_US=0"}},
      // The ring's hops wait for peers' signals, so its joined CTAs have peers to follow (a
      // direct ReduceScatter's steps wait for none, and the knob then changes nothing).
      {"ring", {"-DSYNCOPATE_PLAIN_REDUCE=1", "-DSYNCOPATE_JOIN_FOLLOWS_PEERS=0"}}};
  for (const auto& [algo, knobs] : cases) {
    const plan::Plan rs = ReduceScatterPlan(algo, 4, 1024, 384, 2, plan::DType::kBF16);
    auto k =
        GenerateFusedKernel(rs, GemmWgmmaSpecForReduceScatter(1024, 384, 256, plan::DType::kBF16),
                            Example("gemm_wgmma.cuh"), {"gemm_wgmma.cuh"});
    ASSERT_TRUE(k.ok()) << k.status();
    const Compiled base = CompileForArch(*k, "sm_90a");
    ASSERT_TRUE(base.ok) << base.log;
    for (const std::string& knob : knobs) {
      const Compiled c = CompileForArch(*k, "sm_90a", {knob});
      ASSERT_TRUE(c.ok) << knob << ": " << c.log;
      EXPECT_NE(c.binary, base.binary) << algo << " " << knob;
    }
  }
}

TEST(NvrtcCompileErrors, CompileErrorPointsIntoKernelFile) {
  const KernelSpec spec = testing::TinyCopySpec(32, 8, 8, "", "");
  const std::string broken = std::string(testing::kTinyKernel) + "this is not C++;\n";
  auto k = GenerateLocalKernel(spec, broken, {"tiny_copy.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  const Compiled c = CompileForArch(*k, "sm_90");
  EXPECT_FALSE(c.ok);
  // #line directives map the error back to the kernel's own file and line.
  const std::string tiny = testing::kTinyKernel;
  const size_t bad_line = std::count(tiny.begin(), tiny.end(), '\n') + 1;
  EXPECT_NE(c.log.find("tiny_copy.cuh(" + std::to_string(bad_line) + ")"), std::string::npos)
      << c.log;
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcCompileTest, ::testing::Values("sm_80", "sm_90"));

}  // namespace
}  // namespace syncopate::jit
