// The ops' enums as text and back: what the agreement message, the `syncopate ops` CLI and
// ops_bench print and take. OpKindName and BackendName (syncopate/ops.h) are the public pair;
// these are internal. Standard library only.
#pragma once

#include <optional>
#include <string_view>

#include "syncopate/ops.h"

namespace syncopate::ops {

const char* PathPreferenceName(PathPreference path);  // "auto", "fused", "unfused"
const char* DTypeName(DType dtype);                   // "bf16", "fp16"

// The inverses; nullopt for any other text. An op kind also by its short name ("ag", "rs",
// "ar").
std::optional<OpKind> OpKindFromName(std::string_view name);
std::optional<Backend> BackendFromName(std::string_view name);
std::optional<PathPreference> PathPreferenceFromName(std::string_view name);
std::optional<DType> DTypeFromName(std::string_view name);

}  // namespace syncopate::ops
