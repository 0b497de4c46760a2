// MSCCL XML -> plan::Plan (see msccl_import.h for the mapping). Pure functions; thread-safe.
//
// Three passes over the parsed document: (1) read and check every element into plain structs
// (msccl_algo.cc), (2) create the transfers (a PUSH per paired send/receive, a LOCAL_COPY per
// cpy/re) and pair the halves, (3) derive dependencies from thread-block order and depid/deps, then
// lay the transfers out per rank and channel, numbering ids and signals.
#include "core/plan/msccl_import.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/plan/msccl_algo.h"
#include "core/plan/xml_reader.h"

namespace syncopate::plan {
namespace {

using msccl::Algo;
using msccl::At;
using msccl::Coll;
using msccl::Gpu;
using msccl::ReadAlgo;
using msccl::Step;
using msccl::StepType;
using msccl::ThreadBlock;

// Where MSCCL's chunk-addressed buffers land in our buffers.
class BufferMap {
 public:
  static absl::StatusOr<BufferMap> Make(const Algo& algo, const ImportOptions& options,
                                        absl::string_view where) {
    BufferMap m;
    m.coll_ = algo.coll;
    m.inplace_ = algo.inplace;
    const int64_t n = static_cast<int64_t>(algo.gpus.size());
    for (const Gpu& gpu : algo.gpus) {
      m.ic_ = std::max(m.ic_, gpu.i_chunks);
      m.oc_ = std::max(m.oc_, gpu.o_chunks);
      m.sc_ = std::max(m.sc_, gpu.s_chunks);
    }
    // Chunk counts of our buffers, and which one the caller's shape describes.
    std::string full;
    switch (algo.coll) {
      case Coll::kAllGather:
        if (m.oc_ != n * m.ic_) {
          return At(where, absl::StrFormat("allgather needs o_chunks = ngpus * i_chunks = %d, got "
                                           "%d",
                                           n * m.ic_, m.oc_));
        }
        if (algo.inplace) {
          m.names_ = {"data", "data", "scratch"};
        } else {
          m.names_ = {"input", "output", "scratch"};
        }
        full = m.names_[1];
        break;
      case Coll::kReduceScatter:
        if (m.ic_ != n * m.oc_) {
          return At(where, absl::StrFormat("reduce_scatter needs i_chunks = ngpus * o_chunks = %d, "
                                           "got %d",
                                           n * m.oc_, m.ic_));
        }
        m.names_ = {"input", algo.inplace ? "input" : "output", "scratch"};
        full = "input";
        break;
      case Coll::kAllReduce:
        if (m.oc_ != m.ic_) {
          return At(where, absl::StrFormat("allreduce needs o_chunks = i_chunks, got %d and %d",
                                           m.oc_, m.ic_));
        }
        m.names_ = algo.inplace ? std::vector<std::string>{"data", "data", "scratch"}
                                : std::vector<std::string>{"input", "output", "scratch"};
        full = m.names_[0];
        break;
      case Coll::kAllToAll:
        if (algo.inplace) return At(where, "in-place alltoall is not supported");
        if (m.ic_ != m.oc_ || m.ic_ % n != 0) {
          return At(where, absl::StrFormat("alltoall needs i_chunks = o_chunks, a multiple of "
                                           "ngpus; got %d and %d",
                                           m.ic_, m.oc_));
        }
        m.names_ = {"send", "recv", "scratch"};
        full = "send";
        break;
      case Coll::kCustom:
        if (algo.inplace) return At(where, "in-place custom collectives are not supported");
        m.names_ = {"input", "output", "scratch"};
        full = "input";
        break;
    }
    // Chunks per buffer name: in-place buffers hold both views.
    auto grow = [&m](const std::string& name, int64_t chunks) {
      m.chunks_[name] = std::max(m.chunks_[name], chunks);
    };
    grow(m.names_[0], algo.inplace && algo.coll == Coll::kAllGather ? n * m.ic_ : m.ic_);
    grow(m.names_[1], algo.inplace && algo.coll == Coll::kReduceScatter ? n * m.oc_ : m.oc_);
    if (m.sc_ > 0) grow(m.names_[2], m.sc_);
    const int64_t full_chunks = m.chunks_[full];
    if (full_chunks == 0) return At(where, absl::StrCat("the ", full, " buffer has no chunks"));
    if (options.shape.empty()) {
      m.rows_ = 1;
      m.inner_ = {16};
    } else {
      if (options.shape[0] <= 0 || options.shape[0] % full_chunks != 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("shape[0] = %d does not divide into the %d chunks of the %s buffer",
                            options.shape[0], full_chunks, full));
      }
      for (size_t a = 1; a < options.shape.size(); ++a) {
        if (options.shape[a] <= 0) {
          return absl::InvalidArgumentError(
              absl::StrFormat("shape[%d] = %d must be positive", a, options.shape[a]));
        }
      }
      m.rows_ = options.shape[0] / full_chunks;
      m.inner_.assign(options.shape.begin() + 1, options.shape.end());
    }
    return m;
  }

  int64_t rows() const { return rows_; }
  const std::map<std::string, int64_t>& chunks() const { return chunks_; }

  Shape BufferShape(const std::string& name) const {
    Shape shape = {chunks_.at(name) * rows_};
    shape.insert(shape.end(), inner_.begin(), inner_.end());
    return shape;
  }

  // Buffer name and chunk offset of MSCCL (buf, off) on `gpu`.
  std::pair<std::string, int64_t> Map(char buf, int64_t off, int gpu) const {
    const int b = buf == 'i' ? 0 : buf == 'o' ? 1 : 2;
    if (inplace_ && coll_ == Coll::kAllGather && b == 0) {
      return {names_[0], gpu * ic_ + off};
    }
    if (inplace_ && coll_ == Coll::kReduceScatter && b == 1) {
      return {names_[1], gpu * oc_ + off};
    }
    return {names_[b], off};
  }

  // The region of `cnt` chunks at MSCCL (buf, off) on `gpu`, checked against the buffer size.
  absl::StatusOr<std::pair<std::string, Region>> Ref(char buf, int64_t off, int64_t cnt, int gpu,
                                                     absl::string_view where,
                                                     absl::string_view which) const {
    if (off < 0) return At(where, absl::StrCat(which, "off is missing or -1"));
    auto [name, chunk] = Map(buf, off, gpu);
    auto it = chunks_.find(name);
    const int64_t size = it == chunks_.end() ? 0 : it->second;
    if (chunk + cnt > size) {
      return At(where, absl::StrFormat("%sbuf=%c %soff=%d cnt=%d is past the end of the %s buffer "
                                       "(%d chunks)",
                                       which, buf, which, off, cnt, name, size));
    }
    return std::make_pair(name,
                          Region::Slab(BufferShape(name), 0, chunk * rows_, (chunk + cnt) * rows_));
  }

  int64_t ChunkIndex(char buf, int64_t off, int gpu) const { return Map(buf, off, gpu).second; }

 private:
  Coll coll_ = Coll::kCustom;
  bool inplace_ = false;
  int64_t ic_ = 0, oc_ = 0, sc_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, int64_t> chunks_;
  int64_t rows_ = 1;
  Shape inner_;
};

class Importer {
 public:
  Importer(Algo algo, BufferMap buffers, DType dtype)
      : algo_(std::move(algo)), buffers_(std::move(buffers)), dtype_(dtype) {}

  absl::StatusOr<Plan> Run() {
    RETURN_IF_ERROR(CreateTransfers());
    RETURN_IF_ERROR(PairSendsAndReceives());
    RETURN_IF_ERROR(AddDependencies());
    return Layout();
  }

 private:
  int world() const { return static_cast<int>(algo_.gpus.size()); }

  int Add(Transfer t) {
    transfers_.push_back(std::move(t));
    return static_cast<int>(transfers_.size()) - 1;
  }

  // Pass 2a: the transfer each step executes (send half or local op); destinations of pushes are
  // filled by the pairing.
  absl::Status CreateTransfers() {
    for (Gpu& gpu : algo_.gpus) {
      for (ThreadBlock& tb : gpu.tbs) {
        for (size_t s = 0; s < tb.steps.size(); ++s) {
          Step& step = tb.steps[s];
          const StepType type = step.info->type;
          Transfer t;
          t.rank = gpu.id;
          t.channel = tb.id;
          t.step = static_cast<int>(s);
          if (type == StepType::kCopy || type == StepType::kReduce) {
            ASSIGN_OR_RETURN(auto src, buffers_.Ref(step.srcbuf, step.srcoff, step.cnt, gpu.id,
                                                    step.where, "src"));
            ASSIGN_OR_RETURN(auto dst, buffers_.Ref(step.dstbuf, step.dstoff, step.cnt, gpu.id,
                                                    step.where, "dst"));
            t.kind = TransferKind::kLocalCopy;
            t.peer = gpu.id;
            std::tie(t.src_buffer, t.src_region) = std::move(src);
            std::tie(t.dst_buffer, t.dst_region) = std::move(dst);
            t.chunk = static_cast<int>(buffers_.ChunkIndex(step.dstbuf, step.dstoff, gpu.id));
            t.reduce = type == StepType::kReduce ? algo_.op : ReduceOp::kNone;
            step.outgoing = Add(std::move(t));
            continue;
          }
          if (step.ReduceReceive() && !step.SrcIsDst() &&
              step.info->type != StepType::kRecvReduceSend) {
            // Reductions land in the source slot (see Pair); the result then moves to dst.
            ASSIGN_OR_RETURN(auto src, buffers_.Ref(step.srcbuf, step.srcoff, step.cnt, gpu.id,
                                                    step.where, "src"));
            ASSIGN_OR_RETURN(auto dst, buffers_.Ref(step.dstbuf, step.dstoff, step.cnt, gpu.id,
                                                    step.where, "dst"));
            Transfer copy = t;
            copy.kind = TransferKind::kLocalCopy;
            copy.peer = gpu.id;
            std::tie(copy.src_buffer, copy.src_region) = std::move(src);
            std::tie(copy.dst_buffer, copy.dst_region) = std::move(dst);
            copy.chunk = static_cast<int>(buffers_.ChunkIndex(step.dstbuf, step.dstoff, gpu.id));
            step.local = Add(std::move(copy));
          }
          if (step.info->sends) {
            // The data sent: the source slot for a plain send and for the reducing forwards (the
            // reduction lands there), the received slot (dst) for rcs.
            const bool from_dst = type == StepType::kRecvCopySend;
            const char buf = from_dst ? step.dstbuf : step.srcbuf;
            const int64_t off = from_dst ? step.dstoff : step.srcoff;
            ASSIGN_OR_RETURN(auto src, buffers_.Ref(buf, off, step.cnt, gpu.id, step.where,
                                                    from_dst ? "dst" : "src"));
            t.kind = TransferKind::kPush;
            t.peer = tb.send;
            std::tie(t.src_buffer, t.src_region) = std::move(src);
            step.outgoing = Add(std::move(t));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // Pass 2b: the k-th sending step of (A -> B, chan c) meets the k-th receiving step of B's tb
  // receiving from A on chan c; the receiver's step says where the data lands and how.
  absl::Status PairSendsAndReceives() {
    using Key = std::tuple<int, int, int>;  // (sender, receiver, chan)
    std::map<Key, ThreadBlock*> senders, receivers;
    for (Gpu& gpu : algo_.gpus) {
      for (ThreadBlock& tb : gpu.tbs) {
        if (tb.send >= 0) {
          auto [it, inserted] = senders.try_emplace(Key{gpu.id, tb.send, tb.chan}, &tb);
          if (!inserted) {
            return At(tb.where, absl::StrFormat("a second tb sending to gpu %d on chan %d (first: "
                                                "%s)",
                                                tb.send, tb.chan, it->second->where));
          }
        }
        if (tb.recv >= 0) {
          auto [it, inserted] = receivers.try_emplace(Key{tb.recv, gpu.id, tb.chan}, &tb);
          if (!inserted) {
            return At(tb.where, absl::StrFormat("a second tb receiving from gpu %d on chan %d "
                                                "(first: %s)",
                                                tb.recv, tb.chan, it->second->where));
          }
        }
      }
    }
    for (auto& [key, send_tb] : senders) {
      auto [from, to, chan] = key;
      std::vector<Step*> sends;
      for (Step& step : send_tb->steps) {
        if (step.info->sends) sends.push_back(&step);
      }
      auto it = receivers.find(key);
      std::vector<Step*> recvs;
      if (it != receivers.end()) {
        for (Step& step : it->second->steps) {
          if (step.info->receives) recvs.push_back(&step);
        }
      }
      if (sends.size() != recvs.size()) {
        if (it == receivers.end() && !sends.empty()) {
          return At(send_tb->where, absl::StrFormat("sends to gpu %d on chan %d, but gpu %d has no "
                                                    "tb with recv=%d chan=%d",
                                                    to, chan, to, from, chan));
        }
        return At(send_tb->where,
                  absl::StrFormat("sends %d chunks to gpu %d on chan %d, but %s receives %d",
                                  sends.size(), to, chan,
                                  it == receivers.end() ? std::string("nobody") : it->second->where,
                                  recvs.size()));
      }
      for (size_t k = 0; k < sends.size(); ++k) {
        RETURN_IF_ERROR(Pair(*sends[k], *recvs[k], to));
      }
    }
    for (auto& [key, recv_tb] : receivers) {
      if (senders.contains(key)) continue;
      for (const Step& step : recv_tb->steps) {
        if (step.info->receives) {
          return At(step.where,
                    absl::StrFormat("receives from gpu %d on chan %d, but gpu %d has "
                                    "no tb with send=%d chan=%d",
                                    std::get<0>(key), std::get<2>(key), std::get<0>(key),
                                    std::get<1>(key), std::get<2>(key)));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Pair(Step& send, Step& recv, int receiver) {
    if (send.cnt != recv.cnt) {
      return At(recv.where, absl::StrFormat("receives cnt=%d, but the matching send (%s) has "
                                            "cnt=%d",
                                            recv.cnt, send.where, send.cnt));
    }
    // Where the received data lands: a plain receive writes its destination slot. A reducing
    // receive computes src op received; MSCCL leaves src untouched and writes dst (rrc, rrcs) or
    // only forwards (rrs). We reduce into the src slot in place, then copy to dst where that
    // differs (the `local` transfer): same results, except that src holds the partial sum.
    const bool reduce = recv.ReduceReceive();
    const char buf = reduce ? recv.srcbuf : recv.dstbuf;
    const int64_t off = reduce ? recv.srcoff : recv.dstoff;
    const char* which = reduce ? "src" : "dst";
    ASSIGN_OR_RETURN(auto dst, buffers_.Ref(buf, off, recv.cnt, receiver, recv.where, which));
    Transfer& t = transfers_[send.outgoing];
    std::tie(t.dst_buffer, t.dst_region) = std::move(dst);
    t.chunk = static_cast<int>(buffers_.ChunkIndex(buf, off, receiver));
    t.reduce = reduce ? algo_.op : ReduceOp::kNone;
    recv.incoming = send.outgoing;
    return absl::OkStatus();
  }

  // Handles whose completion means "step s of tb `tb` on `gpu` is done" (and, MSCCL running a
  // tb's steps in order, every earlier step of that tb). Memoized; nop contributes its dependency.
  const std::vector<int>& Completion(int gpu, int tb, int s) {
    auto key = std::make_tuple(gpu, tb, s);
    if (auto it = completion_.find(key); it != completion_.end()) return it->second;
    std::set<int> out;
    if (s >= 0) {
      const Step& step = algo_.gpus[gpu].tbs[tb].steps[s];
      if (!step.Executed().empty()) {
        // They depend, directly or through channel order, on everything else the step waits for.
        for (int h : step.Executed()) out.insert(h);
      } else {
        const auto& prev = Completion(gpu, tb, s - 1);
        out.insert(prev.begin(), prev.end());
        if (step.incoming >= 0) out.insert(step.incoming);
        if (step.depid >= 0) {
          const auto& dep = Completion(gpu, step.depid, step.deps);
          out.insert(dep.begin(), dep.end());
        }
      }
    }
    return completion_[key] = std::vector<int>(out.begin(), out.end());
  }

  absl::Status CheckDep(const Gpu& gpu, const Step& step) {
    if (step.depid < 0) return absl::OkStatus();
    if (step.depid >= static_cast<int>(gpu.tbs.size()) ||
        step.deps >= static_cast<int>(gpu.tbs[step.depid].steps.size())) {
      return At(step.where, absl::StrFormat("depid=%d deps=%d names no step of this gpu",
                                            step.depid, step.deps));
    }
    return absl::OkStatus();
  }

  // Pass 3: dependencies. depid cycles are rejected first (CheckDepCycles), so the memoized
  // recursion in Completion terminates.
  absl::Status AddDependencies() {
    for (const Gpu& gpu : algo_.gpus) {
      for (const ThreadBlock& tb : gpu.tbs) {
        for (const Step& step : tb.steps) RETURN_IF_ERROR(CheckDep(gpu, step));
      }
    }
    RETURN_IF_ERROR(CheckDepCycles());
    for (const Gpu& gpu : algo_.gpus) {
      for (const ThreadBlock& tb : gpu.tbs) {
        for (size_t s = 0; s < tb.steps.size(); ++s) {
          const Step& step = tb.steps[s];
          const int si = static_cast<int>(s);
          if (!step.Executed().empty()) {
            // Executed by this gpu: after the tb's previous step, the named step, and (forwarding
            // steps) the receive half of this very step.
            std::set<int> deps;
            const auto& prev = Completion(gpu.id, tb.id, si - 1);
            deps.insert(prev.begin(), prev.end());
            if (step.depid >= 0) {
              const auto& dep = Completion(gpu.id, step.depid, step.deps);
              deps.insert(dep.begin(), dep.end());
            }
            if (step.incoming >= 0) deps.insert(step.incoming);
            for (int h : step.Executed()) AddDeps(h, deps);
          }
          if (step.incoming >= 0) {
            // Executed by the sender, so the receiving tb's order does not hold by itself. MSCCL
            // sends into a FIFO and the receiver consumes in tb order; our push writes the slot
            // directly, so what matters are the data hazards on it: earlier steps of this tb that
            // read or write the landing slot, and the step named by depid. Only what the sender
            // can observe (transfers it executes or that land on it) can become a dependency;
            // ValidatePlan reports any race the rest opens.
            const Transfer& in = transfers_[step.incoming];
            std::set<int> deps;
            for (int j = 0; j < si; ++j) {
              const Step& earlier = tb.steps[j];
              std::vector<int> handles = earlier.Executed();
              if (earlier.incoming >= 0) handles.push_back(earlier.incoming);
              bool hazard = false;
              for (int h : handles)
                hazard = hazard || TouchesOnGpu(h, gpu.id, in.dst_buffer, in.dst_region);
              if (hazard) deps.insert(handles.begin(), handles.end());
            }
            if (step.depid >= 0) {
              const auto& dep = Completion(gpu.id, step.depid, step.deps);
              deps.insert(dep.begin(), dep.end());
            }
            std::set<int> observable;
            for (int d : deps) {
              const Transfer& t = transfers_[d];
              if (d != step.incoming && (t.rank == in.rank || t.dst_rank() == in.rank)) {
                observable.insert(d);
              }
            }
            AddDeps(step.incoming, observable);
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // depid/deps edges plus tb order must not loop, or Completion would recurse forever.
  absl::Status CheckDepCycles() {
    for (const Gpu& gpu : algo_.gpus) {
      // state: 0 unvisited, 1 on stack, 2 done; over (tb, step) nodes.
      std::map<std::pair<int, int>, int> state;
      std::function<absl::Status(int, int)> visit = [&](int tb, int s) -> absl::Status {
        if (s < 0) return absl::OkStatus();
        int& st = state[{tb, s}];
        if (st == 2) return absl::OkStatus();
        const Step& step = gpu.tbs[tb].steps[s];
        if (st == 1) return At(step.where, "depid/deps form a cycle through this step");
        st = 1;
        RETURN_IF_ERROR(visit(tb, s - 1));
        if (step.depid >= 0) RETURN_IF_ERROR(visit(step.depid, step.deps));
        state[{tb, s}] = 2;
        return absl::OkStatus();
      };
      for (const ThreadBlock& tb : gpu.tbs) {
        for (size_t s = 0; s < tb.steps.size(); ++s) {
          RETURN_IF_ERROR(visit(tb.id, static_cast<int>(s)));
        }
      }
    }
    return absl::OkStatus();
  }

  // Whether transfer `h` reads or writes `region` of `buffer` on `gpu`.
  bool TouchesOnGpu(int h, int gpu, const std::string& buffer, const Region& region) const {
    const Transfer& t = transfers_[h];
    return (t.src_rank() == gpu && t.src_buffer == buffer && t.src_region.Intersects(region)) ||
           (t.dst_rank() == gpu && t.dst_buffer == buffer && t.dst_region.Intersects(region));
  }

  void AddDeps(int handle, const std::set<int>& deps) {
    Transfer& t = transfers_[handle];
    for (int d : deps) {
      // Earlier transfers of the same channel are ordered by list order already.
      if (d == handle) continue;
      if (transfers_[d].rank == t.rank && transfers_[d].channel == t.channel && d < handle) {
        continue;
      }
      if (std::find(t.deps.begin(), t.deps.end(), d) == t.deps.end()) t.deps.push_back(d);
    }
  }

  // Pass 3b: buffers, transfers per rank and channel (ids in rank, channel, list order), signals
  // per destination rank in id order, initial regions and the postcondition.
  absl::StatusOr<Plan> Layout() {
    Plan plan;
    plan.name = algo_.name.empty() ? "msccl" : absl::StrCat("msccl.", algo_.name);
    plan.world_size = world();
    for (const auto& [name, chunks] : buffers_.chunks()) {
      plan.buffers.push_back(MakeBuffer(name, dtype_, buffers_.BufferShape(name)));
    }
    plan.ranks.resize(world());
    for (const Gpu& gpu : algo_.gpus) plan.ranks[gpu.id].channels.resize(gpu.tbs.size());
    // Handles were created per gpu, tb, step: that is already rank, channel, list order, so a
    // handle is the transfer's id.
    std::vector<int> next_signal(world(), 0);
    for (size_t h = 0; h < transfers_.size(); ++h) {
      Transfer t = transfers_[h];
      t.id = static_cast<int>(h);
      std::sort(t.deps.begin(), t.deps.end());
      t.signal = next_signal[t.dst_rank()]++;
      plan.ranks[t.rank].channels[t.channel].push_back(std::move(t));
    }
    AddCollective(plan);
    return plan;
  }

  void AddCollective(Plan& plan) {
    const int n = world();
    const auto& chunks = buffers_.chunks();
    auto whole = [&](const std::string& name) { return Region::Whole(buffers_.BufferShape(name)); };
    auto slab = [&](const std::string& name, int64_t first_chunk, int64_t count) {
      return Region::Slab(buffers_.BufferShape(name), 0, first_chunk * buffers_.rows(),
                          (first_chunk + count) * buffers_.rows());
    };
    auto gather = [&](const std::string& src, const std::string& dst, int64_t per_rank,
                      bool src_sliced) {
      for (int q = 0; q < n; ++q) {
        for (int j = 0; j < n; ++j) {
          plan.postcondition.push_back(Expectation{
              .rank = q,
              .buffer = dst,
              .region = slab(dst, j * per_rank, per_rank),
              .op = ReduceOp::kNone,
              .sources = {
                  {j, src,
                   src_sliced ? slab(src, j * per_rank, per_rank) : slab(src, 0, per_rank)}}});
        }
      }
    };
    auto reduce = [&](const std::string& src, const std::string& dst, int64_t per_rank,
                      bool dst_sliced) {
      for (int q = 0; q < n; ++q) {
        Expectation e{
            .rank = q,
            .buffer = dst,
            .region = dst_sliced ? slab(dst, q * per_rank, per_rank) : slab(dst, 0, per_rank),
            .op = algo_.op,
            .sources = {}};
        for (int r = 0; r < n; ++r)
          e.sources.push_back({r, src, slab(src, q * per_rank, per_rank)});
        plan.postcondition.push_back(std::move(e));
      }
    };
    switch (algo_.coll) {
      case Coll::kAllGather: {
        plan.collective = CollectiveKind::kAllGather;
        const int64_t per_rank = chunks.at(algo_.inplace ? "data" : "output") / n;
        for (int r = 0; r < n; ++r) {
          plan.ranks[r].initial[algo_.inplace ? "data" : "input"] =
              algo_.inplace ? slab("data", r * per_rank, per_rank) : whole("input");
        }
        if (algo_.inplace) {
          gather("data", "data", per_rank, /*src_sliced=*/true);
        } else {
          gather("input", "output", per_rank, /*src_sliced=*/false);
        }
        break;
      }
      case Coll::kReduceScatter: {
        plan.collective = CollectiveKind::kReduceScatter;
        const int64_t per_rank = chunks.at("input") / n;
        for (int r = 0; r < n; ++r) plan.ranks[r].initial["input"] = whole("input");
        reduce("input", algo_.inplace ? "input" : "output", per_rank, algo_.inplace);
        break;
      }
      case Coll::kAllReduce: {
        plan.collective = CollectiveKind::kAllReduce;
        const std::string src = algo_.inplace ? "data" : "input";
        const std::string dst = algo_.inplace ? "data" : "output";
        for (int r = 0; r < n; ++r) plan.ranks[r].initial[src] = whole(src);
        for (int q = 0; q < n; ++q) {
          Expectation e{
              .rank = q, .buffer = dst, .region = whole(dst), .op = algo_.op, .sources = {}};
          for (int r = 0; r < n; ++r) e.sources.push_back({r, src, whole(src)});
          plan.postcondition.push_back(std::move(e));
        }
        break;
      }
      case Coll::kAllToAll: {
        plan.collective = CollectiveKind::kAllToAll;
        const int64_t per_rank = chunks.at("send") / n;
        for (int r = 0; r < n; ++r) plan.ranks[r].initial["send"] = whole("send");
        for (int q = 0; q < n; ++q) {
          for (int j = 0; j < n; ++j) {
            plan.postcondition.push_back(
                Expectation{.rank = q,
                            .buffer = "recv",
                            .region = slab("recv", j * per_rank, per_rank),
                            .op = ReduceOp::kNone,
                            .sources = {{j, "send", slab("send", q * per_rank, per_rank)}}});
          }
        }
        break;
      }
      case Coll::kCustom:
        plan.collective = CollectiveKind::kCustom;
        if (chunks.contains("input")) {
          for (int r = 0; r < n; ++r) plan.ranks[r].initial["input"] = whole("input");
        }
        break;
    }
  }

 private:
  Algo algo_;
  BufferMap buffers_;
  DType dtype_;
  std::vector<Transfer> transfers_;
  std::map<std::tuple<int, int, int>, std::vector<int>> completion_;
};

}  // namespace

absl::StatusOr<Plan> ImportMscclXml(std::string_view xml, const ImportOptions& options) {
  auto root = ParseXml(xml);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("MSCCL XML: ", root.status().message()));
  }
  ASSIGN_OR_RETURN(Algo algo, ReadAlgo(*root));
  ASSIGN_OR_RETURN(BufferMap buffers,
                   BufferMap::Make(algo, options, absl::StrCat("line ", root->line, ": <algo>")));
  return Importer(std::move(algo), std::move(buffers), options.dtype).Run();
}

}  // namespace syncopate::plan
