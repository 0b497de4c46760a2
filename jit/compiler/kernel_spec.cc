// Kernel specs: validation, plan checks, the key = value text format and example factories.
// Pure functions; thread-compatible.
#include "jit/compiler/kernel_spec.h"

#include <cctype>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "syncopate/launch_abi.h"

namespace syncopate::jit {
namespace {

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// A qualified C++ name: identifiers joined by "::".
bool IsQualifiedName(absl::string_view s) {
  for (absl::string_view part : absl::StrSplit(s, "::")) {
    if (!IsIdentifier(part)) return false;
  }
  return !s.empty();
}

std::string ShapeString(const plan::Shape& shape) { return absl::StrJoin(shape, "x"); }

std::string OperandLabel(const OperandSpec& op) {
  if (op.buffer.empty()) return absl::StrCat("operand ", op.name, " (", OperandRoleName(op.role), ")");
  return absl::StrCat("operand ", op.name, " (", OperandRoleName(op.role), ", plan buffer \"",
                      op.buffer, "\")");
}

absl::StatusOr<AffineExpr> ParseAffine(absl::string_view text) {
  AffineExpr e;
  std::string s;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) s.push_back(c);
  }
  if (s.empty()) return absl::InvalidArgumentError("empty affine expression");
  size_t i = 0;
  while (i < s.size()) {
    int64_t sign = 1;
    if (s[i] == '+' || s[i] == '-') {
      sign = s[i] == '-' ? -1 : 1;
      ++i;
    }
    size_t j = i;
    while (j < s.size() && s[j] != '+' && s[j] != '-') ++j;
    absl::string_view term(s.data() + i, j - i);
    if (term.empty()) return absl::InvalidArgumentError(absl::StrCat("bad affine expression \"", text, "\""));
    int64_t coeff = 1;
    char var = 0;
    const size_t star = term.find('*');
    if (star != absl::string_view::npos) {
      if (!absl::SimpleAtoi(term.substr(0, star), &coeff) || star + 2 != term.size()) {
        return absl::InvalidArgumentError(absl::StrCat("bad term \"", term, "\" in \"", text,
                                                       "\" (expected C*m, C*n, m, n or C)"));
      }
      var = term[star + 1];
    } else if (term == "m" || term == "n") {
      var = term[0];
    } else if (!absl::SimpleAtoi(term, &coeff)) {
      return absl::InvalidArgumentError(absl::StrCat("bad term \"", term, "\" in \"", text,
                                                     "\" (expected C*m, C*n, m, n or C)"));
    }
    coeff *= sign;
    if (var == 'm') {
      e.cm += coeff;
    } else if (var == 'n') {
      e.cn += coeff;
    } else if (var == 0) {
      e.c0 += coeff;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown variable '", std::string(1, var),
                                                     "' in \"", text, "\" (only m and n)"));
    }
    i = j;
  }
  return e;
}

absl::StatusOr<AxisFootprint> ParseAxis(absl::string_view text) {
  AxisFootprint a;
  if (text == "*") return a;
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad footprint \"", text, "\" (expected begin:extent or *)"));
  }
  ASSIGN_OR_RETURN(a.begin, ParseAffine(text.substr(0, colon)));
  if (!absl::SimpleAtoi(text.substr(colon + 1), &a.extent) || a.extent <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad footprint extent in \"", text, "\" (expected a positive integer)"));
  }
  return a;
}

absl::StatusOr<OperandRole> ParseRole(absl::string_view s) {
  if (s == "consumed") return OperandRole::kConsumed;
  if (s == "produced") return OperandRole::kProduced;
  if (s == "local") return OperandRole::kLocal;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role \"", s, "\" (expected consumed, produced or local)"));
}

absl::StatusOr<ScalarType> ParseScalarType(absl::string_view s) {
  if (s == "i32") return ScalarType::kI32;
  if (s == "i64") return ScalarType::kI64;
  if (s == "f32") return ScalarType::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scalar type \"", s, "\" (expected i32, i64 or f32)"));
}

absl::Status CheckScalarValue(const ScalarSpec& s) {
  if (s.type == ScalarType::kF32) {
    double d;
    if (!absl::SimpleAtod(s.value, &d) || s.value.find_first_of("xXnN") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("scalar ", s.name, ": \"", s.value, "\" is not a decimal number"));
    }
    return absl::OkStatus();
  }
  int64_t v;
  if (!absl::SimpleAtoi(s.value, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scalar ", s.name, ": \"", s.value, "\" is not an integer"));
  }
  if (s.type == ScalarType::kI32 && (v < INT32_MIN || v > INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scalar ", s.name, ": ", s.value, " does not fit in i32"));
  }
  return absl::OkStatus();
}

absl::StatusOr<OperandSpec> ParseOperand(absl::string_view value) {
  std::vector<absl::string_view> f = absl::StrSplit(value, ' ', absl::SkipWhitespace());
  if (f.size() < 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operand \"", value, "\": expected name dtype role buffer shape footprint..."));
  }
  OperandSpec op;
  op.name = std::string(f[0]);
  auto with_name = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat("operand ", op.name, ": ", s.message()));
  };
  auto dtype = plan::ParseDType(std::string_view(f[1].data(), f[1].size()));
  if (!dtype.ok()) return with_name(dtype.status());
  op.dtype = *dtype;
  auto role = ParseRole(f[2]);
  if (!role.ok()) return with_name(role.status());
  op.role = *role;
  if (f[3] != "-") op.buffer = std::string(f[3]);
  for (absl::string_view d : absl::StrSplit(f[4], 'x')) {
    int64_t dim;
    if (!absl::SimpleAtoi(d, &dim)) {
      return with_name(absl::InvalidArgumentError(absl::StrCat("bad shape \"", f[4], "\"")));
    }
    op.shape.push_back(dim);
  }
  for (size_t i = 5; i < f.size(); ++i) {
    auto axis = ParseAxis(f[i]);
    if (!axis.ok()) return with_name(axis.status());
    op.footprint.push_back(*axis);
  }
  return op;
}

template <class Int>
absl::Status ParseInt(absl::string_view key, absl::string_view value, Int* out) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec key ", key, ": \"", value, "\" is not an integer"));
  }
  *out = static_cast<Int>(v);
  return absl::OkStatus();
}

absl::Status ParseBool(absl::string_view key, absl::string_view value, bool* out) {
  if (value != "true" && value != "false") {
    return absl::InvalidArgumentError(
        absl::StrCat("spec key ", key, ": \"", value, "\" is not true or false"));
  }
  *out = value == "true";
  return absl::OkStatus();
}

OperandSpec MakeOperand(std::string name, plan::DType dtype, OperandRole role, std::string buffer,
                        plan::Shape shape, std::vector<AxisFootprint> footprint) {
  OperandSpec op;
  op.name = std::move(name);
  op.dtype = dtype;
  op.role = role;
  op.buffer = std::move(buffer);
  op.shape = std::move(shape);
  op.footprint = std::move(footprint);
  return op;
}

AxisFootprint Tiled(int64_t cm, int64_t cn, int64_t extent) {
  return AxisFootprint{AffineExpr{cm, cn, 0}, extent};
}
AxisFootprint WholeAxis() { return AxisFootprint{}; }

ScalarSpec Scalar(std::string name, ScalarType type, std::string value) {
  return ScalarSpec{std::move(name), type, std::move(value)};
}

const char* CTypeOf(plan::DType dtype) {
  return dtype == plan::DType::kF16 ? "__half" : "__nv_bfloat16";
}

// examples/kernels/gemm_mma.cuh: BK = 32 padded to 40 halves per smem row, 3 stages.
int GemmSmemBytes(int64_t tile_m, int64_t tile_n) {
  return static_cast<int>((tile_m + tile_n) * 40 * 2 * 3);
}

KernelSpec GemmBase(int64_t m, int64_t n, int64_t k, plan::DType dtype, int64_t tile_m,
                    int64_t tile_n) {
  KernelSpec s;
  s.entry = "syncopate_examples::gemm_mma";
  s.template_args = {CTypeOf(dtype), absl::StrCat(tile_m), absl::StrCat(tile_n)};
  s.problem_m = m;
  s.problem_n = n;
  s.tile_m = tile_m;
  s.tile_n = tile_n;
  s.group_m = 8;
  s.block_threads = 256;
  s.dynamic_smem_bytes = GemmSmemBytes(tile_m, tile_n);
  return s;
}

void AddGemmScalars(KernelSpec& s, int64_t m, int64_t n, int64_t k) {
  s.params.push_back(Scalar("M", ScalarType::kI32, absl::StrCat(m)));
  s.params.push_back(Scalar("N", ScalarType::kI32, absl::StrCat(n)));
  s.params.push_back(Scalar("K", ScalarType::kI32, absl::StrCat(k)));
}

}  // namespace

const char* OperandRoleName(OperandRole role) {
  switch (role) {
    case OperandRole::kConsumed: return "consumed";
    case OperandRole::kProduced: return "produced";
    case OperandRole::kLocal: return "local";
  }
  return "?";
}

const char* ScalarTypeName(ScalarType type) {
  switch (type) {
    case ScalarType::kI32: return "i32";
    case ScalarType::kI64: return "i64";
    case ScalarType::kF32: return "f32";
  }
  return "?";
}

std::string AffineExpr::ToString() const {
  std::string out;
  auto term = [&](int64_t c, const char* var) {
    if (c == 0) return;
    if (!out.empty() || c < 0) absl::StrAppend(&out, c < 0 ? "-" : "+");
    const int64_t a = c < 0 ? -c : c;
    if (var[0] == 0) {
      absl::StrAppend(&out, a);
    } else if (a == 1) {
      absl::StrAppend(&out, var);
    } else {
      absl::StrAppend(&out, a, "*", var);
    }
  };
  term(cm, "m");
  term(cn, "n");
  term(c0, "");
  return out.empty() ? "0" : out;
}

std::string AxisFootprint::ToString() const {
  if (whole()) return "*";
  return absl::StrCat(begin.ToString(), ":", extent);
}

plan::Region OperandSpec::Footprint(int64_t m, int64_t n) const {
  plan::Box box;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t lo = 0, hi = shape[d];
    if (d < footprint.size() && !footprint[d].whole()) {
      lo = footprint[d].begin.Eval(m, n);
      hi = lo + footprint[d].extent;
    }
    lo = std::clamp<int64_t>(lo, 0, shape[d]);
    hi = std::clamp<int64_t>(hi, lo, shape[d]);
    box.lo.push_back(lo);
    box.hi.push_back(hi);
  }
  return plan::Region({box});
}

std::vector<const OperandSpec*> KernelSpec::Operands() const {
  std::vector<const OperandSpec*> out;
  for (const KernelParam& p : params) {
    if (const auto* op = std::get_if<OperandSpec>(&p)) out.push_back(op);
  }
  return out;
}

absl::Status ValidateKernelSpec(const KernelSpec& spec) {
  if (!IsQualifiedName(spec.entry)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel spec entry \"", spec.entry, "\" is not a (qualified) C++ identifier"));
  }
  for (const std::string& arg : spec.template_args) {
    if (arg.empty() || arg.find_first_of("\n;{}\"") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel spec template argument \"", arg, "\" is empty or not a type/value"));
    }
  }
  if (spec.problem_m <= 0 || spec.problem_n <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kernel spec problem size ", spec.problem_m,
                                                   " x ", spec.problem_n, " must be positive"));
  }
  if (spec.tile_m <= 0 || spec.tile_n <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kernel spec tile size ", spec.tile_m, " x ",
                                                   spec.tile_n, " must be positive"));
  }
  if (spec.num_tiles() > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel spec has ", spec.num_tiles(), " tiles; at most 2^24 supported"));
  }
  if (spec.group_m < 1) {
    return absl::InvalidArgumentError(absl::StrCat("kernel spec group_m ", spec.group_m, " < 1"));
  }
  if (spec.block_threads < 1 || spec.block_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel spec block_threads ", spec.block_threads, " not in 1..1024"));
  }
  if (spec.dynamic_smem_bytes < 0) {
    return absl::InvalidArgumentError("kernel spec dynamic_smem_bytes is negative");
  }
  std::set<std::string> names;
  int operands = 0;
  for (const KernelParam& p : spec.params) {
    const std::string& name = std::visit([](const auto& x) -> const std::string& { return x.name; }, p);
    if (!IsIdentifier(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel spec parameter name \"", name, "\" is not an identifier"));
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("kernel spec parameter ", name, " appears twice"));
    }
    if (const auto* s = std::get_if<ScalarSpec>(&p)) {
      RETURN_IF_ERROR(CheckScalarValue(*s));
      continue;
    }
    const OperandSpec& op = std::get<OperandSpec>(p);
    ++operands;
    if (op.role != OperandRole::kLocal && op.buffer.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(OperandLabel(op), ": a ", OperandRoleName(op.role),
                       " operand must be bound to a plan buffer"));
    }
    if (op.shape.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(OperandLabel(op), ": shape is empty"));
    }
    for (size_t d = 0; d < op.shape.size(); ++d) {
      if (op.shape[d] <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(OperandLabel(op), ": dim ", d, " is ", op.shape[d], ", must be positive"));
      }
    }
    if (op.footprint.size() != op.shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          OperandLabel(op), ": footprint has ", op.footprint.size(), " axes but the shape ",
          ShapeString(op.shape), " has ", op.shape.size()));
    }
  }
  if (operands > kMaxOperands) {
    return absl::InvalidArgumentError(absl::StrCat("kernel spec has ", operands,
                                                   " operands; the launch ABI carries at most ",
                                                   kMaxOperands));
  }
  return absl::OkStatus();
}

absl::Status CheckSpecAgainstPlan(const KernelSpec& spec, const plan::Plan& plan) {
  RETURN_IF_ERROR(ValidateKernelSpec(spec));
  for (const OperandSpec* op : spec.Operands()) {
    if (op->buffer.empty()) continue;
    const plan::BufferSpec* buf = plan.FindBuffer(op->buffer);
    if (buf == nullptr) {
      std::vector<std::string> known;
      for (const plan::BufferSpec& b : plan.buffers) known.push_back(absl::StrCat("\"", b.name, "\""));
      return absl::InvalidArgumentError(absl::StrCat(OperandLabel(*op), ": plan \"", plan.name,
                                                     "\" has no such buffer (it has ",
                                                     absl::StrJoin(known, ", "), ")"));
    }
    if (buf->dtype != op->dtype) {
      return absl::InvalidArgumentError(absl::StrCat(OperandLabel(*op), ": dtype is ",
                                                     plan::DTypeName(op->dtype), " in the spec but ",
                                                     plan::DTypeName(buf->dtype), " in the plan"));
    }
    if (buf->shape.size() != op->shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          OperandLabel(*op), ": rank is ", op->shape.size(), " in the spec (", ShapeString(op->shape),
          ") but ", buf->shape.size(), " in the plan (", ShapeString(buf->shape), ")"));
    }
    for (size_t d = 0; d < op->shape.size(); ++d) {
      if (op->shape[d] != buf->shape[d]) {
        return absl::InvalidArgumentError(absl::StrCat(OperandLabel(*op), ": dim ", d, " is ",
                                                       op->shape[d], " in the spec but ",
                                                       buf->shape[d], " in the plan"));
      }
    }
    if (buf->strides != plan::RowMajorStrides(buf->shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          OperandLabel(*op), ": plan buffer strides ", absl::StrJoin(buf->strides, ","),
          " are not row-major; kernels address operands as dense row-major tensors"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelSpec> ParseKernelSpec(std::string_view std_text) {
  const absl::string_view text(std_text.data(), std_text.size());
  KernelSpec spec;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = raw;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel spec line ", line_no, ": expected key = value, got \"", line, "\""));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    absl::Status st;
    if (key == "name") {
      spec.name = std::string(value);
    } else if (key == "entry") {
      spec.entry = std::string(value);
    } else if (key == "template_args") {
      spec.template_args.clear();
      // Empty: a kernel that is not a template (what FormatKernelSpec writes for one).
      if (!value.empty()) {
        for (absl::string_view a : absl::StrSplit(value, ',')) {
          spec.template_args.emplace_back(absl::StripAsciiWhitespace(a));
        }
      }
    } else if (key == "problem_m") {
      st = ParseInt(key, value, &spec.problem_m);
    } else if (key == "problem_n") {
      st = ParseInt(key, value, &spec.problem_n);
    } else if (key == "tile_m") {
      st = ParseInt(key, value, &spec.tile_m);
    } else if (key == "tile_n") {
      st = ParseInt(key, value, &spec.tile_n);
    } else if (key == "group_m") {
      st = ParseInt(key, value, &spec.group_m);
    } else if (key == "block_threads") {
      st = ParseInt(key, value, &spec.block_threads);
    } else if (key == "dynamic_smem_bytes") {
      st = ParseInt(key, value, &spec.dynamic_smem_bytes);
    } else if (key == "push_tiles") {
      st = ParseBool(key, value, &spec.push_tiles);
    } else if (key == "operand") {
      auto op = ParseOperand(value);
      if (op.ok()) spec.params.push_back(*std::move(op));
      st = op.status();
    } else if (key == "scalar") {
      std::vector<absl::string_view> f = absl::StrSplit(value, ' ', absl::SkipWhitespace());
      if (f.size() != 3) {
        st = absl::InvalidArgumentError(
            absl::StrCat("scalar \"", value, "\": expected name type value"));
      } else {
        auto type = ParseScalarType(f[1]);
        st = type.status();
        if (type.ok()) {
          ScalarSpec scalar = Scalar(std::string(f[0]), *type, std::string(f[2]));
          st = CheckScalarValue(scalar);
          spec.params.push_back(std::move(scalar));
        }
      }
    } else {
      st = absl::InvalidArgumentError(absl::StrCat("unknown key \"", key, "\""));
    }
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel spec line ", line_no, ": ", st.message()));
    }
  }
  RETURN_IF_ERROR(ValidateKernelSpec(spec));
  return spec;
}

std::string FormatKernelSpec(const KernelSpec& spec) {
  std::string out;
  absl::StrAppend(&out, "name = ", spec.name, "\n");
  absl::StrAppend(&out, "entry = ", spec.entry, "\n");
  absl::StrAppend(&out, "template_args = ", absl::StrJoin(spec.template_args, ", "), "\n");
  absl::StrAppend(&out, "problem_m = ", spec.problem_m, "\n");
  absl::StrAppend(&out, "problem_n = ", spec.problem_n, "\n");
  absl::StrAppend(&out, "tile_m = ", spec.tile_m, "\n");
  absl::StrAppend(&out, "tile_n = ", spec.tile_n, "\n");
  absl::StrAppend(&out, "group_m = ", spec.group_m, "\n");
  absl::StrAppend(&out, "block_threads = ", spec.block_threads, "\n");
  absl::StrAppend(&out, "dynamic_smem_bytes = ", spec.dynamic_smem_bytes, "\n");
  // Only when set: a spec without it formats (and so hashes, names its entry and keys its cache
  // entries) as before the field existed.
  if (spec.push_tiles) absl::StrAppend(&out, "push_tiles = true\n");
  for (const KernelParam& p : spec.params) {
    if (const auto* s = std::get_if<ScalarSpec>(&p)) {
      absl::StrAppend(&out, "scalar = ", s->name, " ", ScalarTypeName(s->type), " ", s->value, "\n");
      continue;
    }
    const OperandSpec& op = std::get<OperandSpec>(p);
    absl::StrAppend(&out, "operand = ", op.name, " ", plan::DTypeName(op.dtype), " ",
                    OperandRoleName(op.role), " ", op.buffer.empty() ? "-" : op.buffer, " ",
                    ShapeString(op.shape));
    for (const AxisFootprint& a : op.footprint) absl::StrAppend(&out, " ", a.ToString());
    absl::StrAppend(&out, "\n");
  }
  return out;
}

KernelSpec GemmSpecForAllGather(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                int64_t tile_m, int64_t tile_n) {
  KernelSpec s = GemmBase(m, n, k, dtype, tile_m, tile_n);
  s.name = "gemm_allgather";
  s.params.push_back(MakeOperand("A", dtype, OperandRole::kConsumed, "data", {m, k},
                                 {Tiled(tile_m, 0, tile_m), WholeAxis()}));
  s.params.push_back(MakeOperand("B", dtype, OperandRole::kLocal, "", {n, k},
                                 {Tiled(0, tile_n, tile_n), WholeAxis()}));
  s.params.push_back(MakeOperand("C", dtype, OperandRole::kLocal, "", {m, n},
                                 {Tiled(tile_m, 0, tile_m), Tiled(0, tile_n, tile_n)}));
  AddGemmScalars(s, m, n, k);
  return s;
}

KernelSpec GemmSpecForReduceScatter(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                    int64_t tile_m, int64_t tile_n) {
  KernelSpec s = GemmBase(m, n, k, dtype, tile_m, tile_n);
  s.name = "gemm_reducescatter";
  s.params.push_back(MakeOperand("A", dtype, OperandRole::kLocal, "", {m, k},
                                 {Tiled(tile_m, 0, tile_m), WholeAxis()}));
  s.params.push_back(MakeOperand("B", dtype, OperandRole::kLocal, "", {n, k},
                                 {Tiled(0, tile_n, tile_n), WholeAxis()}));
  s.params.push_back(MakeOperand("C", dtype, OperandRole::kProduced, "input", {m, n},
                                 {Tiled(tile_m, 0, tile_m), Tiled(0, tile_n, tile_n)}));
  AddGemmScalars(s, m, n, k);
  return s;
}

int GemmWgmmaSmemBytes(int64_t tile_m, int64_t tile_n, int stages) {
  // The kernel's StagedEpilogueFits(): the same rule, the same limit.
  const int64_t main = stages * (tile_m + tile_n) * 128 + 2048;
  const int64_t staged = main + tile_m * tile_n * 2;
  return static_cast<int>(staged <= kHopperMaxDynamicSmem ? staged : main);
}

namespace {

// The mma.sync spec with the wgmma kernel's entry, template arguments and launch shape.
KernelSpec ToWgmma(KernelSpec s, plan::DType dtype, int64_t tile_m, int64_t tile_n, int stages) {
  s.entry = "syncopate_examples::gemm_wgmma";
  s.template_args = {CTypeOf(dtype), absl::StrCat(tile_m), absl::StrCat(tile_n),
                     absl::StrCat(stages)};
  s.block_threads = 384;
  s.dynamic_smem_bytes = GemmWgmmaSmemBytes(tile_m, tile_n, stages);
  s.name += "_wgmma";
  return s;
}

}  // namespace

KernelSpec GemmWgmmaSpecForAllGather(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                     int64_t tile_m, int64_t tile_n, int stages) {
  return ToWgmma(GemmSpecForAllGather(m, n, k, dtype, tile_m, tile_n), dtype, tile_m, tile_n,
                 stages);
}

KernelSpec GemmWgmmaSpecForReduceScatter(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                         int64_t tile_m, int64_t tile_n, int stages) {
  return ToWgmma(GemmSpecForReduceScatter(m, n, k, dtype, tile_m, tile_n), dtype, tile_m, tile_n,
                 stages);
}

KernelSpec RmsNormSpecForAllGather(int64_t rows, int64_t cols, plan::DType dtype,
                                   int64_t tile_rows) {
  KernelSpec s;
  s.name = "rmsnorm_allgather";
  s.entry = "syncopate_examples::rms_norm";
  const char* ctype = dtype == plan::DType::kF32 ? "float" : CTypeOf(dtype);
  s.template_args = {ctype, absl::StrCat(tile_rows)};
  s.problem_m = rows;
  s.problem_n = 1;
  s.tile_m = tile_rows;
  s.tile_n = 1;
  s.group_m = 1;
  s.block_threads = 256;
  s.params.push_back(MakeOperand("X", dtype, OperandRole::kConsumed, "data", {rows, cols},
                                 {Tiled(tile_rows, 0, tile_rows), WholeAxis()}));
  s.params.push_back(MakeOperand("Y", dtype, OperandRole::kLocal, "", {rows, cols},
                                 {Tiled(tile_rows, 0, tile_rows), WholeAxis()}));
  s.params.push_back(Scalar("rows", ScalarType::kI32, absl::StrCat(rows)));
  s.params.push_back(Scalar("cols", ScalarType::kI32, absl::StrCat(cols)));
  s.params.push_back(Scalar("eps", ScalarType::kF32, "1e-6"));
  return s;
}

}  // namespace syncopate::jit
