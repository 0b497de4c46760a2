// Replacing a small file so that readers see the whole old or the whole new contents: a temp
// file in the same folder (a name no other writer, thread or process, uses), fsync'ed, renamed
// over the target, then the folder synced. The folder must exist. Errors carry the errno and the
// path at fault. Used by the tuning tables (jit/tune, ops/core).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace syncopate {

absl::Status ReplaceFileAtomically(const std::string& path, std::string_view contents);

}  // namespace syncopate
