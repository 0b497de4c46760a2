// Host simulation of a plan (see simulate.h).
//
// Model: every rank owns dense host copies of every buffer (double storage whatever the dtype,
// row-major by coordinates; the spec's strides describe device layout and do not matter here) plus
// a validity bit per element. Initial regions hold deterministic pseudo-random values that depend
// only on (rank, buffer, element), and everything else starts invalid (NaN). A transfer with
// `after_compute` reads data the launch's computation produces; the simulator treats the
// computation as having produced that source region at the start, with the same deterministic
// values an initial region would hold.
//
// Execution: one std::thread per rank; each picks a random ready channel head (all deps
// completed), sleeps a random delay and executes it. Data moves happen under one mutex, so the
// simulator itself is race-free; racing plans show up as wrong results under some interleavings
// (ValidatePlan finds them statically). When every unfinished rank waits and nothing runs, the
// plan is deadlocked and reported at once; the deadline is a backstop.
//
// Thread-safety: SimulatePlan may be called concurrently; each call owns its state.
#include "core/plan/simulate.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/plan/validate.h"

namespace syncopate::plan {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Multiples of 1/8 in [-128, 128): exactly representable, so sums over 64 ranks stay exact.
double InitialValue(int rank, int buffer, int64_t element) {
  uint64_t h = SplitMix64(
      SplitMix64(SplitMix64(static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(buffer)) ^
      static_cast<uint64_t>(element));
  return static_cast<double>(static_cast<int64_t>(h % 2048) - 1024) / 8.0;
}

std::string Describe(const Transfer& t) {
  return absl::StrCat("rank ", t.rank, " transfer ", t.id, " (channel ", t.channel, ", chunk ",
                      t.chunk, ")");
}

std::string Coordinates(int64_t offset, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    idx[i] = shape[i] == 0 ? 0 : offset % shape[i];
    offset = shape[i] == 0 ? 0 : offset / shape[i];
  }
  return absl::StrCat("(", absl::StrJoin(idx, ","), ")");
}

struct HostBuffer {
  std::vector<double> values;
  std::vector<uint8_t> valid;
};

class Simulator {
 public:
  Simulator(const Plan& plan, const SimulationOptions& options)
      : plan_(plan), options_(options), by_id_(plan.TransfersById()) {}

  absl::StatusOr<SimulationReport> Run() {
    Initialize();
    std::vector<std::thread> threads;
    threads.reserve(plan_.world_size);
    active_ = plan_.world_size;
    for (int r = 0; r < plan_.world_size; ++r) threads.emplace_back([this, r] { RunRank(r); });
    for (std::thread& t : threads) t.join();
    if (!error_.ok()) return error_;
    SimulationReport report;
    report.transfers_executed = executed_;
    ASSIGN_OR_RETURN(report.elements_checked, CheckPostcondition());
    return report;
  }

 private:
  int BufferIndex(const std::string& name) const {
    for (size_t i = 0; i < plan_.buffers.size(); ++i) {
      if (plan_.buffers[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }

  // Writes the deterministic "produced" values into `region` and marks it valid.
  void Produce(int rank, int buffer, const Region& region) {
    HostBuffer& hb = data_[rank][buffer];
    for (int64_t off : region.Offsets(strides_[buffer])) {
      hb.values[off] = InitialValue(rank, buffer, off);
      hb.valid[off] = 1;
    }
  }

  void Initialize() {
    for (const BufferSpec& b : plan_.buffers) strides_.push_back(RowMajorStrides(b.shape));
    data_.resize(plan_.world_size);
    for (int r = 0; r < plan_.world_size; ++r) {
      for (const BufferSpec& b : plan_.buffers) {
        HostBuffer hb;
        hb.values.assign(b.NumElements(), std::numeric_limits<double>::quiet_NaN());
        hb.valid.assign(b.NumElements(), 0);
        data_[r].push_back(std::move(hb));
      }
      for (const auto& [buffer, region] : plan_.ranks[r].initial) {
        Produce(r, BufferIndex(buffer), region);
      }
    }
    for (const Transfer* t : by_id_) {
      if (t->after_compute) Produce(t->src_rank(), BufferIndex(t->src_buffer), t->src_region);
    }
    completed_.assign(by_id_.size(), 0);
  }

  // First dependency of `t` not completed yet, or -1. Requires mu_.
  int UnmetDep(const Transfer& t) const {
    for (int dep : t.deps) {
      if (!completed_[dep]) return dep;
    }
    return -1;
  }

  void Fail(absl::Status status) {  // Requires mu_.
    if (error_.ok()) error_ = std::move(status);
    cv_.notify_all();
  }

  absl::Status DeadlockError(int rank, const std::vector<size_t>& cursor) const {
    const auto& channels = plan_.ranks[rank].channels;
    for (size_t c = 0; c < channels.size(); ++c) {
      if (cursor[c] >= channels[c].size()) continue;
      const Transfer& t = channels[c][cursor[c]];
      const int dep = UnmetDep(t);
      if (dep < 0) continue;
      const Transfer& d = *by_id_[dep];
      return absl::FailedPreconditionError(
          absl::StrCat("deadlock: ", Describe(t), " waits for transfer ", dep, " (rank ", d.rank,
                       ", channel ", d.channel, ", chunk ", d.chunk, ") which never completes"));
    }
    return absl::FailedPreconditionError(absl::StrCat("deadlock on rank ", rank));
  }

  void RunRank(int rank) {
    std::mt19937_64 rng(SplitMix64(options_.seed * 1000003 + rank));
    const auto& channels = plan_.ranks[rank].channels;
    std::vector<size_t> cursor(channels.size(), 0);
    std::unique_lock<std::mutex> lock(mu_);
    while (error_.ok()) {
      std::vector<int> ready;
      bool pending = false;
      for (size_t c = 0; c < channels.size(); ++c) {
        if (cursor[c] >= channels[c].size()) continue;
        pending = true;
        if (UnmetDep(channels[c][cursor[c]]) < 0) ready.push_back(static_cast<int>(c));
      }
      if (!pending) break;
      if (ready.empty()) {
        // waiting_ counts the ranks that found nothing ready since the last progress; when that
        // is every unfinished rank, nobody can make progress any more.
        if (++waiting_ == active_) {
          Fail(DeadlockError(rank, cursor));
          break;
        }
        const uint64_t before = progress_;
        const bool woke = cv_.wait_for(lock, options_.deadline,
                                       [&] { return progress_ != before || !error_.ok(); });
        if (progress_ == before) --waiting_;  // else Progress() already reset the count
        if (!woke) {
          Fail(DeadlockError(rank, cursor));
          break;
        }
        continue;
      }
      const int c = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng)];
      const Transfer& t = channels[c][cursor[c]];
      lock.unlock();
      const int64_t max_us = options_.max_delay.count();
      if (max_us > 0) {
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int64_t>(0, max_us)(rng)));
      }
      lock.lock();
      if (!error_.ok()) break;
      absl::Status status = Execute(t);
      if (!status.ok()) {
        Fail(std::move(status));
        break;
      }
      ++cursor[c];
      completed_[t.id] = 1;
      ++executed_;
      Progress();
    }
    --active_;
    // A rank that finishes may leave every other rank waiting: let them re-check.
    Progress();
  }

  // Something changed: every waiting rank must re-check before a deadlock can be declared.
  // Requires mu_.
  void Progress() {
    ++progress_;
    waiting_ = 0;
    cv_.notify_all();
  }

  // Moves the data of one transfer. Requires mu_.
  absl::Status Execute(const Transfer& t) {
    const int sb = BufferIndex(t.src_buffer);
    const int db = BufferIndex(t.dst_buffer);
    const int src_rank = t.src_rank();
    const int dst_rank = t.dst_rank();
    HostBuffer& src = data_[src_rank][sb];
    HostBuffer& dst = data_[dst_rank][db];
    const std::vector<int64_t> src_off = t.src_region.Offsets(strides_[sb]);
    const std::vector<int64_t> dst_off = t.dst_region.Offsets(strides_[db]);
    // Gather first: source and destination may be the same buffer.
    std::vector<double> values(src_off.size());
    for (size_t k = 0; k < src_off.size(); ++k) {
      if (!src.valid[src_off[k]]) {
        return absl::FailedPreconditionError(absl::StrCat(
            Describe(t), " reads ", t.src_buffer, t.src_region.ToString(), " on rank ", src_rank,
            " but element ", Coordinates(src_off[k], plan_.buffers[sb].shape),
            " holds no valid data yet"));
      }
      values[k] = src.values[src_off[k]];
    }
    for (size_t k = 0; k < dst_off.size(); ++k) {
      double& out = dst.values[dst_off[k]];
      uint8_t& valid = dst.valid[dst_off[k]];
      // A reduction into an element with no valid data initializes it (plan.h).
      if (t.reduce == ReduceOp::kNone || !valid) {
        out = values[k];
      } else if (t.reduce == ReduceOp::kSum) {
        out += values[k];
      } else {
        out = std::max(out, values[k]);
      }
      valid = 1;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> CheckPostcondition() const {
    int64_t checked = 0;
    for (const Expectation& e : plan_.postcondition) {
      const int b = BufferIndex(e.buffer);
      const std::vector<int64_t> offs = e.region.Offsets(strides_[b]);
      std::vector<double> expected(
          offs.size(), e.op == ReduceOp::kMax ? -std::numeric_limits<double>::infinity() : 0.0);
      std::vector<std::string> from;
      for (const Contribution& c : e.sources) {
        const int cb = BufferIndex(c.buffer);
        const std::vector<int64_t> src = c.region.Offsets(strides_[cb]);
        for (size_t k = 0; k < offs.size(); ++k) {
          const double v = InitialValue(c.rank, cb, src[k]);
          expected[k] = e.op == ReduceOp::kMax ? std::max(expected[k], v) : expected[k] + v;
        }
        from.push_back(absl::StrCat("rank ", c.rank, " ", c.buffer, c.region.ToString()));
      }
      const HostBuffer& hb = data_[e.rank][b];
      for (size_t k = 0; k < offs.size(); ++k) {
        const double actual = hb.values[offs[k]];
        const double tolerance = 1e-9 * std::max(1.0, std::fabs(expected[k]));
        if (!hb.valid[offs[k]] || !(std::fabs(actual - expected[k]) <= tolerance)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "postcondition fails on rank ", e.rank, " ", e.buffer, e.region.ToString(),
              ": element ", Coordinates(offs[k], plan_.buffers[b].shape), " expected ", expected[k],
              " (", ReduceOpName(e.op), " of ", absl::StrJoin(from, ", "), ") got ",
              hb.valid[offs[k]] ? absl::StrCat(actual) : std::string("nothing (never written)"),
              Explain(e, offs[k], actual)));
        }
        ++checked;
      }
    }
    return checked;
  }

  // For a wrong copied value, names the rank whose initial data it is, when one matches: helps
  // tell "chunk from the wrong rank" from "chunk never arrived".
  std::string Explain(const Expectation& e, int64_t offset, double actual) const {
    if (e.op != ReduceOp::kNone || std::isnan(actual)) return "";
    const int b = BufferIndex(e.buffer);
    for (int r = 0; r < plan_.world_size; ++r) {
      if (InitialValue(r, b, offset) == actual) {
        return absl::StrCat(" (the value rank ", r, " starts with there)");
      }
    }
    return "";
  }

  const Plan& plan_;
  const SimulationOptions& options_;
  const std::vector<const Transfer*> by_id_;
  std::vector<std::vector<int64_t>> strides_;  // by buffer index

  std::mutex mu_;
  std::condition_variable cv_;
  // All below guarded by mu_.
  std::vector<std::vector<HostBuffer>> data_;  // [rank][buffer]
  std::vector<uint8_t> completed_;             // by transfer id
  absl::Status error_;
  int executed_ = 0;
  int waiting_ = 0;
  int active_ = 0;
  uint64_t progress_ = 0;
};

}  // namespace

std::string SimulationReport::Summary() const {
  return absl::StrCat("executed ", transfers_executed, " transfers, checked ", elements_checked,
                      " elements");
}

absl::StatusOr<SimulationReport> SimulatePlan(const Plan& plan, const SimulationOptions& options) {
  RETURN_IF_ERROR(ValidatePlanStructure(plan));
  int64_t per_rank = 0;
  for (const BufferSpec& b : plan.buffers) per_rank += b.NumElements();
  if (per_rank > options.max_elements) {
    return absl::ResourceExhaustedError(
        absl::StrCat("plan \"", plan.name, "\" too large to simulate: ", per_rank,
                     " elements per rank exceed max_elements ", options.max_elements));
  }
  return Simulator(plan, options).Run();
}

}  // namespace syncopate::plan
