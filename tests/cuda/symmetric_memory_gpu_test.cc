// Symmetric memory across rank processes on one GPU: every rank sees every peer's buffer through
// its own mapping (reads and copy-engine writes), stream memory ops on peer words work, and a
// size mismatch is an error naming the rank. LABEL gpu; skips without a GPU.
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/group.h"
#include "runtime/cuda/symmetric_memory.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "tests/cuda/gpu_test_env.h"

namespace syncopate::cuda {
namespace {

using ::syncopate::workloads::RunRanks;
using ::syncopate::workloads::UniqueGroupId;
using ::testing::HasSubstr;

constexpr size_t kWords = (3u << 20) / 4;  // not a multiple of the 2 MiB granularity

absl::Status PeerMappingsSeeEachOther(const std::string& group, int rank, int world) {
  ASSIGN_OR_RETURN(auto g, Group::Create({group, rank, world}));
  // Every rank opened ordinal 0: all of them share its GPU.
  if (g->ranks_on_device() != world) {
    return absl::InternalError(absl::StrCat("rank ", rank, " counts ", g->ranks_on_device(),
                                            " ranks on its GPU, not all ", world));
  }
  const DriverApi& api = g->api();
  ASSIGN_OR_RETURN(SymmetricBuffer * buf, g->heap().Allocate("buf", kWords * 4));
  ASSIGN_OR_RETURN(SymmetricBuffer * inbox, g->heap().Allocate("inbox", world * 4096));
  ASSIGN_OR_RETURN(Stream s, Stream::Create(api));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(buf->local(), 0xA0000000u + rank, kWords, s.get()));
  RETURN_IF_ERROR(s.Synchronize());
  RETURN_IF_ERROR(g->rendezvous().Barrier());
  // Read every peer's buffer through this process's mapping.
  std::vector<uint32_t> host(kWords);
  for (int q = 0; q < world; ++q) {
    CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(host.data(), buf->peer(q), kWords * 4));
    for (size_t i = 0; i < kWords; i += 4099) {
      if (host[i] != 0xA0000000u + q) {
        return absl::DataLossError(absl::StrCat("rank ", rank, " reads word ", i, " of rank ", q,
                                                " as ", host[i]));
      }
    }
  }
  // Copy-engine write into every peer's inbox slot, then a stream write of the peer's flag for
  // this rank; each rank stream-waits for all its flags before reading its inbox.
  ASSIGN_OR_RETURN(SymmetricBuffer * flags, g->heap().Allocate("flags", 4 * world));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(flags->local(), 0, world, s.get()));
  RETURN_IF_ERROR(s.Synchronize());
  RETURN_IF_ERROR(g->rendezvous().Barrier());
  for (int q = 0; q < world; ++q) {
    CU_RETURN_IF_ERROR(api.cuMemcpyAsync(inbox->peer(q) + 4096 * rank, buf->local(), 4096, s.get()));
    CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(s.get(), flags->peer(q) + 4 * rank, 7,
                                                CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  for (int q = 0; q < world; ++q) {
    CU_RETURN_IF_ERROR(
        api.cuStreamWaitValue32(s.get(), flags->local() + 4 * q, 7, CU_STREAM_WAIT_VALUE_GEQ));
  }
  RETURN_IF_ERROR(s.Synchronize());
  std::vector<uint32_t> slots(world * 1024);
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(slots.data(), inbox->local(), world * 4096));
  for (int q = 0; q < world; ++q) {
    if (slots[q * 1024] != 0xA0000000u + q || slots[q * 1024 + 1023] != 0xA0000000u + q) {
      return absl::DataLossError(absl::StrCat("inbox slot of rank ", q, " on rank ", rank,
                                              " holds ", slots[q * 1024]));
    }
  }
  return g->rendezvous().Barrier();
}

TEST(SymmetricMemoryGpuTest, PeerMappingsSeeEachOther) {
  SYNCOPATE_REQUIRE_GPU();
  std::string not_run;  // worlds whose ranks do not fit on the GPU at once
  for (int world : {2, 3, 4}) {
    if (std::string why = testing::RanksDoNotFitReason(world); !why.empty()) {
      not_run += " world " + std::to_string(world) + ": " + why;
      continue;
    }
    const std::string group = UniqueGroupId("sym");
    auto results = RunRanks(world, absl::Seconds(120), [&](int r) {
      return PeerMappingsSeeEachOther(group, r, world);
    });
    for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << "world " << world << " rank " << r << ": " << results[r];
  }
  if (!not_run.empty()) GTEST_SKIP() << "not run (one-GPU stand-in):" << not_run;
}

TEST(SymmetricMemoryGpuTest, SizeMismatchNamesTheRank) {
  SYNCOPATE_REQUIRE_GPU();
  const std::string group = UniqueGroupId("symbad");
  auto results = RunRanks(2, absl::Seconds(120), [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(auto g, Group::Create({group, rank, 2}));
    return g->heap().Allocate("x", rank == 0 ? 4096 : 8192).status();
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kFailedPrecondition) << results[0];
  EXPECT_THAT(results[0].message(), HasSubstr("rank 1")) << results[0];
}

}  // namespace
}  // namespace syncopate::cuda
