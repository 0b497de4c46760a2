// Durable file writes. ReplaceFileAtomically replaces a small file so that readers see the whole
// old or the whole new contents: a temp file in the same folder (a name no other writer, thread
// or process, uses), written by WriteNewFileDurably, renamed over the target, then the folder
// synced. The folder must exist. Errors carry the errno and the path at fault. Used by the
// tuning tables (jit/tune, ops/core) and, for its temp entries, the kernel cache's disk store.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace syncopate {

// Creates `path` (which must not exist) with `contents`, fsync'ed; removes it on failure.
// `exact_mode`: the file gets `mode` whatever the umask.
absl::Status WriteNewFileDurably(const std::string& path, std::string_view contents,
                                 mode_t mode = 0644, bool exact_mode = false);

absl::Status ReplaceFileAtomically(const std::string& path, std::string_view contents);

}  // namespace syncopate
