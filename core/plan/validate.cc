// Static plan validation (see validate.h). Pure functions; thread-compatible.
#include "core/plan/validate.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/plan/validate_internal.h"

namespace syncopate::plan {
namespace {

using validation::AtomBox;
using validation::AtomsInOrder;
using validation::Describe;
using validation::Grid;
using validation::GridBuilder;
using validation::Order;

// Atom states the validator may hold over all buffers and ranks.
constexpr int64_t kMaxAtomStates = int64_t{1} << 23;

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status CheckRegion(const Plan& plan, std::string_view what, const std::string& buffer,
                         const Region& region) {
  const BufferSpec* spec = plan.FindBuffer(buffer);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": buffer \"", buffer, "\" does not exist"));
  }
  if (!region.InsideShape(spec->shape)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": region ",
                                                   region.ToString(), " outside buffer \"", buffer,
                                                   "\" of shape ", ShapeString(spec->shape)));
  }
  if (!region.BoxesDisjoint()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": region ",
                                                   region.ToString(), " of buffer \"", buffer,
                                                   "\" has overlapping boxes"));
  }
  return absl::OkStatus();
}

absl::Status CheckBuffers(const Plan& plan) {
  absl::flat_hash_set<std::string> names;
  for (const BufferSpec& b : plan.buffers) {
    if (b.name.empty()) return absl::InvalidArgumentError("a buffer has an empty name");
    if (!names.insert(b.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("buffer \"", b.name, "\" declared twice"));
    }
    for (int64_t d : b.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "buffer \"", b.name, "\" has shape ", ShapeString(b.shape), " with a negative extent"));
      }
    }
    if (b.strides.size() != b.shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer \"", b.name, "\" has ", b.strides.size(), " strides for rank ", b.shape.size()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTransfer(const Plan& plan, int rank, int channel, const Transfer& t, int n) {
  const std::string who = Describe(t);
  if (t.rank != rank || t.channel != channel) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, " is listed on rank ", rank, " channel ", channel));
  }
  if (t.id < 0 || t.id >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": id out of range (ids must be 0..", n - 1, ")"));
  }
  if (t.peer < 0 || t.peer >= plan.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": peer ", t.peer, " out of range for world size ", plan.world_size));
  }
  if (t.kind == TransferKind::kLocalCopy && t.peer != t.rank) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": local_copy with peer ", t.peer));
  }
  RETURN_IF_ERROR(CheckRegion(plan, absl::StrCat(who, " source"), t.src_buffer, t.src_region));
  RETURN_IF_ERROR(CheckRegion(plan, absl::StrCat(who, " destination"), t.dst_buffer, t.dst_region));
  if (t.src_region.NumElements() != t.dst_region.NumElements()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": source ", t.src_buffer, t.src_region.ToString(), " has ",
                     t.src_region.NumElements(), " elements but destination ", t.dst_buffer,
                     t.dst_region.ToString(), " has ", t.dst_region.NumElements()));
  }
  if (t.signal < 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": signal ", t.signal, " is negative"));
  }
  for (int dep : t.deps) {
    if (dep < 0 || dep >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": dependency on transfer ", dep, " which does not exist"));
    }
    if (dep == t.id) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": depends on itself"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTransfers(const Plan& plan) {
  const int n = plan.NumTransfers();
  std::vector<const Transfer*> seen(n, nullptr);
  // (destination rank, signal) -> transfer id.
  absl::flat_hash_map<std::pair<int, int>, int> signals;
  for (int r = 0; r < plan.world_size; ++r) {
    const RankPlan& rp = plan.ranks[r];
    for (int c = 0; c < static_cast<int>(rp.channels.size()); ++c) {
      for (const Transfer& t : rp.channels[c]) {
        RETURN_IF_ERROR(CheckTransfer(plan, r, c, t, n));
        if (seen[t.id] != nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(Describe(t), ": id ", t.id, " already used by ", Describe(*seen[t.id])));
        }
        seen[t.id] = &t;
        auto [it, inserted] = signals.try_emplace({t.dst_rank(), t.signal}, t.id);
        if (!inserted) {
          return absl::InvalidArgumentError(absl::StrCat(Describe(t), ": signal ", t.signal,
                                                         " on rank ", t.dst_rank(),
                                                         " is also set by transfer ", it->second));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPostcondition(const Plan& plan) {
  for (size_t i = 0; i < plan.postcondition.size(); ++i) {
    const Expectation& e = plan.postcondition[i];
    const std::string who = absl::StrCat("postcondition ", i, " (rank ", e.rank, " ", e.buffer,
                                         e.region.ToString(), ")");
    if (e.rank < 0 || e.rank >= plan.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": rank out of range"));
    }
    RETURN_IF_ERROR(CheckRegion(plan, who, e.buffer, e.region));
    if (e.sources.empty()) return absl::InvalidArgumentError(absl::StrCat(who, ": no sources"));
    if (e.op == ReduceOp::kNone && e.sources.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": a copy expectation needs exactly one source, has ", e.sources.size()));
    }
    for (const Contribution& c : e.sources) {
      const std::string src =
          absl::StrCat(who, " source rank ", c.rank, " ", c.buffer, c.region.ToString());
      if (c.rank < 0 || c.rank >= plan.world_size) {
        return absl::InvalidArgumentError(absl::StrCat(src, ": rank out of range"));
      }
      RETURN_IF_ERROR(CheckRegion(plan, src, c.buffer, c.region));
      if (c.region.NumElements() != e.region.NumElements()) {
        return absl::InvalidArgumentError(absl::StrCat(
            src, ": has ", c.region.NumElements(), " elements, expected ", e.region.NumElements()));
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Symbolic contents: which initial atoms (origins) an atom's value is made of.

using Origin = uint64_t;  // rank:16 | buffer:16 | atom:32
Origin MakeOrigin(int rank, int buffer, int64_t atom) {
  return (static_cast<uint64_t>(rank) << 48) | (static_cast<uint64_t>(buffer) << 32) |
         static_cast<uint64_t>(atom);
}
int OriginRank(Origin o) { return static_cast<int>(o >> 48); }
int OriginBuffer(Origin o) { return static_cast<int>((o >> 32) & 0xffff); }
int64_t OriginAtom(Origin o) { return static_cast<int64_t>(o & 0xffffffffu); }

struct Content {
  ReduceOp op = ReduceOp::kNone;  // meaningful when terms hold more than one contribution
  bool mixed = false;             // reduced with different ops along the way
  std::vector<std::pair<Origin, int>> terms;  // sorted by origin; count of each

  int64_t Count() const {
    int64_t n = 0;
    for (const auto& [o, c] : terms) n += c;
    return n;
  }
};
using ContentPtr = std::shared_ptr<const Content>;

ContentPtr SingleOrigin(Origin o) {
  auto c = std::make_shared<Content>();
  c->terms.emplace_back(o, 1);
  return c;
}

// dst op src, where a missing dst means "no valid data yet": the reduction initializes it.
ContentPtr Reduce(const ContentPtr& dst, const ContentPtr& src, ReduceOp op) {
  auto out = std::make_shared<Content>();
  out->op = op;
  out->mixed = src->mixed || (src->Count() > 1 && src->op != op);
  if (dst == nullptr) {
    out->terms = src->terms;
    return out;
  }
  out->mixed = out->mixed || dst->mixed || (dst->Count() > 1 && dst->op != op);
  size_t i = 0, j = 0;
  while (i < dst->terms.size() || j < src->terms.size()) {
    if (j == src->terms.size() ||
        (i < dst->terms.size() && dst->terms[i].first < src->terms[j].first)) {
      out->terms.push_back(dst->terms[i++]);
    } else if (i == dst->terms.size() || src->terms[j].first < dst->terms[i].first) {
      out->terms.push_back(src->terms[j++]);
    } else {
      out->terms.emplace_back(dst->terms[i].first, dst->terms[i].second + src->terms[j].second);
      ++i;
      ++j;
    }
  }
  return out;
}

struct AtomState {
  bool initial = false;
  std::vector<int> writers;  // transfer ids
  std::vector<int> readers;
  ContentPtr content;  // null: no valid data
};

// ---------------------------------------------------------------------------------------------

class Validator {
 public:
  explicit Validator(const Plan& plan) : plan_(plan), by_id_(plan.TransfersById()) {
    for (size_t b = 0; b < plan.buffers.size(); ++b) buffer_index_[plan.buffers[b].name] = b;
    states_.resize(plan.world_size * plan.buffers.size());
  }

  absl::Status Run() {
    RETURN_IF_ERROR(CheckObservable());
    RETURN_IF_ERROR(order_.Build(plan_, by_id_));
    RETURN_IF_ERROR(BuildGrids());
    RETURN_IF_ERROR(RecordAccesses());
    RETURN_IF_ERROR(CheckReads());
    RETURN_IF_ERROR(CheckRaces());
    Evaluate();
    return CheckPostcondition();
  }

 private:
  int Buf(const std::string& name) const { return buffer_index_.at(name); }

  std::string AtomString(int buffer, int64_t atom) const {
    return absl::StrCat(plan_.buffers[buffer].name,
                        Region({AtomBox(grids_[buffer], atom)}).ToString());
  }
  std::string OriginString(Origin o) const {
    return absl::StrCat("rank ", OriginRank(o), " ", AtomString(OriginBuffer(o), OriginAtom(o)));
  }

  // A rank learns that a transfer completed from its signal, which is set on the destination
  // rank; or it ran the transfer itself.
  absl::Status CheckObservable() const {
    for (const Transfer* t : by_id_) {
      for (int dep : t->deps) {
        const Transfer& d = *by_id_[dep];
        if (d.rank == t->rank || d.dst_rank() == t->rank) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            Describe(*t), " waits for signal ", d.signal, " that nothing sets on rank ", t->rank,
            " (transfer ", d.id, " sets it on rank ", d.dst_rank(), ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status BuildGrids() {
    GridBuilder builder(plan_);
    for (int r = 0; r < plan_.world_size; ++r) {
      for (const auto& [buffer, region] : plan_.ranks[r].initial) {
        builder.AddRegion(Buf(buffer), region);
      }
    }
    for (const Transfer* t : by_id_) {
      RETURN_IF_ERROR(builder.AddMapping(
          {Buf(t->src_buffer), &t->src_region, Buf(t->dst_buffer), &t->dst_region, Describe(*t)}));
    }
    for (size_t i = 0; i < plan_.postcondition.size(); ++i) {
      const Expectation& e = plan_.postcondition[i];
      for (const Contribution& c : e.sources) {
        RETURN_IF_ERROR(
            builder.AddMapping({Buf(c.buffer), &c.region, Buf(e.buffer), &e.region,
                                absl::StrCat("postcondition ", i, " (rank ", e.rank, " ", e.buffer,
                                             e.region.ToString(), ")")}));
      }
    }
    ASSIGN_OR_RETURN(grids_, builder.Build());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<AtomState>*> States(int rank, int buffer) {
    auto& v = states_[rank * plan_.buffers.size() + buffer];
    if (v.empty()) {
      allocated_ += grids_[buffer].num_atoms;
      if (allocated_ > kMaxAtomStates) {
        return absl::UnimplementedError(absl::StrCat("plan too large to validate: more than ",
                                                     kMaxAtomStates,
                                                     " (rank, buffer, atom) cells"));
      }
      v.resize(grids_[buffer].num_atoms);
    }
    return &v;
  }

  absl::Status RecordAccesses() {
    for (int r = 0; r < plan_.world_size; ++r) {
      for (const auto& [buffer, region] : plan_.ranks[r].initial) {
        const int b = Buf(buffer);
        ASSIGN_OR_RETURN(std::vector<AtomState> * states, States(r, b));
        for (int64_t atom : AtomsInOrder(grids_[b], region)) {
          (*states)[atom].initial = true;
          (*states)[atom].content = SingleOrigin(MakeOrigin(r, b, atom));
        }
      }
    }
    for (const Transfer* t : by_id_) {
      const int sb = Buf(t->src_buffer);
      const int db = Buf(t->dst_buffer);
      ASSIGN_OR_RETURN(std::vector<AtomState> * src, States(t->src_rank(), sb));
      for (int64_t atom : AtomsInOrder(grids_[sb], t->src_region)) {
        (*src)[atom].readers.push_back(t->id);
      }
      ASSIGN_OR_RETURN(std::vector<AtomState> * dst, States(t->dst_rank(), db));
      for (int64_t atom : AtomsInOrder(grids_[db], t->dst_region)) {
        (*dst)[atom].writers.push_back(t->id);
      }
    }
    return absl::OkStatus();
  }

  // Calls fn(rank, buffer, atom, state) for every allocated cell, in a fixed order; stops at the
  // first error.
  template <typename Fn>
  absl::Status ForEachCell(Fn fn) const {
    for (int r = 0; r < plan_.world_size; ++r) {
      for (size_t b = 0; b < plan_.buffers.size(); ++b) {
        const auto& v = states_[r * plan_.buffers.size() + b];
        for (size_t a = 0; a < v.size(); ++a) RETURN_IF_ERROR(fn(r, static_cast<int>(b), a, v[a]));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckReads() const {
    return ForEachCell([&](int rank, int b, int64_t atom, const AtomState& s) -> absl::Status {
      if (s.initial) return absl::OkStatus();
      for (int reader : s.readers) {
        const Transfer& t = *by_id_[reader];
        if (t.after_compute) continue;  // the computation produces it
        bool valid = false;
        for (int w : s.writers) valid = valid || order_.Before(w, reader);
        if (valid) continue;
        std::vector<int> writers;
        for (int w : s.writers) {
          if (w != reader) writers.push_back(w);
        }
        return absl::FailedPreconditionError(absl::StrCat(
            Describe(t), " reads ", AtomString(b, atom), " on rank ", rank,
            " which holds no valid data yet: ",
            writers.empty() ? std::string("it is not initial and no transfer writes it")
                            : absl::StrCat("transfers writing it (", absl::StrJoin(writers, ", "),
                                           ") are not ordered before it")));
      }
      return absl::OkStatus();
    });
  }

  absl::Status CheckRaces() const {
    return ForEachCell([&](int rank, int b, int64_t atom, const AtomState& s) -> absl::Status {
      for (size_t i = 0; i < s.writers.size(); ++i) {
        const Transfer& x = *by_id_[s.writers[i]];
        for (size_t j = i + 1; j < s.writers.size(); ++j) {
          const Transfer& y = *by_id_[s.writers[j]];
          if (x.reduce != ReduceOp::kNone && x.reduce == y.reduce) continue;  // commute
          if (order_.Ordered(x.id, y.id)) continue;
          return absl::FailedPreconditionError(absl::StrCat(
              "race on rank ", rank, " ", AtomString(b, atom), ": ", Describe(x), " and ",
              Describe(y), " both write it and neither is ordered before the other"));
        }
        for (int reader : s.readers) {
          if (reader == x.id || order_.Ordered(reader, x.id)) continue;
          return absl::FailedPreconditionError(
              absl::StrCat("race on rank ", rank, " ", AtomString(b, atom), ": ",
                           Describe(*by_id_[reader]), " reads it while ", Describe(x),
                           " writes it, and neither is ordered before the "
                           "other"));
        }
      }
      return absl::OkStatus();
    });
  }

  // Applies transfers in a topological order. After the read and race checks every read is
  // ordered against every write of its atom, so any topological order gives the same contents.
  void Evaluate() {
    for (int id : order_.topological()) {
      const Transfer& t = *by_id_[id];
      const int sb = Buf(t.src_buffer);
      const int db = Buf(t.dst_buffer);
      auto& src = states_[t.src_rank() * plan_.buffers.size() + sb];
      auto& dst = states_[t.dst_rank() * plan_.buffers.size() + db];
      const std::vector<int64_t> src_atoms = AtomsInOrder(grids_[sb], t.src_region);
      const std::vector<int64_t> dst_atoms = AtomsInOrder(grids_[db], t.dst_region);
      std::vector<ContentPtr> values(src_atoms.size());
      for (size_t k = 0; k < src_atoms.size(); ++k) {
        values[k] = t.after_compute ? SingleOrigin(MakeOrigin(t.src_rank(), sb, src_atoms[k]))
                                    : src[src_atoms[k]].content;
      }
      for (size_t k = 0; k < dst_atoms.size() && k < values.size(); ++k) {
        if (values[k] == nullptr) continue;  // reported by CheckReads
        ContentPtr& out = dst[dst_atoms[k]].content;
        out = t.reduce == ReduceOp::kNone ? values[k] : Reduce(out, values[k], t.reduce);
      }
    }
  }

  absl::Status CheckPostcondition() const {
    for (size_t i = 0; i < plan_.postcondition.size(); ++i) {
      const Expectation& e = plan_.postcondition[i];
      const int eb = Buf(e.buffer);
      const std::vector<int64_t> atoms = AtomsInOrder(grids_[eb], e.region);
      std::vector<std::vector<Origin>> expected(atoms.size());
      for (const Contribution& c : e.sources) {
        const int cb = Buf(c.buffer);
        const std::vector<int64_t> src = AtomsInOrder(grids_[cb], c.region);
        for (size_t k = 0; k < atoms.size() && k < src.size(); ++k) {
          expected[k].push_back(MakeOrigin(c.rank, cb, src[k]));
        }
      }
      const auto& cells = states_[e.rank * plan_.buffers.size() + eb];
      for (size_t k = 0; k < atoms.size(); ++k) {
        static const AtomState kEmpty;
        const AtomState& s = cells.empty() ? kEmpty : cells[atoms[k]];
        RETURN_IF_ERROR(CheckAtom(e, eb, atoms[k], s, expected[k]));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckAtom(const Expectation& e, int eb, int64_t atom, const AtomState& s,
                         std::vector<Origin> expected) const {
    std::sort(expected.begin(), expected.end());
    std::vector<std::string> names;
    for (Origin o : expected) names.push_back(OriginString(o));
    const std::string what = absl::StrCat(
        "postcondition: rank ", e.rank, " ", AtomString(eb, atom), " should hold ",
        e.op == ReduceOp::kNone ? "a copy of " : absl::StrCat(ReduceOpName(e.op), " of "),
        absl::StrJoin(names, " + "));
    const std::string written_by =
        s.writers.empty() ? "no transfer writes it"
                          : absl::StrCat("written by transfers ", absl::StrJoin(s.writers, ", "));
    if (s.content == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " but holds no data (missing chunk; ", written_by, ")"));
    }
    const Content& c = *s.content;
    if (e.op == ReduceOp::kNone) {
      if (c.terms.size() != 1 || c.terms[0].second != 1 || c.terms[0].first != expected[0]) {
        std::vector<std::string> held;
        for (const auto& [o, n] : c.terms) {
          held.push_back(n == 1 ? OriginString(o) : absl::StrCat(n, " x ", OriginString(o)));
        }
        return absl::FailedPreconditionError(
            absl::StrCat(what, " but holds ", absl::StrJoin(held, " + "), " (", written_by, ")"));
      }
      if (s.writers.size() > 1) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, " and is written ", s.writers.size(), " times, expected once (",
                         written_by, ")"));
      }
      return absl::OkStatus();
    }
    // Reduction: compare multisets.
    std::vector<std::pair<Origin, int>> want;
    for (Origin o : expected) {
      if (!want.empty() && want.back().first == o) {
        ++want.back().second;
      } else {
        want.emplace_back(o, 1);
      }
    }
    size_t i = 0, j = 0;
    while (i < want.size() || j < c.terms.size()) {
      if (j == c.terms.size() || (i < want.size() && want[i].first < c.terms[j].first)) {
        return absl::FailedPreconditionError(absl::StrCat(what, ": missing contribution from ",
                                                          OriginString(want[i].first), " (",
                                                          written_by, ")"));
      }
      if (i == want.size() || c.terms[j].first < want[i].first) {
        return absl::FailedPreconditionError(absl::StrCat(what, ": unexpected contribution from ",
                                                          OriginString(c.terms[j].first), " (",
                                                          written_by, ")"));
      }
      if (c.terms[j].second != want[i].second) {
        const int n = c.terms[j].second;
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": ", OriginString(want[i].first), " counted ",
                         n == 2 ? std::string("twice") : absl::StrCat(n, " times"),
                         want[i].second == 1 ? "" : absl::StrCat(", expected ", want[i].second),
                         " (", written_by, ")"));
      }
      ++i;
      ++j;
    }
    if (c.mixed || (c.Count() > 1 && c.op != e.op)) {
      return absl::FailedPreconditionError(absl::StrCat(what, " but is reduced with ",
                                                        c.mixed ? "mixed ops" : ReduceOpName(c.op),
                                                        " (", written_by, ")"));
    }
    return absl::OkStatus();
  }

  const Plan& plan_;
  const std::vector<const Transfer*> by_id_;
  absl::flat_hash_map<std::string, int> buffer_index_;
  Order order_;
  std::vector<Grid> grids_;
  std::vector<std::vector<AtomState>> states_;  // [rank * num_buffers + buffer]
  int64_t allocated_ = 0;
};

}  // namespace

absl::Status ValidatePlanStructure(const Plan& plan) {
  if (plan.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", plan.world_size, " < 1"));
  }
  if (static_cast<int>(plan.ranks.size()) != plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("plan has ", plan.ranks.size(),
                                                   " rank plans for world size ", plan.world_size));
  }
  RETURN_IF_ERROR(CheckBuffers(plan));
  for (int r = 0; r < plan.world_size; ++r) {
    for (const auto& [buffer, region] : plan.ranks[r].initial) {
      RETURN_IF_ERROR(CheckRegion(plan, absl::StrCat("rank ", r, " initial"), buffer, region));
    }
  }
  RETURN_IF_ERROR(CheckTransfers(plan));
  return CheckPostcondition(plan);
}

absl::Status ValidatePlan(const Plan& plan) {
  RETURN_IF_ERROR(ValidatePlanStructure(plan));
  return Validator(plan).Run();
}

}  // namespace syncopate::plan
