// The launch waits built for a prepared launch (launch_waits.h): every copy-engine step with a
// condition gets its own gate holding exactly the step's words, at the addresses of the words
// it names; no side stream is left waiting on another process; SM launches guard every peer
// they touch; tails cover every incoming signal and every puller; gates beyond the capacity are
// refused; timeout records read as sentences naming the peer. No GPU (LABEL unit).
#include "runtime/cuda/launch_waits.h"

#include <atomic>
#include <set>
#include <thread>

#include "core/plan/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/group.h"

namespace syncopate::cuda {
namespace {

using ::testing::HasSubstr;

// Distinct fake addresses per word kind, so a mixed-up word is visible.
ProtocolWords Words() {
  ProtocolWords w;
  w.signal = [](int owner, int index) { return 0x100000ull * (owner + 1) + 4ull * index; };
  w.entered = [](int about) { return 0x9000000ull + 4ull * about; };
  w.drained = [](int about) { return 0xa000000ull + 4ull * about; };
  w.chunk_ready = [](int index) { return 0xb000000ull + 4ull * index; };
  return w;
}

uint64_t Addr(const LaunchWaitOp& op) { return reinterpret_cast<uint64_t>(op.word); }

plan::Plan Template(const std::string& name, int world, int chunks) {
  plan::TemplateParams tp;
  tp.world_size = world;
  tp.shape = {static_cast<int64_t>(world * chunks * 4), 32};
  tp.dtype = plan::DType::kBF16;
  tp.chunks_per_shard = chunks;
  absl::StatusOr<plan::Plan> p = plan::BuildTemplate(name, tp);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

BufferAddressFn FakeBuffers() {
  return [](const std::string&, int rank) -> absl::StatusOr<uint64_t> {
    return (static_cast<uint64_t>(rank) + 1) << 32;
  };
}

TEST(LaunchWaitsTest, EveryCopyEngineConditionBecomesAGateOfItsStep) {
  for (const char* name : {"allgather.push", "allgather.ring", "allgather.biring"}) {
    const plan::Plan p = Template(name, 4, 2);
    for (int r = 0; r < 4; ++r) {
      absl::StatusOr<CopyProgram> prog = BuildCopyProgram(p, r, FakeBuffers());
      ASSERT_TRUE(prog.ok()) << prog.status();
      absl::StatusOr<LaunchWaits> w = BuildLaunchWaits(r, &*prog, {}, {}, {}, Words(), 4096);
      ASSERT_TRUE(w.ok()) << w.status();
      ASSERT_EQ(w->step_gate.size(), prog->steps.size());
      std::set<int> gates;
      size_t gate_ops = 0;
      for (size_t i = 0; i < prog->steps.size(); ++i) {
        const CopyStep& step = prog->steps[i];
        if (step.waits.empty()) {
          EXPECT_EQ(w->step_gate[i], -1);
          continue;
        }
        const int g = w->step_gate[i];
        ASSERT_GE(g, 0) << name << " rank " << r << " step " << i;
        EXPECT_TRUE(gates.insert(g).second) << "gate " << g << " shared by two steps";
        // The gate holds exactly the step's words, adjacent (the control CTA releases a gate
        // after its last op).
        std::vector<uint64_t> expected;
        for (const WordWait& ww : step.waits) {
          switch (ww.kind) {
            case WaitKind::kEntered: expected.push_back(Words().entered(ww.index)); break;
            case WaitKind::kSignal: expected.push_back(Words().signal(r, ww.index)); break;
            case WaitKind::kPeerSignal: expected.push_back(Words().signal(ww.rank, ww.index)); break;
            case WaitKind::kChunkReady: expected.push_back(Words().chunk_ready(ww.index)); break;
          }
        }
        std::vector<uint64_t> got;
        int first = -1, last = -1;
        for (size_t k = 0; k < w->ops.size(); ++k) {
          if (w->ops[k].kind == kGateWait && w->ops[k].gate == g) {
            got.push_back(Addr(w->ops[k]));
            if (first < 0) first = static_cast<int>(k);
            last = static_cast<int>(k);
          }
        }
        EXPECT_EQ(got, expected) << name << " rank " << r << " step " << i;
        EXPECT_EQ(last - first + 1, static_cast<int>(got.size())) << "gate ops not adjacent";
        gate_ops += got.size();
        // Every peer write is gated on the peer's entry.
        const plan::Transfer& t = *p.TransfersById()[step.transfer];
        if (t.peer != r) {
          EXPECT_TRUE(std::find(got.begin(), got.end(), Words().entered(t.peer)) != got.end() ||
                      std::any_of(prog->steps.begin(), prog->steps.begin() + i,
                                  [&](const CopyStep& e) {
                                    return e.channel == step.channel &&
                                           p.TransfersById()[e.transfer]->peer == t.peer;
                                  }))
              << name << " rank " << r << " writes rank " << t.peer << " ungated";
        }
      }
      EXPECT_EQ(gate_ops, w->ops.size());  // no tails or guards were asked for
      EXPECT_EQ(w->num_gates, static_cast<int>(gates.size()));
      EXPECT_EQ(w->control_cta, !w->ops.empty());
    }
  }
}

TEST(LaunchWaitsTest, SmLaunchGuardsEveryPeerAndTailsCoverIncomingAndPullers) {
  const std::vector<IncomingSignal> incoming = {{3, 1, 7}, {5, 2, 9}};
  absl::StatusOr<LaunchWaits> w =
      BuildLaunchWaits(0, nullptr, {0, 1, 2}, incoming, {0, 3}, Words(), 4096);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->control_cta);  // SM: comm CTA 0 runs the tails
  EXPECT_EQ(w->num_gates, 0);
  std::vector<std::pair<int, uint64_t>> got;
  for (const LaunchWaitOp& op : w->ops) got.push_back({op.kind, Addr(op)});
  const std::vector<std::pair<int, uint64_t>> expected = {
      {kGuardWait, Words().entered(1)},  {kGuardWait, Words().entered(2)},  // not itself
      {kTailWait, Words().signal(0, 3)}, {kTailWait, Words().signal(0, 5)},
      {kTailWait, Words().drained(3)}};
  EXPECT_EQ(got, expected);
  EXPECT_EQ(w->ops[2].peer, 1);
  EXPECT_EQ(w->ops[2].transfer, 7);
}

TEST(LaunchWaitsTest, CopyEngineLaunchWithOnlyTailsStillGetsAControlCta) {
  CopyProgram empty;
  absl::StatusOr<LaunchWaits> w = BuildLaunchWaits(1, &empty, {}, {{0, 0, 4}}, {}, Words(), 4096);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->control_cta);
  ASSERT_EQ(w->ops.size(), 1u);
  EXPECT_EQ(w->ops[0].kind, kTailWait);
}

// The inter-node proxy's "chunks copied out" word is a tail of the kernel on both backends, at
// the address given, never a gate or a guard (no stream may wait for the proxy: its own copies
// would queue behind that wait on a shared hardware queue).
TEST(LaunchWaitsTest, ProxyEpochWordsAreTailsOnBothBackends) {
  const uint64_t proxy_word = 0xc000040ull;
  CopyProgram empty;
  const CopyProgram* programs[] = {nullptr, &empty};
  for (const CopyProgram* program : programs) {
    absl::StatusOr<LaunchWaits> w =
        BuildLaunchWaits(3, program, {}, {{0, 1, 4}}, {}, Words(), 4096, {proxy_word});
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->ops.size(), 2u);
    const LaunchWaitOp& op = w->ops[1];
    EXPECT_EQ(Addr(op), proxy_word);
    EXPECT_EQ(op.kind, kTailWait);
    EXPECT_EQ(op.word_kind, static_cast<int>(WordKind::kProxyEpoch));
    EXPECT_EQ(op.peer, 3);
    EXPECT_EQ(w->control_cta, program != nullptr);
  }
}

TEST(LaunchWaitsTest, TooManyGatesAreRefusedNamingTheCapacity) {
  const plan::Plan p = Template("allgather.push", 4, 8);
  absl::StatusOr<CopyProgram> prog = BuildCopyProgram(p, 0, FakeBuffers());
  ASSERT_TRUE(prog.ok());
  ASSERT_GT(prog->steps.size(), 3u);
  absl::StatusOr<LaunchWaits> w = BuildLaunchWaits(0, &*prog, {}, {}, {}, Words(), 2);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("more than 2 steps"));
}

TEST(LaunchWaitsTest, TimeoutRecordsNameTheWordAndThePeer) {
  WaitTimeoutRecord r{};
  r.timed_out = kTimeoutRecordFilled;
  r.rank = 2;
  r.tile = -1;
  r.peer = 1;
  r.expected = 7;
  r.seen = 6;
  r.waited_ns = 2'000'000'000ull;
  r.what = (kGuardWait + 1) | (static_cast<int>(WordKind::kEntered) << 4);
  EXPECT_THAT(DescribeTimeout(r), HasSubstr("rank 2 waited 2000 ms for rank 1 to enter launch 7 "
                                            "before writing into its buffers"));
  r.what = (kTailWait + 1) | (static_cast<int>(WordKind::kSignal) << 4);
  r.signal = 4;
  r.chunk = 12;
  EXPECT_THAT(DescribeTimeout(r),
              HasSubstr("signal 4 (transfer 12) from rank 1 before the launch may end"));
  r.what = (kTailWait + 1) | (static_cast<int>(WordKind::kDrained) << 4);
  EXPECT_THAT(DescribeTimeout(r), HasSubstr("rank 1 to finish pulling from rank 2"));
  r.what = (kTailWait + 1) | (static_cast<int>(WordKind::kProxyEpoch) << 4);
  EXPECT_THAT(DescribeTimeout(r), HasSubstr("rank 2 waited 2000 ms for its inter-node proxy to copy "
                                            "out this launch's chunks for other nodes before the "
                                            "launch may end"));
  r.what = 0;
  r.tile = 5;
  EXPECT_THAT(DescribeTimeout(r), HasSubstr("from rank 1: expected epoch 7, saw 6 (tile 5"));
}

// A launch the device counts (captured in the caller's graph) copies each signal's and drained
// word's value from a gate word: every template the copy engine runs has one for every step
// that writes, its own gate where it has one.
TEST(LaunchWaitsTest, EveryWritingCopyStepHasAGateHoldingTheEpoch) {
  for (const char* name :
       {"allgather.push", "allgather.pull", "allgather.ring", "allgather.biring"}) {
    for (int world : {2, 3, 4, 8}) {
      for (int chunks : {1, 2, 4}) {
        const plan::Plan p = Template(name, world, chunks);
        for (int r = 0; r < world; ++r) {
          SCOPED_TRACE(::testing::Message()
                       << name << " world " << world << " chunks " << chunks << " rank " << r);
          absl::StatusOr<CopyProgram> prog = BuildCopyProgram(p, r, FakeBuffers());
          ASSERT_TRUE(prog.ok()) << prog.status();
          absl::StatusOr<LaunchWaits> w = BuildLaunchWaits(r, &*prog, {}, {}, {}, Words(), 4096);
          ASSERT_TRUE(w.ok()) << w.status();
          absl::StatusOr<std::vector<int>> sources = EpochSourceGates(*prog, w->step_gate);
          ASSERT_TRUE(sources.ok()) << sources.status();
          for (size_t i = 0; i < prog->steps.size(); ++i) {
            const CopyStep& step = prog->steps[i];
            if (w->step_gate[i] >= 0) {
              EXPECT_EQ((*sources)[i], w->step_gate[i]);
            }
            if (step.signal >= 0 || step.drained_rank >= 0) {
              EXPECT_GE((*sources)[i], 0);
            }
          }
        }
      }
    }
  }
}

// The rule on a hand-made program: the channel's earlier gate, then a dependency's; a writing
// step with neither is named.
TEST(LaunchWaitsTest, EpochSourcesFollowChannelsAndDependencies) {
  CopyProgram prog;
  prog.rank = 1;
  prog.num_channels = 2;
  prog.steps.resize(4);
  prog.steps[0] = CopyStep{.transfer = 10, .channel = 0, .signal = 0};
  prog.steps[1] = CopyStep{.transfer = 11, .channel = 0, .signal = 1};
  prog.steps[2] = CopyStep{.transfer = 12, .channel = 1, .after_steps = {1}, .drained_rank = 0};
  prog.steps[3] = CopyStep{.transfer = 13, .channel = 1, .signal = 2};
  absl::StatusOr<std::vector<int>> sources = EpochSourceGates(prog, {5, -1, -1, 7});
  ASSERT_TRUE(sources.ok()) << sources.status();
  EXPECT_EQ(*sources, (std::vector<int>{5, 5, 5, 7}));

  prog.steps[2].after_steps.clear();  // now nothing before step 2 on channel 1 holds the epoch
  sources = EpochSourceGates(prog, {5, -1, -1, 7});
  ASSERT_FALSE(sources.ok());
  EXPECT_EQ(sources.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sources.status().message(), HasSubstr("transfer 12 writes a drained word"));
}

// A word counts as reached at its epoch and a little past it, never when launches left it
// behind, however far (the cyclic >= read one more than 2^31 launches behind as ahead).
TEST(LaunchWaitsTest, AWordLeftBehindIsNeverReached) {
  const uint32_t e = 1000;
  EXPECT_TRUE(EpochReached(e, e));
  EXPECT_TRUE(EpochReached(e + 1, e));
  EXPECT_TRUE(EpochReached(e + kEpochLead - 1, e));
  EXPECT_FALSE(EpochReached(e - 1, e));
  EXPECT_FALSE(EpochReached(0, 1));  // a word no launch wrote yet
  for (uint32_t behind : {1u << 20, (1u << 31) - 1, (1u << 31) + 1, 3u << 30}) {
    EXPECT_FALSE(EpochReached(e - behind, e)) << behind << " launches behind";
  }
  EXPECT_TRUE(EpochReached(0xffffffffu, 0xfffffff0u));  // across the wrap
  EXPECT_TRUE(EpochReached(3, 0xfffffffeu));
}

// Epochs never take the value 0 (zeroed words mean "not yet"), and the inter-node executor's
// 64-bit epochs keep growing through the 32-bit count's wrap.
TEST(LaunchWaitsTest, EpochsSkipZeroAndExtendPastTheWrap) {
  EXPECT_EQ(Group::NextEpoch(5), 6u);
  EXPECT_EQ(Group::NextEpoch(0xffffffffu), 1u);
  uint64_t e = 0xfffffff0u;
  e = ExtendEpoch(e, 0xfffffffeu);
  EXPECT_EQ(e, 0xfffffffeull);
  e = ExtendEpoch(e, 0xffffffffu);
  e = ExtendEpoch(e, Group::NextEpoch(0xffffffffu));  // the group skips 0
  EXPECT_EQ(e, 0x100000001ull);
  e = ExtendEpoch(e, 2);
  EXPECT_EQ(e, 0x100000002ull);
}

// Host-epoch gates released long ago are rewritten before a launch awaits them with GEQ; gates
// the last launches released are left alone.
TEST(LaunchWaitsTest, GatesReleasedLongAgoAreRefreshed) {
  EXPECT_TRUE(StaleGates({}, 4, 5).empty());  // a new group: every gate reads 0, below epoch 5
  const std::vector<uint32_t> released = {100, 7, 100};
  EXPECT_TRUE(StaleGates(released, 3, 101).empty());
  const uint32_t later = 99 + kGateRefreshAge;  // one launch short of gates 0 and 2
  EXPECT_EQ(StaleGates(released, 4, later), (std::vector<int>{1, 3}));
  EXPECT_EQ(StaleGates(released, 4, later + 1), (std::vector<int>{0, 1, 2, 3}));
}

// The host reads the record while kernels may still fill it: the fields count only once the
// record says they are filled.
TEST(LaunchWaitsTest, TimeoutRecordIsReadOnlyOnceFilled) {
  WaitTimeoutRecord r{};
  EXPECT_TRUE(ReadTimeoutRecord(r).ok());

  r.timed_out = kTimeoutRecordClaimed;  // claimed by a wait that never finishes filling it
  r.peer = 3;
  absl::Status half = ReadTimeoutRecord(r, absl::Milliseconds(1));
  EXPECT_EQ(half.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(half.message(), HasSubstr("still being written"));
  EXPECT_THAT(half.message(), ::testing::Not(HasSubstr("rank 3")));

  // Filled by another thread while the reader waits: the reader sees every field.
  WaitTimeoutRecord filling{};
  filling.timed_out = kTimeoutRecordClaimed;
  std::thread writer([&filling] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    volatile WaitTimeoutRecord* v = &filling;
    v->rank = 2;
    v->tile = 5;
    v->peer = 1;
    v->expected = 7;
    v->seen = 6;
    std::atomic_thread_fence(std::memory_order_release);
    v->timed_out = kTimeoutRecordFilled;
  });
  absl::Status read = ReadTimeoutRecord(filling, absl::Seconds(30));
  writer.join();
  EXPECT_EQ(read.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(read.message(), HasSubstr("from rank 1: expected epoch 7, saw 6 (tile 5"));
}

}  // namespace
}  // namespace syncopate::cuda
