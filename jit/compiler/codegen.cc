// Codegen: tables and entry points as CUDA source text. Everything is emitted in a fixed order
// from ordered containers, so the output is byte-identical for identical inputs.
// Pure functions; thread-compatible.
#include "jit/compiler/codegen.h"

#include <algorithm>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "jit/compiler/channel_order.h"
#include "jit/compiler/embedded_headers.h"

namespace syncopate::jit {
namespace {

constexpr int kPerLine = 16;

// Debian's abseil has its own string_view type.
absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
constexpr char kGeneratedFileName[] = "syncopate_generated.cu";

// Appends `values` as the body of a C array initializer, kPerLine per line, with an optional
// comment line before each group (groups[i] = {first index, comment}).
void EmitIntArray(std::string& out, absl::string_view decl, const std::vector<int64_t>& values,
                  const std::vector<std::pair<size_t, std::string>>& groups = {}) {
  // A zero-length array is not C++: pad with one unused element.
  const size_t n = std::max<size_t>(values.size(), 1);
  absl::StrAppend(&out, "__device__ const ", decl, "[", n, "] = {\n");
  size_t g = 0;
  size_t col = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (g < groups.size() && groups[g].first == i) {
      if (col != 0) absl::StrAppend(&out, "\n");
      absl::StrAppend(&out, "    // ", groups[g].second, "\n");
      ++g;
      col = 0;
      while (g < groups.size() && groups[g].first == i) ++g;  // empty groups: nothing to label
    }
    absl::StrAppend(&out, col == 0 ? "    " : " ", values[i], ",");
    if (++col == kPerLine) {
      absl::StrAppend(&out, "\n");
      col = 0;
    }
  }
  if (col != 0) absl::StrAppend(&out, "\n");
  if (values.empty()) absl::StrAppend(&out, "    0,  // unused\n");
  absl::StrAppend(&out, "};\n");
}

// Struct rows: each row is a brace-enclosed list, `per_line` rows per line.
void EmitStructArray(std::string& out, absl::string_view type, absl::string_view name,
                     const std::vector<std::vector<int64_t>>& rows, size_t width, int per_line,
                     const std::vector<std::pair<size_t, std::string>>& groups = {}) {
  const size_t n = std::max<size_t>(rows.size(), 1);
  absl::StrAppend(&out, "__device__ const syncopate::", type, " ", name, "[", n, "] = {\n");
  size_t g = 0;
  int col = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (g < groups.size() && groups[g].first == i) {
      if (col != 0) absl::StrAppend(&out, "\n");
      absl::StrAppend(&out, "    // ", groups[g].second, "\n");
      ++g;
      col = 0;
      while (g < groups.size() && groups[g].first == i) ++g;
    }
    absl::StrAppend(&out, col == 0 ? "    " : " ", "{", absl::StrJoin(rows[i], ", "), "},");
    if (++col == per_line) {
      absl::StrAppend(&out, "\n");
      col = 0;
    }
  }
  if (col != 0) absl::StrAppend(&out, "\n");
  if (rows.empty()) {
    absl::StrAppend(&out, "    {", absl::StrJoin(std::vector<int>(width, 0), ", "), "},  // unused\n");
  }
  absl::StrAppend(&out, "};\n");
}

int DeviceDTypeCode(plan::DType d) {
  switch (d) {
    case plan::DType::kF32: return 0;
    case plan::DType::kF16: return 1;
    case plan::DType::kBF16: return 2;
    case plan::DType::kF64: return 3;
    case plan::DType::kI32: return 4;
    case plan::DType::kI64: return 5;
    case plan::DType::kI8: return 6;
    case plan::DType::kU8: return 7;
  }
  return 0;
}

// Or'ed over ReduceCode for a reduction no other write can race (impl/types.cuh's
// kDevReducePlain).
constexpr int kReducePlainBit = 8;

int ReduceCode(plan::ReduceOp op) {
  switch (op) {
    case plan::ReduceOp::kNone: return 0;
    case plan::ReduceOp::kSum: return 1;
    case plan::ReduceOp::kMax: return 2;
  }
  return 0;
}

std::string ShortName(absl::string_view entry) {
  const size_t colon = entry.rfind(':');
  return std::string(colon == absl::string_view::npos ? entry : entry.substr(colon + 1));
}

std::string ShortHash(std::string_view data) { return Sha256Hex(data).substr(0, 16); }

size_t CountLines(std::string_view s) { return std::count(s.begin(), s.end(), '\n'); }

// A map with one node is today's single-node kernel: it must generate the very same source.
bool SpansNodes(const std::vector<int>& nodes) {
  return std::adjacent_find(nodes.begin(), nodes.end(), std::not_equal_to<int>()) != nodes.end();
}

const char* ScalarCType(ScalarType t) {
  switch (t) {
    case ScalarType::kI32: return "int";
    case ScalarType::kI64: return "long long";
    case ScalarType::kF32: return "float";
  }
  return "int";
}

std::string FootprintString(const OperandSpec& op) {
  std::vector<std::string> axes;
  for (const AxisFootprint& a : op.footprint) axes.push_back(a.ToString());
  return absl::StrJoin(axes, " ");
}

// Header comment, includes and the local kernel's source (with #line directives so NVRTC's log
// points into the kernel's own file).
std::string Prologue(const std::vector<std::string>& header_lines, const KernelSpec& spec,
                     std::string_view kernel_source, const CodegenOptions& options) {
  std::string out;
  for (const std::string& line : header_lines) absl::StrAppend(&out, "//", line.empty() ? "" : " ", line, "\n");
  absl::StrAppend(&out, "#include <syncopate/device.cuh>\n");
  bool bf16 = false, f16 = false;
  for (const OperandSpec* op : spec.Operands()) {
    bf16 |= op->dtype == plan::DType::kBF16;
    f16 |= op->dtype == plan::DType::kF16;
  }
  for (const std::string& a : spec.template_args) {
    bf16 |= a.find("__nv_bfloat16") != std::string::npos;
    f16 |= a.find("__half") != std::string::npos;
  }
  if (f16) absl::StrAppend(&out, "#include <cuda_fp16.h>\n");
  if (bf16) absl::StrAppend(&out, "#include <cuda_bf16.h>\n");
  absl::StrAppend(&out, "\n// ---- local kernel source: ", options.kernel_source_name, " ----\n");
  absl::StrAppend(&out, "#line 1 \"", options.kernel_source_name, "\"\n");
  out.append(kernel_source.data(), kernel_source.size());
  if (!kernel_source.empty() && kernel_source.back() != '\n') absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, "#line ", CountLines(out) + 2, " \"", kGeneratedFileName, "\"\n");
  absl::StrAppend(&out, "// ---- end of local kernel source ----\n\n");
  return out;
}

std::vector<std::string> SpecLines(const KernelSpec& spec, const std::vector<OperandSlot>& slots) {
  std::vector<std::string> lines;
  lines.push_back(absl::StrCat("kernel:  ", spec.entry, "<Schedule",
                               spec.template_args.empty() ? "" : ", ",
                               absl::StrJoin(spec.template_args, ", "), ">  (spec \"", spec.name,
                               "\")"));
  lines.push_back(absl::StrCat("tiles:   ", spec.tiles_m(), " x ", spec.tiles_n(), " = ",
                               spec.num_tiles(), " of ", spec.tile_m, " x ", spec.tile_n,
                               " over ", spec.problem_m, " x ", spec.problem_n, ", group_m ",
                               spec.group_m));
  lines.push_back(absl::StrCat("launch:  ", spec.block_threads, " threads, ",
                               spec.dynamic_smem_bytes, " bytes dynamic shared memory"));
  lines.push_back("operand slots (args.operands[slot]):");
  for (const OperandSlot& s : slots) {
    const OperandSpec* op = nullptr;
    for (const OperandSpec* o : spec.Operands()) {
      if (o->name == s.name && s.kernel_param) op = o;
    }
    lines.push_back(
        absl::StrCat("  ", s.slot, ": ", s.name, " ", plan::DTypeName(s.dtype), " [",
                     absl::StrJoin(s.shape, ", "), "] ",
                     s.kernel_param   ? OperandRoleName(s.role)
                     : s.rank_private ? "plan-only, rank-private"
                                      : "plan-only",
                     s.buffer.empty() ? "" : absl::StrCat(", plan buffer \"", s.buffer, "\""),
                     op != nullptr ? absl::StrCat(", footprint ", FootprintString(*op)) : ""));
  }
  std::vector<std::string> scalars;
  for (const KernelParam& p : spec.params) {
    if (const auto* s = std::get_if<ScalarSpec>(&p)) {
      scalars.push_back(absl::StrCat(s->name, "=", s->value));
    }
  }
  if (!scalars.empty()) lines.push_back(absl::StrCat("scalars: ", absl::StrJoin(scalars, " ")));
  return lines;
}

// True when no transfer on any rank waits for a tile: no outgoing chunk has producer tiles and
// no landing guard exists. Comm CTAs may then compute tiles after their program without a
// deadlock (no comm step ever waits for work dealt to a comm CTA, on this rank or a peer).
bool CommIndependentOfTiles(const LoweredSchedule& lw) {
  for (const RankSchedule& rs : lw.ranks) {
    if (!rs.guards.empty()) return false;
    for (const OutgoingChunk& c : rs.outgoing) {
      if (c.producers > 0) return false;
    }
  }
  return true;
}

// The call of the user's kernel template, shared by the fused and local entries.
std::string KernelCall(const KernelSpec& spec, absl::string_view schedule_type) {
  std::string out;
  absl::StrAppend(&out, "  ", spec.entry, "<", schedule_type);
  for (const std::string& a : spec.template_args) absl::StrAppend(&out, ", ", a);
  absl::StrAppend(&out, ">(\n      schedule");
  int slot = 0;
  for (const KernelParam& p : spec.params) {
    absl::StrAppend(&out, ",\n      ");
    if (const auto* s = std::get_if<ScalarSpec>(&p)) {
      absl::StrAppend(&out, "static_cast<", ScalarCType(s->type), ">(", s->value, ")  /* ",
                      s->name, " */");
      continue;
    }
    const OperandSpec& op = std::get<OperandSpec>(p);
    absl::StrAppend(&out, "static_cast<", DeviceTypeName(op.dtype), "*>(args.operands[", slot++,
                    "])  /* ", op.name, " */");
  }
  absl::StrAppend(&out, ");\n");
  return out;
}

void FillMetadata(const KernelSpec& spec, LaunchMetadata& md) {
  md.block_dim = spec.block_threads;
  md.dynamic_smem_bytes = spec.dynamic_smem_bytes;
  md.tiles_m = static_cast<int>(spec.tiles_m());
  md.tiles_n = static_cast<int>(spec.tiles_n());
  md.num_tiles = static_cast<int>(spec.num_tiles());
  for (const KernelParam& p : spec.params) {
    if (const auto* s = std::get_if<ScalarSpec>(&p)) md.scalars.push_back(*s);
  }
}

}  // namespace

const char* DeviceTypeName(plan::DType dtype) {
  switch (dtype) {
    case plan::DType::kF32: return "float";
    case plan::DType::kF16: return "__half";
    case plan::DType::kBF16: return "__nv_bfloat16";
    case plan::DType::kF64: return "double";
    case plan::DType::kI32: return "int";
    case plan::DType::kI64: return "long long";
    case plan::DType::kI8: return "signed char";
    case plan::DType::kU8: return "unsigned char";
  }
  return "void";
}

absl::StatusOr<GeneratedKernel> GenerateFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                                    std::string_view kernel_source,
                                                    const CodegenOptions& options) {
  ASSIGN_OR_RETURN(LoweredSchedule lowered, Lower(plan, spec, options.nodes));
  return GenerateFusedKernel(lowered, spec, kernel_source, options);
}

namespace {

// The fused kernel's tables as rows, every rank's concatenated in rank order, with a comment
// label where each group of rows (a rank's, a transfer's) begins.
struct FusedTables {
  using Groups = std::vector<std::pair<size_t, std::string>>;
  std::vector<int64_t> tile_order, wait_offsets, out_offsets, tile_out, out_base, chan_base,
      chan_ops;
  // Parallel to tile_out, two per entry: the tile's part of a chunk moved in tile parts, as a
  // row range of `segments` (0, 0 for other chunks). Emitted only when some chunk has parts, so
  // a schedule without generates the source it always did.
  std::vector<int64_t> tile_out_segs;
  bool tile_parts = false;
  // Every part in 16-byte units, a copy or a 16-bit float sum (TilePartsOf::vec16): a kernel may
  // move them from its staged tile.
  bool tile_parts_vec16 = true;
  std::vector<std::vector<int64_t>> waits, out_chunks, prog_ops, deps, segments;
  Groups g_order, g_woff, g_waits, g_ooff, g_tout, g_chunks, g_prog, g_deps, g_segs;
  std::vector<std::pair<int64_t, int64_t>> seg_range;  // by transfer id: its rows of `segments`
};

// The schedule was lowered for this spec (tile grid, one schedule per rank), for the node map
// the options name, and carries a record for every transfer it has segments for.
absl::Status CheckLoweredForSpec(const LoweredSchedule& lw, const KernelSpec& spec,
                                 const CodegenOptions& options) {
  RETURN_IF_ERROR(ValidateKernelSpec(spec));
  if (lw.num_tiles != spec.num_tiles() || static_cast<int>(lw.ranks.size()) != lw.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lowered schedule (", lw.num_tiles, " tiles, ", lw.ranks.size(),
        " ranks) does not belong to kernel spec \"", spec.name, "\" (", spec.num_tiles(), " tiles)"));
  }
  if (!options.nodes.empty() && options.nodes != lw.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("node map [", absl::StrJoin(options.nodes, ", "),
                                                   "] in the codegen options differs from "
                                                   "the lowered schedule's [",
                                                   absl::StrJoin(lw.nodes, ", "), "]"));
  }
  if (lw.transfers.size() != lw.segments.size()) {
    return absl::InternalError("lowered schedule lacks transfer records");
  }
  return absl::OkStatus();
}

// The entry symbol hashes everything the source depends on, so different plans, specs, kernel
// sources or multi-node maps never share a symbol (or a cache key).
std::string FusedEntrySymbol(const LoweredSchedule& lw, const KernelSpec& spec,
                             std::string_view kernel_source) {
  std::string identity =
      absl::StrCat(lw.plan_hash, "\n", FormatKernelSpec(spec), "\n", ToAbsl(kernel_source));
  if (SpansNodes(lw.nodes)) absl::StrAppend(&identity, "\nnodes ", absl::StrJoin(lw.nodes, " "));
  return absl::StrCat("syncopate_fused_", ShortName(spec.entry), "_", ShortHash(identity));
}

// Copy segments of every transfer, by id, and each transfer's row range of them.
void AddSegmentRows(const LoweredSchedule& lw, FusedTables& t) {
  t.seg_range.resize(lw.segments.size());
  for (size_t id = 0; id < lw.segments.size(); ++id) {
    if (!lw.segments[id].empty()) {
      t.g_segs.push_back({t.segments.size(), absl::StrCat("transfer ", id)});
    }
    t.seg_range[id].first = static_cast<int64_t>(t.segments.size());
    for (const CopySegment& s : lw.segments[id]) {
      t.segments.push_back({s.src_offset_bytes, s.dst_offset_bytes, s.row_bytes, s.rows,
                            s.src_pitch_bytes, s.dst_pitch_bytes});
    }
    t.seg_range[id].second = static_cast<int64_t>(t.segments.size());
  }
}

// One syncopate::TransferOp row for plan transfer `id` (the fields kOutChunks' comment lists).
absl::StatusOr<std::vector<int64_t>> TransferOpRow(const LoweredSchedule& lw,
                                                   const FusedTables& tables, int id, int dep_begin,
                                                   int dep_end, int ready_chunk, int producers,
                                                   int kind) {
  const LoweredTransfer& t = lw.transfers[id];
  const int src_slot = SlotOfBuffer(lw.slots, t.src_buffer);
  const int dst_slot = SlotOfBuffer(lw.slots, t.dst_buffer);
  if (src_slot < 0 || dst_slot < 0) {
    return absl::InternalError(absl::StrCat("transfer ", id, ": buffer without operand slot"));
  }
  const auto [seg_begin, seg_end] = tables.seg_range[id];
  const int reduce = ReduceCode(t.reduce) | (t.plain_reduce ? kReducePlainBit : 0);
  const int dtype = DeviceDTypeCode(t.dtype);
  return std::vector<int64_t>{id,        src_slot, dst_slot,    t.src_rank, t.dst_rank,
                              t.signal,  reduce,   dtype,       seg_begin,  seg_end,
                              dep_begin, dep_end,  ready_chunk, producers,  kind};
}

// Whether a part's segments, of a transfer with this reduction and dtype, can move in 16-byte
// units: a copy of anything, or a sum of 16-bit floats (one vector atomic per unit).
bool PartMovesIn16ByteUnits(const std::vector<CopySegment>& part, const LoweredTransfer& transfer) {
  const bool sum16 = transfer.reduce == plan::ReduceOp::kSum &&
                     (transfer.dtype == plan::DType::kF16 || transfer.dtype == plan::DType::kBF16);
  if (transfer.reduce != plan::ReduceOp::kNone && !sum16) return false;
  for (const CopySegment& s : part) {
    if (((s.src_offset_bytes | s.dst_offset_bytes | s.row_bytes) % 16) != 0) return false;
    if (s.rows > 1 && ((s.src_pitch_bytes | s.dst_pitch_bytes) % 16) != 0) return false;
  }
  return true;
}

// Tile `tile`'s part of rank rs's local chunk `c` (its tile_out_segs entry), its segments
// appended to the table when the chunk moves in tile parts.
void AddTilePartRows(const LoweredSchedule& lw, const RankSchedule& rs, int tile, int c,
                     FusedTables& t) {
  const bool outgoing = c < static_cast<int>(rs.outgoing.size());
  const OutgoingChunk* chunk = outgoing ? &rs.outgoing[c] : nullptr;
  if (chunk == nullptr || !chunk->tile_parts) {
    t.tile_out_segs.insert(t.tile_out_segs.end(), {0, 0});
    return;
  }
  t.tile_parts = true;
  const auto it =
      std::lower_bound(chunk->producer_tiles.begin(), chunk->producer_tiles.end(), tile);
  const std::vector<CopySegment>& part = chunk->part_segments[it - chunk->producer_tiles.begin()];
  t.tile_parts_vec16 =
      t.tile_parts_vec16 && PartMovesIn16ByteUnits(part, lw.transfers[chunk->transfer]);
  t.g_segs.push_back({t.segments.size(), absl::StrCat("rank ", rs.rank, " tile ", tile,
                                                      ": its part of transfer ", chunk->transfer)});
  t.tile_out_segs.push_back(static_cast<int64_t>(t.segments.size()));
  for (const CopySegment& s : part) {
    t.segments.push_back({s.src_offset_bytes, s.dst_offset_bytes, s.row_bytes, s.rows,
                          s.src_pitch_bytes, s.dst_pitch_bytes});
  }
  t.tile_out_segs.push_back(static_cast<int64_t>(t.segments.size()));
}

// Rank rs's tile order, wait sets and the chunks each tile counts into.
void AddTileRows(const LoweredSchedule& lw, const RankSchedule& rs, FusedTables& t) {
  const std::string r = absl::StrCat("rank ", rs.rank);
  t.g_order.push_back({t.tile_order.size(), r});
  for (int tile : rs.tile_order) t.tile_order.push_back(tile);
  t.g_woff.push_back({t.wait_offsets.size(), r});
  t.g_waits.push_back({t.waits.size(), r});
  t.g_ooff.push_back({t.out_offsets.size(), r});
  t.g_tout.push_back({t.tile_out.size(), r});
  for (int tile = 0; tile < lw.num_tiles; ++tile) {
    t.wait_offsets.push_back(static_cast<int64_t>(t.waits.size()));
    for (const TileWait& w : rs.waits[tile]) {
      t.waits.push_back({w.signal, rs.rank, w.transfer, w.peer});
    }
    t.out_offsets.push_back(static_cast<int64_t>(t.tile_out.size()));
    for (int c : rs.tile_outgoing[tile]) {
      t.tile_out.push_back(c);
      AddTilePartRows(lw, rs, tile, c, t);
    }
  }
}

// Rank rs's outgoing chunks, then its landing guards (kind 2, the guard's own signal word).
absl::Status AddChunkRows(const LoweredSchedule& lw, const RankSchedule& rs, FusedTables& t) {
  t.out_base.push_back(static_cast<int64_t>(t.out_chunks.size()));
  t.g_chunks.push_back({t.out_chunks.size(), absl::StrCat("rank ", rs.rank)});
  for (const OutgoingChunk& c : rs.outgoing) {
    const int kind = c.direct ? 1 : c.tile_parts ? 3 : 0;  // impl/types.cuh's ChunkKind
    ASSIGN_OR_RETURN(auto row, TransferOpRow(lw, t, c.transfer, 0, 0, -1, c.producers, kind));
    t.out_chunks.push_back(std::move(row));
  }
  for (const LandingGuard& g : rs.guards) {
    ASSIGN_OR_RETURN(auto row, TransferOpRow(lw, t, g.transfer, 0, 0, -1, g.producers, 2));
    row[5] = g.signal;  // the guard's own word on this rank, not the transfer's signal
    t.out_chunks.push_back(std::move(row));
  }
  return absl::OkStatus();
}

// Rank rs's transfer program: its non-empty channels' steps, each with its deps and guards.
absl::Status AddProgramRows(const LoweredSchedule& lw, const RankSchedule& rs, FusedTables& t) {
  const std::string r = absl::StrCat("rank ", rs.rank);
  t.chan_base.push_back(static_cast<int64_t>(t.chan_ops.size()));
  t.g_prog.push_back({t.prog_ops.size(), r});
  t.g_deps.push_back({t.deps.size(), r});
  for (const auto& channel : rs.program) {
    if (channel.empty()) continue;  // only channels with steps get a comm CTA
    t.chan_ops.push_back(static_cast<int64_t>(t.prog_ops.size()));
    const std::vector<bool> after_previous = StepsAfterPrevious(lw, channel);
    for (size_t i = 0; i < channel.size(); ++i) {
      const ProgramStep& step = channel[i];
      const int dep_begin = static_cast<int>(t.deps.size());
      for (int d : step.deps) {
        const LoweredTransfer& dt = lw.transfers[d];
        t.deps.push_back({dt.signal, dt.dst_rank, d, dt.rank});
      }
      for (const GuardRef& g : step.guards) {
        t.deps.push_back({g.signal, g.rank, step.transfer, g.rank});
      }
      // The last column: kAnyOrder (0) or kAfterPrevious (1), impl/types.cuh.
      ASSIGN_OR_RETURN(
          auto row, TransferOpRow(lw, t, step.transfer, dep_begin, static_cast<int>(t.deps.size()),
                                  step.ready_chunk, 0, after_previous[i] ? 1 : 0));
      t.prog_ops.push_back(std::move(row));
    }
  }
  return absl::OkStatus();
}

// Every table of the fused kernel; offset tables end with one past-the-end entry.
absl::StatusOr<FusedTables> BuildFusedTables(const LoweredSchedule& lw) {
  FusedTables t;
  AddSegmentRows(lw, t);
  for (const RankSchedule& rs : lw.ranks) {
    AddTileRows(lw, rs, t);
    RETURN_IF_ERROR(AddChunkRows(lw, rs, t));
    RETURN_IF_ERROR(AddProgramRows(lw, rs, t));
  }
  t.wait_offsets.push_back(static_cast<int64_t>(t.waits.size()));
  t.out_offsets.push_back(static_cast<int64_t>(t.tile_out.size()));
  t.out_base.push_back(static_cast<int64_t>(t.out_chunks.size()));
  t.chan_base.push_back(static_cast<int64_t>(t.chan_ops.size()));
  t.chan_ops.push_back(static_cast<int64_t>(t.prog_ops.size()));
  return t;
}

// The header comment: what the source was generated from, down to the entry symbol.
std::vector<std::string> FusedHeaderLines(const LoweredSchedule& lw, const KernelSpec& spec,
                                          const std::string& entry_symbol) {
  std::vector<std::string> header = {
      "Generated by Syncopate's overlap compiler. Do not edit; regenerate from the plan and spec.",
      "",
      absl::StrCat("plan:    \"", lw.plan_name, "\" (hash ", lw.plan_hash, ")"),
      absl::StrCat("ranks:   ", lw.world_size, " (tables for every rank, indexed by args.rank)"),
  };
  if (SpansNodes(lw.nodes)) {
    header.push_back(absl::StrCat("nodes:   ", absl::StrJoin(lw.nodes, " "),
                                  " (node of each rank; the host proxy moves inter-node chunks)"));
  }
  for (std::string& line : SpecLines(spec, lw.slots)) header.push_back(std::move(line));
  header.push_back(absl::StrCat("entry:   extern \"C\" __global__ void ", entry_symbol,
                                "(syncopate::FusedLaunchArgs args)"));
  return header;
}

// The tables as __device__ arrays, each with a comment saying how the schedule indexes it.
void EmitTableArrays(const FusedTables& t, std::string& src) {
  absl::StrAppend(&src,
                  "// Tile execution order per rank: canonical tile ids (m * kTilesN + n), waves "
                  "by estimated chunk\n// arrival, the kernel's own swizzle inside a wave. Rank r "
                  "at [r * kNumTiles, (r + 1) * kNumTiles).\n");
  EmitIntArray(src, "int kTileOrder", t.tile_order, t.g_order);
  absl::StrAppend(&src,
                  "\n// Wait sets: kWaits[kWaitOffsets[r * kNumTiles + tile] .. next) are the "
                  "signals tile `tile` of\n// rank r waits for.\n");
  EmitIntArray(src, "int kWaitOffsets", t.wait_offsets, t.g_woff);
  absl::StrAppend(&src, "// {signal, signal rank, plan transfer, delivering peer}\n");
  EmitStructArray(src, "WaitEntry", "kWaits", t.waits, 4, 4, t.g_waits);
  absl::StrAppend(&src,
                  "\n// Outgoing chunks each tile writes: kTileOut[kOutOffsets[r * kNumTiles + "
                  "tile] .. next) are\n// rank-local chunk indices (chunk_counters / chunk_ready "
                  "words).\n");
  EmitIntArray(src, "int kOutOffsets", t.out_offsets, t.g_ooff);
  EmitIntArray(src, "int kTileOut", t.tile_out, t.g_tout);
  if (t.tile_parts) {
    absl::StrAppend(&src,
                    "// Per kTileOut entry: the tile's own part of a chunk moved in tile parts, "
                    "kSegments rows\n// [kTileOutSegs[2 k], kTileOutSegs[2 k + 1]) (empty for "
                    "other chunks).\n");
    EmitIntArray(src, "int kTileOutSegs", t.tile_out_segs);
  }
  absl::StrAppend(&src,
                  "\n// Outgoing chunks of rank r: kOutChunks[kOutBase[r] .. kOutBase[r + 1]).\n");
  EmitIntArray(src, "int kOutBase", t.out_base);
  absl::StrAppend(
      &src,
      "// {transfer, src slot, dst slot, src rank, dst rank, signal, reduce (+8 plain), dtype, "
      "segments begin, end,\n//  deps begin, end, ready chunk, producers, kind (0 "
      "publish, 1 direct move, 2 landing guard",
      t.tile_parts ? ", 3 tile parts" : "", ")}\n");
  EmitStructArray(src, "TransferOp", "kOutChunks", t.out_chunks, 15, 1, t.g_chunks);
  absl::StrAppend(&src,
                  "\n// Transfer program (SM backend): rank r's channels are kChanOps[kChanBase[r] "
                  ".. kChanBase[r + 1]);\n// channel g's steps are kProgOps[kChanOps[g] .. "
                  "kChanOps[g + 1]), in plan order.\n");
  EmitIntArray(src, "int kChanBase", t.chan_base);
  EmitIntArray(src, "int kChanOps", t.chan_ops);
  absl::StrAppend(&src,
                  "// The same fields; the last: 1 when the step waits for its channel's previous "
                  "step (ProgramStepOrder)\n");
  EmitStructArray(src, "TransferOp", "kProgOps", t.prog_ops, 15, 1, t.g_prog);
  absl::StrAppend(&src, "// Step dependencies: {signal, signal rank, plan transfer, executing rank}\n");
  EmitStructArray(src, "WaitEntry", "kDeps", t.deps, 4, 4, t.g_deps);
  absl::StrAppend(&src,
                  "\n// Copy segments of every plan transfer: {src offset, dst offset, row bytes, "
                  "rows, src pitch, dst pitch}\n");
  EmitStructArray(src, "CopySegment", "kSegments", t.segments, 6, 1, t.g_segs);
}

// struct Tables: the constants and accessors FusedSchedule<Tables> reads.
void EmitTablesStruct(const LoweredSchedule& lw, const KernelSpec& spec, const FusedTables& t,
                      std::string& src) {
  absl::StrAppend(&src, "\nstruct Tables {\n");
  absl::StrAppend(&src, "  static constexpr int kWorldSize = ", lw.world_size, ";\n");
  absl::StrAppend(&src, "  static constexpr int kTilesM = ", lw.tiles_m, ";\n");
  absl::StrAppend(&src, "  static constexpr int kTilesN = ", lw.tiles_n, ";\n");
  absl::StrAppend(&src, "  static constexpr int kNumTiles = ", lw.num_tiles, ";\n");
  absl::StrAppend(&src, "  static constexpr int kGroupM = ", spec.group_m, ";\n");
  absl::StrAppend(&src, "  static constexpr bool kCommJoinsCompute = ",
                  CommIndependentOfTiles(lw) ? "true" : "false", ";\n");
  const std::pair<const char*, const char*> accessors[] = {
      {"int", "tile_order"},  {"int", "wait_offsets"}, {"syncopate::WaitEntry", "waits"},
      {"int", "out_offsets"}, {"int", "tile_out"},     {"int", "out_base"},
      {"syncopate::TransferOp", "out_chunks"},          {"int", "chan_base"},
      {"int", "chan_ops"},    {"syncopate::TransferOp", "prog_ops"},
      {"syncopate::WaitEntry", "deps"},                 {"syncopate::CopySegment", "segments"}};
  const char* arrays[] = {"kTileOrder", "kWaitOffsets", "kWaits",    "kOutOffsets",
                          "kTileOut",   "kOutBase",     "kOutChunks", "kChanBase",
                          "kChanOps",   "kProgOps",     "kDeps",      "kSegments"};
  for (size_t i = 0; i < std::size(arrays); ++i) {
    absl::StrAppend(&src, "  static SYNCOPATE_DEVICE const ", accessors[i].first, "* ",
                    accessors[i].second, "() { return ", arrays[i], "; }\n");
  }
  if (t.tile_parts) {  // FusedSchedule finds these through TilePartsOf<Tables>
    absl::StrAppend(&src, "  static constexpr bool kTileParts = true;\n");
    absl::StrAppend(&src, "  static constexpr bool kTilePartsVec16 = ",
                    t.tile_parts_vec16 ? "true" : "false", ";\n");
    absl::StrAppend(&src,
                    "  static SYNCOPATE_DEVICE const int* tile_out_segs() { return "
                    "kTileOutSegs; }\n");
  }
  absl::StrAppend(&src, "};\n");
}

// The entry: comm CTAs run the transfer program, control CTAs the gates and tails, compute CTAs
// the user's kernel over FusedSchedule<Tables>.
void EmitFusedEntry(const KernelSpec& spec, const std::string& entry_symbol, std::string& src) {
  absl::StrAppend(&src, "extern \"C\" __global__ void __launch_bounds__(", spec.block_threads,
                  ")\n", entry_symbol, "(syncopate::FusedLaunchArgs args) {\n");
  absl::StrAppend(&src, "  using Tables = syncopate_generated::Tables;\n");
  absl::StrAppend(&src, "  using Schedule = syncopate::FusedSchedule<Tables>;\n");
  absl::StrAppend(&src, "  if (args.rank < 0 || args.rank >= Tables::kWorldSize) return;\n");
  absl::StrAppend(&src,
                  "  syncopate::EnterLaunch(args);  // the device epoch, if the launch has one\n");
  absl::StrAppend(&src, "  syncopate::CtaTrace trace(args);  // no-op unless args.cta_trace\n");
  absl::StrAppend(&src, "  if (blockIdx.x < args.num_comm_ctas) {  // SM backend: move chunks\n");
  absl::StrAppend(&src, "    if (!syncopate::RunTransferProgram<Tables>(args)) return;\n");
  absl::StrAppend(&src, "    if (!Schedule::CommJoinsCompute(args)) return;  // else: on to tiles\n");
  absl::StrAppend(&src, "  } else if (blockIdx.x < args.num_comm_ctas + args.num_control_ctas) {  // gates, tails\n");
  absl::StrAppend(&src, "    syncopate::RunControlCta(args);\n    return;\n  }\n");
  absl::StrAppend(&src, "  Schedule schedule(args);\n");
  absl::StrAppend(&src, "  schedule.PublishUnproducedChunks();\n");
  absl::StrAppend(&src, KernelCall(spec, "Schedule"));
  absl::StrAppend(&src, "}\n");
}

// What the runtime needs to launch and feed the fused kernel (codegen.h's LaunchMetadata).
void FillFusedMetadata(const LoweredSchedule& lw, const KernelSpec& spec, LaunchMetadata& md) {
  FillMetadata(spec, md);
  md.fused = true;
  md.world_size = lw.world_size;
  md.num_signals = lw.max_signals;
  md.num_outgoing_chunks = lw.max_outgoing;
  md.num_plan_signals = lw.plan_signals;
  for (const RankSchedule& rs : lw.ranks) {
    std::vector<int> ids;
    for (const OutgoingChunk& c : rs.outgoing) ids.push_back(c.transfer);
    for (size_t g = 0; g < rs.guards.size(); ++g) ids.push_back(-1);
    md.outgoing_transfers.push_back(std::move(ids));
    std::vector<LaunchMetadata::Guard> guards;
    for (const LandingGuard& g : rs.guards) guards.push_back({g.transfer, g.signal});
    md.landing_guards.push_back(std::move(guards));
  }
  md.suggested_comm_ctas = lw.max_program_channels;
  md.operands = lw.slots;
  md.plan_hash = lw.plan_hash;
}

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateFusedKernel(const LoweredSchedule& lw,
                                                    const KernelSpec& spec,
                                                    std::string_view kernel_source,
                                                    const CodegenOptions& options) {
  RETURN_IF_ERROR(CheckLoweredForSpec(lw, spec, options));
  GeneratedKernel k;
  k.entry_symbol = FusedEntrySymbol(lw, spec, kernel_source);
  ASSIGN_OR_RETURN(const FusedTables tables, BuildFusedTables(lw));

  std::string& src = k.source;
  src = Prologue(FusedHeaderLines(lw, spec, k.entry_symbol), spec, kernel_source, options);
  absl::StrAppend(&src, "namespace syncopate_generated {\n\n");
  EmitTableArrays(tables, src);
  EmitTablesStruct(lw, spec, tables, src);
  absl::StrAppend(&src, "\n}  // namespace syncopate_generated\n\n");
  EmitFusedEntry(spec, k.entry_symbol, src);

  k.headers = DeviceHeaders();
  FillFusedMetadata(lw, spec, k.metadata);
  return k;
}

absl::StatusOr<GeneratedKernel> GenerateLocalKernel(const KernelSpec& spec,
                                                    std::string_view kernel_source,
                                                    const CodegenOptions& options) {
  RETURN_IF_ERROR(ValidateKernelSpec(spec));
  GeneratedKernel k;
  // push_tiles is the fused schedule's: the local kernel is the same with or without it.
  KernelSpec identity = spec;
  identity.push_tiles = false;
  k.entry_symbol = absl::StrCat(
      "syncopate_local_", ShortName(spec.entry), "_",
      ShortHash(absl::StrCat(FormatKernelSpec(identity), "\n", ToAbsl(kernel_source))));
  std::vector<OperandSlot> slots = SpecOperandSlots(spec);
  std::vector<std::string> header = {
      "Generated by Syncopate's overlap compiler. Do not edit; regenerate from the spec.",
      "",
      "variant: local (identity schedule: every tile, no waits, no signals)",
  };
  for (std::string& line : SpecLines(spec, slots)) header.push_back(std::move(line));
  header.push_back(absl::StrCat("entry:   extern \"C\" __global__ void ", k.entry_symbol,
                                "(syncopate::FusedLaunchArgs args)"));
  std::string& src = k.source;
  src = Prologue(header, spec, kernel_source, options);
  absl::StrAppend(&src, "extern \"C\" __global__ void __launch_bounds__(", spec.block_threads, ")\n",
                  k.entry_symbol, "(syncopate::FusedLaunchArgs args) {\n");
  absl::StrAppend(&src, "  syncopate::LocalSchedule schedule(", spec.tiles_m(), ", ",
                  spec.tiles_n(), ", ", spec.group_m, ", args.tile_counter);\n");
  absl::StrAppend(&src, KernelCall(spec, "syncopate::LocalSchedule"));
  absl::StrAppend(&src, "}\n");
  k.headers = DeviceHeaders();
  FillMetadata(spec, k.metadata);
  k.metadata.fused = false;
  k.metadata.operands = std::move(slots);
  return k;
}

}  // namespace syncopate::jit
