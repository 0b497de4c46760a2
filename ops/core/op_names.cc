// The ops' enums as text and back; see op_names.h.
#include "ops/core/op_names.h"

#include <initializer_list>

namespace syncopate::ops {
namespace {

// The value of `values` whose `name_of` is `name`.
template <class T, class NameOf>
std::optional<T> FromName(std::string_view name, std::initializer_list<T> values, NameOf name_of) {
  for (T v : values) {
    if (name == name_of(v)) return v;
  }
  return std::nullopt;
}

}  // namespace

const char* PathPreferenceName(PathPreference path) {
  static constexpr const char* kNames[] = {"auto", "fused", "unfused"};  // enum order
  const int i = static_cast<int>(path);
  return i >= 0 && i < 3 ? kNames[i] : "unknown";
}

const char* DTypeName(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

std::optional<OpKind> OpKindFromName(std::string_view name) {
  static constexpr const char* kShortNames[] = {"ag", "rs", "ar"};  // enum order
  auto short_name = [](OpKind kind) { return kShortNames[static_cast<int>(kind)]; };
  const std::initializer_list<OpKind> kinds = {
      OpKind::kAllGatherMatmul, OpKind::kMatmulReduceScatter, OpKind::kMatmulAllReduce};
  if (std::optional<OpKind> kind = FromName(name, kinds, short_name)) return kind;
  return FromName(name, kinds, OpKindName);
}

std::optional<Backend> BackendFromName(std::string_view name) {
  return FromName(name, {Backend::kAuto, Backend::kCopyEngine, Backend::kSm}, BackendName);
}

std::optional<PathPreference> PathPreferenceFromName(std::string_view name) {
  return FromName(name, {PathPreference::kAuto, PathPreference::kFused, PathPreference::kUnfused},
                  PathPreferenceName);
}

std::optional<DType> DTypeFromName(std::string_view name) {
  return FromName(name, {DType::kBF16, DType::kFP16}, DTypeName);
}

}  // namespace syncopate::ops
