// Integration: PlanExecutor's device mode (ExecutorOptions::device) on CPUs. Four forked rank
// processes (2 "nodes" x 2 ranks, node map {0,0,1,1}) over real UCX on loopback; a host-memory
// FakeDeviceSide stands in for the GPU: its "device" buffers are host arrays apart from the
// executor's host copies, a delayed "compute" writes the rank's own shard and delayed
// "intra-node backends" write what intra-node transfers deliver and set their device signals,
// the way the fused kernel and CUDA IPC copies would. The executor must carry exactly the
// inter-node chunks, fetch each source only once the device has it, deliver each arrival with
// its epoch, and hold its sends until the receiver has started the epoch (epoch handshake):
// epochs run back to back with no barrier, a slow rank poisons its host copies between them.
//
// Ranks are forked without exec (ForkedBootstrap: rank 0 runs the bootstrap hub); the test
// process itself never initialises UCX, so it stays single-threaded for every fork. Each rank
// reports lines through a pipe; the parent asserts on them. A guard kills ranks that hang.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "gtest/gtest.h"
#include "runtime/ucx/device_side.h"
#include "runtime/ucx/forked_bootstrap.h"
#include "runtime/ucx/plan_executor.h"
#include "runtime/ucx/transport.h"
#include "tests/testing/plan_data.h"

namespace syncopate::ucx {
namespace {

constexpr int kWorld = 4;
constexpr int kRanksPerNode = 2;

enum class Fault { kNone, kFetchFails, kExitInFetch };

struct Scenario {
  std::string templ = "allgather.two_level";
  int iters = 3;
  absl::Duration timeout = absl::Seconds(10);
  bool produced_by_compute = false;
  // Rank that sleeps between epochs, after poisoning nothing yet: peers are then surely ahead,
  // and only the epoch handshake keeps their next chunks out of its host copies until it poisons
  // them and starts the epoch.
  int slow_rank = 2;
  Fault fault = Fault::kNone;
  int fault_rank = 0;
  uint64_t fault_epoch = 2;
};

plan::Plan BuildPlan(const Scenario& s) {
  plan::TemplateParams p = testing::PlanParams(kWorld, kRanksPerNode, 32, 48, 2);
  p.produced_by_compute = s.produced_by_compute;
  absl::StatusOr<plan::Plan> plan = plan::BuildTemplate(s.templ, p);
  if (!plan.ok()) {
    ADD_FAILURE() << plan.status();
    return {};
  }
  return *plan;
}

bool CrossNode(const NodeMap& nodes, const plan::Transfer& t) {
  return nodes[t.rank] != nodes[t.peer];
}

// Deps of `t` that land on `rank`'s node: what the executor must hand to the device.
std::vector<int> ExpectedDeviceDeps(const plan::Plan& plan, const NodeMap& nodes, int rank,
                                    const plan::Transfer& t) {
  std::vector<const plan::Transfer*> by_id = plan.TransfersById();
  std::vector<int> deps;
  for (int d : t.deps) {
    if (nodes[by_id[d]->dst_rank()] == nodes[rank]) deps.push_back(d);
  }
  return deps;
}

// ---- The fake device ----

// What the rank's buffers hold once the epoch is complete (NaN where nothing is expected).
std::map<std::string, std::vector<float>> ExpectedImage(const plan::Plan& plan, int rank,
                                                        int iter) {
  std::map<std::string, std::vector<float>> image;
  for (const plan::BufferSpec& b : plan.buffers) {
    image[b.name].assign(b.NumElements(), std::nanf(""));
  }
  for (const plan::Expectation& e : plan.postcondition) {
    if (e.rank != rank || e.sources.size() != 1) continue;  // copies only (allgather)
    const plan::Contribution& c = e.sources[0];
    std::vector<int64_t> dst = e.region.Offsets(plan.FindBuffer(e.buffer)->strides);
    std::vector<int64_t> src = c.region.Offsets(plan.FindBuffer(c.buffer)->strides);
    for (size_t k = 0; k < dst.size(); ++k) {
      image[e.buffer][dst[k]] = testing::Initial(c.rank, c.buffer, src[k], iter);
    }
  }
  return image;
}

class FakeDeviceSide : public DeviceSide {
 public:
  struct Fetch {
    int id;
    uint64_t epoch;
    std::vector<int> device_deps;
  };
  struct Delivery {
    int id;
    uint64_t epoch;
  };

  FakeDeviceSide(const plan::Plan& plan, int rank, NodeMap nodes, const Scenario& scenario)
      : plan_(plan), rank_(rank), nodes_(std::move(nodes)), scenario_(scenario) {
    by_id_ = plan_.TransfersById();
    int signals = 1;
    for (const plan::Transfer* t : by_id_) {
      if (t->dst_rank() == rank_) signals = std::max(signals, t->signal + 1);
    }
    signal_.assign(signals, 0);
    for (const plan::BufferSpec& b : plan_.buffers) device_[b.name].resize(b.NumElements());
  }
  ~FakeDeviceSide() override { JoinBackends(); }

  void Attach(PlanExecutor* executor) { executor_ = executor; }
  testing::BufferData Device() {
    return [this](const std::string& name) { return device_.at(name).data(); };
  }

  // Epoch `epoch` (iteration `iter`) begins on the device: buffers garbage but the rank's
  // initial data — which, when the launch's computation produces it (produced_by_compute), only
  // appears a little later — then what intra-node transfers into this rank deliver (data, then
  // their device signals).
  void StartEpoch(uint64_t epoch, int iter) {
    JoinBackends();
    auto write_initial = [this, iter] {
      for (const auto& [name, region] : plan_.ranks[rank_].initial) {
        for (int64_t off : region.Offsets(plan_.FindBuffer(name)->strides)) {
          device_[name][off] = testing::Initial(rank_, name, off, iter);
        }
      }
    };
    {
      absl::MutexLock lock(&mu_);
      for (const plan::BufferSpec& b : plan_.buffers) {
        std::fill(device_[b.name].begin(), device_[b.name].end(),
                  testing::Garbage(rank_, iter));
      }
      if (!scenario_.produced_by_compute) write_initial();
    }
    backends_ = std::thread([this, epoch, iter, write_initial] {
      std::map<std::string, std::vector<float>> image = ExpectedImage(plan_, rank_, iter);
      absl::SleepFor(absl::Milliseconds(2));
      {
        absl::MutexLock lock(&mu_);
        if (scenario_.produced_by_compute) write_initial();
        compute_epoch_ = epoch;
      }
      absl::SleepFor(absl::Milliseconds(3));
      for (const plan::Transfer* t : by_id_) {
        if (t->dst_rank() != rank_ || CrossNode(nodes_, *t)) continue;
        absl::MutexLock lock(&mu_);
        std::vector<float>& d = device_[t->dst_buffer];
        for (int64_t off : t->dst_region.Offsets(plan_.FindBuffer(t->dst_buffer)->strides)) {
          d[off] = image[t->dst_buffer][off];
        }
        if (t->signal >= 0) signal_[t->signal] = epoch;
      }
    });
  }
  void JoinBackends() {
    if (backends_.joinable()) backends_.join();
  }

  absl::Status FetchSource(const plan::Transfer& t, const std::vector<int>& device_deps,
                           uint64_t epoch, const std::vector<ByteRange>& ranges, void* host,
                           absl::Time deadline) override {
    {
      absl::MutexLock lock(&mu_);
      fetches_.push_back({t.id, epoch, device_deps});
    }
    if (rank_ == scenario_.fault_rank && epoch == scenario_.fault_epoch) {
      if (scenario_.fault == Fault::kExitInFetch) ::_exit(3);
      if (scenario_.fault == Fault::kFetchFails) {
        return absl::DeadlineExceededError(absl::StrCat(
            "fake device: source of transfer ", t.id, " never became ready (injected)"));
      }
    }
    if (executor_ == nullptr || host != executor_->buffer(t.src_buffer)) {
      return absl::InternalError(absl::StrCat("fake device: FetchSource of transfer ", t.id,
                                              " got a host address that is not the executor's"
                                              " copy of '", t.src_buffer, "'"));
    }
    for (int d : device_deps) {
      if (by_id_[d]->dst_rank() != rank_) {
        return absl::FailedPreconditionError(absl::StrCat(
            "fake device: dependency ", d, " lands on rank ", by_id_[d]->dst_rank(),
            ", not simulated"));
      }
    }
    absl::MutexLock lock(&mu_);
    auto ready = [&] {
      if (t.after_compute && compute_epoch_ < epoch) return false;
      for (int d : device_deps) {
        if (signal_[by_id_[d]->signal] < epoch) return false;
      }
      return true;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("fake device: source of transfer ", t.id,
                                                      " not ready in epoch ", epoch));
    }
    const char* src = reinterpret_cast<const char*>(device_.at(t.src_buffer).data());
    for (const ByteRange& r : ranges) {
      std::memcpy(static_cast<char*>(host) + r.offset, src + r.offset, r.length);
    }
    return absl::OkStatus();
  }

  absl::Status Deliver(const plan::Transfer& t, uint64_t epoch,
                       const std::vector<ByteRange>& ranges, const void* host) override {
    if (executor_ == nullptr || host != executor_->buffer(t.dst_buffer)) {
      return absl::InternalError(absl::StrCat("fake device: Deliver of transfer ", t.id,
                                              " got a host address that is not the executor's"
                                              " copy of '", t.dst_buffer, "'"));
    }
    absl::MutexLock lock(&mu_);
    deliveries_.push_back({t.id, epoch});
    char* dst = reinterpret_cast<char*>(device_.at(t.dst_buffer).data());
    for (const ByteRange& r : ranges) {
      std::memcpy(dst + r.offset, static_cast<const char*>(host) + r.offset, r.length);
    }
    if (t.signal >= 0 && t.signal < static_cast<int>(signal_.size())) signal_[t.signal] = epoch;
    return absl::OkStatus();
  }

  absl::Status Drain(absl::Time deadline) override {
    absl::MutexLock lock(&mu_);
    ++drains_;
    return absl::OkStatus();
  }

  std::vector<Fetch> fetches() {
    absl::MutexLock lock(&mu_);
    return fetches_;
  }
  std::vector<Delivery> deliveries() {
    absl::MutexLock lock(&mu_);
    return deliveries_;
  }
  uint64_t signal(int s) {
    absl::MutexLock lock(&mu_);
    return signal_[s];
  }
  int drains() {
    absl::MutexLock lock(&mu_);
    return drains_;
  }

 private:
  const plan::Plan& plan_;
  const int rank_;
  const NodeMap nodes_;
  const Scenario scenario_;
  std::vector<const plan::Transfer*> by_id_;
  PlanExecutor* executor_ = nullptr;
  std::thread backends_;
  absl::Mutex mu_;
  std::map<std::string, std::vector<float>> device_;  // elements change under mu_
  std::vector<uint64_t> signal_ ABSL_GUARDED_BY(mu_);
  uint64_t compute_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Fetch> fetches_ ABSL_GUARDED_BY(mu_);
  std::vector<Delivery> deliveries_ ABSL_GUARDED_BY(mu_);
  int drains_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---- One rank (a forked process) ----

void Say(int fd, const std::string& line) {
  std::string l = line + "\n";
  ssize_t n = ::write(fd, l.data(), l.size());  // one write per line: never torn
  (void)n;
}

// Checks epoch `epoch`'s record: which transfers were fetched and delivered, with what.
absl::Status CheckEpoch(const plan::Plan& plan, const NodeMap& nodes, int rank, uint64_t epoch,
                        FakeDeviceSide& fake, PlanExecutor& ex, int out) {
  std::set<int> want_out, want_in;
  for (const plan::Transfer* t : plan.TransfersById()) {
    if (!CrossNode(nodes, *t)) continue;
    if (t->rank == rank) want_out.insert(t->id);
    if (t->dst_rank() == rank) want_in.insert(t->id);
  }
  if (ex.num_local_transfers() != static_cast<int>(want_out.size()) ||
      ex.num_incoming() != static_cast<int>(want_in.size())) {
    return absl::InternalError(absl::StrCat(
        "rank ", rank, " runs ", ex.num_local_transfers(), " and receives ", ex.num_incoming(),
        " transfers; inter-node: ", want_out.size(), " and ", want_in.size()));
  }
  std::multiset<int> fetched, delivered;
  const std::vector<const plan::Transfer*> by_id = plan.TransfersById();
  for (const FakeDeviceSide::Fetch& f : fake.fetches()) {
    if (f.epoch != epoch) continue;
    fetched.insert(f.id);
    const std::vector<int> want = ExpectedDeviceDeps(plan, nodes, rank, *by_id[f.id]);
    std::vector<int> got = f.device_deps;
    std::sort(got.begin(), got.end());
    std::vector<int> want_sorted = want;
    std::sort(want_sorted.begin(), want_sorted.end());
    if (got != want_sorted) {
      return absl::InternalError(absl::StrCat("epoch ", epoch, " transfer ", f.id,
                                              ": device deps [", absl::StrJoin(got, ","),
                                              "], expected [", absl::StrJoin(want_sorted, ","),
                                              "]"));
    }
    Say(out, absl::StrCat("FETCH epoch=", epoch, " t=", f.id, " peer=", by_id[f.id]->peer,
                          " deps=", absl::StrJoin(got, ",")));
  }
  for (const FakeDeviceSide::Delivery& d : fake.deliveries()) {
    if (d.epoch == epoch) delivered.insert(d.id);
  }
  if (fetched != std::multiset<int>(want_out.begin(), want_out.end())) {
    return absl::InternalError(absl::StrCat("epoch ", epoch, ": fetched [",
                                            absl::StrJoin(fetched, ","), "], inter-node sends [",
                                            absl::StrJoin(want_out, ","), "]"));
  }
  if (delivered != std::multiset<int>(want_in.begin(), want_in.end())) {
    return absl::InternalError(absl::StrCat("epoch ", epoch, ": delivered [",
                                            absl::StrJoin(delivered, ","),
                                            "], inter-node arrivals [",
                                            absl::StrJoin(want_in, ","), "]"));
  }
  for (int id : want_in) {
    if (fake.signal(by_id[id]->signal) != epoch) {
      return absl::InternalError(absl::StrCat("epoch ", epoch, ": device signal of transfer ",
                                              id, " is ", fake.signal(by_id[id]->signal)));
    }
  }
  if (fake.drains() < static_cast<int>(epoch)) {
    return absl::InternalError(absl::StrCat("epoch ", epoch, ": only ", fake.drains(),
                                            " drains"));
  }
  return absl::OkStatus();
}

// Lines: "READY", "FETCH ...", "EPOCH <e> OK", "ERROR epoch=<e> code=<name> elapsed_ms=<ms>
// <message>" (Execute failed), "CHECKFAIL <message>" (the data or record was wrong), "DONE".
// Exit code 0 when every epoch passed, 1 otherwise.
int RunRank(const Scenario& s, const ForkedBootstrap& forked, int rank, int out) {
  const plan::Plan plan = BuildPlan(s);
  const NodeMap nodes = NodesFromRanksPerNode(kWorld, kRanksPerNode);
  std::unique_ptr<TcpBootstrapHub> hub;
  absl::StatusOr<std::unique_ptr<TcpBootstrap>> bootstrap =
      forked.Join(rank, kWorld, absl::Now() + absl::Seconds(30), hub);
  if (!bootstrap.ok()) {
    Say(out, "CHECKFAIL bootstrap: " + bootstrap.status().ToString());
    return 1;
  }
  TransportOptions topts;
  topts.name = absl::StrCat("rank", rank);
  topts.ucx_config = {{"TLS", "tcp"}};
  absl::StatusOr<std::unique_ptr<UcxTransport>> transport = UcxTransport::Create(topts);
  if (!transport.ok()) {
    Say(out, "CHECKFAIL transport: " + transport.status().ToString());
    return 1;
  }
  FakeDeviceSide fake(plan, rank, nodes, s);
  std::unique_ptr<PlanExecutor> executor;
  bool ok = true;
  absl::Status status = [&]() -> absl::Status {
    ExecutorOptions eopts;
    eopts.transfer_timeout = s.timeout;
    eopts.device = &fake;
    ASSIGN_OR_RETURN(executor, PlanExecutor::Create(plan, rank, nodes, transport->get(), eopts));
    fake.Attach(executor.get());
    RETURN_IF_ERROR((*transport)->Connect(**bootstrap, absl::Now() + absl::Seconds(30)));
    RETURN_IF_ERROR((*bootstrap)->Barrier(absl::Now() + absl::Seconds(30)));
    Say(out, "READY");
    // No barrier between epochs: the executor's epoch handshake orders them.
    for (int it = 1; it <= s.iters; ++it) {
      if (rank == s.slow_rank) absl::SleepFor(absl::Milliseconds(50));
      // Poison the host copies: only FetchSource and arriving chunks may fill them, and no peer
      // may put this epoch's chunks before this rank starts it.
      for (const plan::BufferSpec& b : plan.buffers) {
        auto* host = static_cast<float*>(executor->buffer(b.name));
        std::fill(host, host + b.NumElements(), -7.0e6f);
      }
      fake.StartEpoch(it, it);
      const absl::Time start = absl::Now();
      absl::Status run = executor->Execute(it);
      const int64_t elapsed_ms = absl::ToInt64Milliseconds(absl::Now() - start);
      fake.JoinBackends();
      if (!run.ok()) {
        Say(out, absl::StrCat("ERROR epoch=", it, " code=", absl::StatusCodeToString(run.code()),
                              " elapsed_ms=", elapsed_ms, " ", run.message()));
        ok = false;
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(testing::CheckRank(plan, rank, it, fake.Device()));
      RETURN_IF_ERROR(CheckEpoch(plan, nodes, rank, it, fake, *executor, out));
      Say(out, absl::StrCat("EPOCH ", it, " OK"));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    Say(out, "CHECKFAIL " + status.ToString());
    ok = false;
  }
  // Nobody tears down while a peer may still flush to it; a failed group gives up at the
  // deadline (rank 0's hub may be gone).
  (void)(*bootstrap)->Barrier(absl::Now() + s.timeout * 2);
  executor.reset();
  (void)(*transport)->Shutdown();
  Say(out, "DONE");
  return ok ? 0 : 1;
}

// ---- The parent ----

struct RankOutcome {
  int exit_code = -1;
  int term_signal = 0;
  std::string output;
  std::vector<std::string> Lines(absl::string_view prefix) const {
    std::vector<std::string> lines;
    for (absl::string_view l : absl::StrSplit(output, '\n')) {
      if (absl::StartsWith(l, prefix)) lines.emplace_back(l);
    }
    return lines;
  }
  std::string Line(absl::string_view prefix) const {
    std::vector<std::string> l = Lines(prefix);
    return l.empty() ? "" : l[0];
  }
};

// Forks kWorld ranks running `s`, collects their lines and exit codes; kills them at `guard`.
std::vector<RankOutcome> RunGroup(const Scenario& s, absl::Duration guard = absl::Seconds(120)) {
  std::vector<RankOutcome> out(kWorld);
  absl::StatusOr<ForkedBootstrap> forked = ForkedBootstrap::Create();
  if (!forked.ok()) {
    ADD_FAILURE() << forked.status();
    return out;
  }
  std::vector<pid_t> pids(kWorld, -1);
  std::vector<int> fds(kWorld, -1);
  for (int r = 0; r < kWorld; ++r) {
    int p[2];
    if (::pipe(p) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return out;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
      ::_exit(RunRank(s, *forked, r, p[1]));
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  const absl::Time kill_at = absl::Now() + guard;
  int alive = kWorld;
  std::vector<bool> open(kWorld, true);
  while (alive > 0 || std::count(open.begin(), open.end(), true) > 0) {
    std::vector<pollfd> polled;
    std::vector<int> who;
    for (int r = 0; r < kWorld; ++r) {
      if (open[r]) {
        polled.push_back({fds[r], POLLIN, 0});
        who.push_back(r);
      }
    }
    if (!polled.empty() && ::poll(polled.data(), polled.size(), 20) > 0) {
      for (size_t i = 0; i < polled.size(); ++i) {
        if (!(polled[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[4096];
        const ssize_t n = ::read(polled[i].fd, buf, sizeof(buf));
        if (n > 0) {
          out[who[i]].output.append(buf, n);
        } else if (n == 0 || errno != EINTR) {
          ::close(polled[i].fd);
          open[who[i]] = false;
        }
      }
    } else if (polled.empty()) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    for (int r = 0; r < kWorld; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        if (WIFEXITED(status)) out[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) out[r].term_signal = WTERMSIG(status);
        pids[r] = -1;
        --alive;
      }
    }
    if (absl::Now() > kill_at) {
      for (int r = 0; r < kWorld; ++r) {
        if (pids[r] > 0) {
          ADD_FAILURE() << "rank " << r << " hung; killed by the guard:\n" << out[r].output;
          ::kill(pids[r], SIGKILL);
        }
      }
      for (int r = 0; r < kWorld; ++r) {
        if (pids[r] > 0) ::waitpid(pids[r], nullptr, 0);
        if (open[r]) ::close(fds[r]);
      }
      break;
    }
  }
  return out;
}

// allgather.two_level: each rank sends its own shard to the same local index on the other node
// and forwards nothing over UCX; intra-node pushes and forwards are the device's. The own shard
// is produced by the launch's computation (after_compute), which the fake delays.
TEST(DeviceModeExecutorTest, TwoLevelAllGatherCarriesOnlyInterNodeChunks) {
  Scenario s;
  s.templ = "allgather.two_level";
  s.produced_by_compute = true;
  std::vector<RankOutcome> results = RunGroup(s);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_EQ(results[r].Lines("EPOCH ").size(), 3u) << results[r].output;
    EXPECT_EQ(results[r].Line("CHECKFAIL"), "") << results[r].output;
    EXPECT_EQ(results[r].Line("ERROR"), "") << results[r].output;
    // Two chunks per shard: two inter-node sends per rank and epoch.
    EXPECT_EQ(results[r].Lines("FETCH epoch=1 ").size(), 2u) << results[r].output;
  }
}

// allgather.ring over {0,0,1,1}: rank 1's forwards to rank 2 depend on chunks rank 0 pushed to
// rank 1 inside node 0; the executor must hand those to the device (FetchSource's device_deps)
// instead of waiting for a host signal nobody sets.
TEST(DeviceModeExecutorTest, RingForwardAcrossNodesWaitsOnTheDeviceForIntraNodeDeps) {
  Scenario s;
  s.templ = "allgather.ring";
  const plan::Plan plan = BuildPlan(s);
  const NodeMap nodes = NodesFromRanksPerNode(kWorld, kRanksPerNode);
  std::vector<RankOutcome> results = RunGroup(s);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_EQ(results[r].Lines("EPOCH ").size(), 3u) << results[r].output;
  }
  // Every forward rank 1 -> rank 2 names its intra-node dependency, in every epoch.
  int forwards = 0;
  for (const plan::Transfer* t : plan.TransfersById()) {
    if (t->rank != 1 || t->peer != 2 || t->deps.empty()) continue;
    const std::vector<int> want = ExpectedDeviceDeps(plan, nodes, 1, *t);
    ASSERT_FALSE(want.empty()) << "transfer " << t->id;
    for (int e = 1; e <= 3; ++e) {
      EXPECT_EQ(results[1].Line(absl::StrCat("FETCH epoch=", e, " t=", t->id, " ")),
                absl::StrCat("FETCH epoch=", e, " t=", t->id, " peer=2 deps=",
                             absl::StrJoin(want, ",")))
          << results[1].output;
    }
    ++forwards;
  }
  EXPECT_GT(forwards, 0);
}

// Create refuses what device mode cannot carry (run in a forked child: the test process stays
// free of UCX so that later forks are safe).
TEST(DeviceModeExecutorTest, CreateRefusesReductionsPullsAndHostOptions) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(p[0]);
    Scenario s;
    TransportOptions topts;
    topts.ucx_config = {{"TLS", "tcp"}};
    absl::StatusOr<std::unique_ptr<UcxTransport>> transport = UcxTransport::Create(topts);
    if (!transport.ok()) {
      Say(p[1], "TRANSPORT " + transport.status().ToString());
      ::_exit(1);
    }
    const NodeMap nodes = NodesFromRanksPerNode(kWorld, kRanksPerNode);
    for (const char* templ : {"reducescatter.two_level", "allgather.pull"}) {
      s.templ = templ;
      const plan::Plan plan = BuildPlan(s);
      FakeDeviceSide fake(plan, 0, nodes, s);
      ExecutorOptions eopts;
      eopts.device = &fake;
      absl::StatusOr<std::unique_ptr<PlanExecutor>> ex =
          PlanExecutor::Create(plan, 0, nodes, transport->get(), eopts);
      Say(p[1], absl::StrCat(templ, " ", ex.ok() ? "OK" : ex.status().ToString()));
      eopts.run_intra_node = true;
      ex = PlanExecutor::Create(plan, 0, nodes, transport->get(), eopts);
      Say(p[1], absl::StrCat("intra ", ex.ok() ? "OK" : ex.status().ToString()));
    }
    (void)(*transport)->Shutdown();
    ::_exit(0);
  }
  ::close(p[1]);
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0) output.append(buf, n);
  ::close(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  RankOutcome o{0, 0, output};
  const std::string rs = o.Line("reducescatter.two_level ");
  EXPECT_TRUE(absl::StrContains(rs, "UNIMPLEMENTED")) << output;
  EXPECT_TRUE(absl::StrContains(rs, "plain inter-node pushes only")) << output;
  EXPECT_TRUE(absl::StrContains(rs, "(push+sum chunk ")) << output;  // names the transfer
  EXPECT_TRUE(absl::StrContains(rs, " transfer ")) << output;
  const std::string pull = o.Line("allgather.pull ");
  EXPECT_TRUE(absl::StrContains(pull, "UNIMPLEMENTED")) << output;
  EXPECT_TRUE(absl::StrContains(pull, "(pull chunk ")) << output;
  for (const std::string& l : o.Lines("intra ")) {
    EXPECT_TRUE(absl::StrContains(l, "INVALID_ARGUMENT")) << output;
    EXPECT_TRUE(absl::StrContains(l, "run_intra_node")) << output;
  }
  EXPECT_EQ(o.Lines("intra ").size(), 2u) << output;
}

// Rank 0's device never readies a source in epoch 2 (FetchSource: DeadlineExceeded): rank 0's
// Execute returns that error, and rank 2, which expects rank 0's chunks, fails at its deadline
// naming rank 0. Ranks 1 and 3 exchange only with each other over UCX and finish.
TEST(DeviceModeExecutorTest, FailedFetchFailsThePeerAtItsDeadlineNamingTheRank) {
  Scenario s;
  s.templ = "allgather.two_level";
  s.timeout = absl::Seconds(2);
  s.fault = Fault::kFetchFails;
  s.fault_rank = 0;
  s.fault_epoch = 2;
  std::vector<RankOutcome> results = RunGroup(s);
  const std::string r0 = results[0].Line("ERROR");
  EXPECT_TRUE(absl::StartsWith(r0, "ERROR epoch=2 code=DEADLINE_EXCEEDED")) << results[0].output;
  EXPECT_TRUE(absl::StrContains(r0, "never became ready (injected)")) << results[0].output;
  EXPECT_TRUE(absl::StrContains(r0, "source not fetched from the device")) << results[0].output;
  const std::string r2 = results[2].Line("ERROR");
  EXPECT_TRUE(absl::StartsWith(r2, "ERROR epoch=2 code=DEADLINE_EXCEEDED")) << results[2].output;
  EXPECT_TRUE(absl::StrContains(r2, "rank 0 (")) << results[2].output;
  // Bounded: the incoming deadline (2 s) plus scheduling slack, not a hang.
  int64_t elapsed_ms = -1;
  for (absl::string_view word : absl::StrSplit(r2, ' ')) {
    if (absl::ConsumePrefix(&word, "elapsed_ms=")) (void)absl::SimpleAtoi(word, &elapsed_ms);
  }
  EXPECT_GE(elapsed_ms, 0) << r2;
  EXPECT_LT(elapsed_ms, 2 * 2000 + 2000) << r2;
  for (int r : {1, 3}) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
  }
  EXPECT_EQ(results[0].exit_code, 1);
  EXPECT_EQ(results[2].exit_code, 1);
}

// Rank 0's process exits inside FetchSource in epoch 2: every survivor that fails names it
// (rank 2 expected its chunks; the others learn of the exit from the transport), and at least
// rank 2 does fail; nobody hangs (RunGroup's guard).
TEST(DeviceModeExecutorTest, RankExitingMidEpochFailsThePeersNamingIt) {
  Scenario s;
  s.templ = "allgather.two_level";
  s.timeout = absl::Seconds(5);
  s.fault = Fault::kExitInFetch;
  s.fault_rank = 0;
  s.fault_epoch = 2;
  std::vector<RankOutcome> results = RunGroup(s);
  EXPECT_EQ(results[0].exit_code, 3) << results[0].output;
  // Epoch 2 as a rule; epoch 1 when rank 2 was still flushing its epoch-1 chunks to rank 0
  // (rank 0 had them all and moved on).
  const std::string r2 = results[2].Line("ERROR");
  EXPECT_TRUE(absl::StartsWith(r2, "ERROR epoch=2 ") || absl::StartsWith(r2, "ERROR epoch=1 "))
      << results[2].output;
  EXPECT_TRUE(absl::StrContains(r2, "rank 0 (")) << results[2].output;
  for (int r : {1, 3}) {
    const std::string line = results[r].Line("ERROR");
    if (!line.empty()) {
      EXPECT_TRUE(absl::StrContains(line, "rank 0 (")) << results[r].output;
    }
    EXPECT_EQ(results[r].Line("CHECKFAIL"), "") << results[r].output;
  }
}

}  // namespace
}  // namespace syncopate::ucx
