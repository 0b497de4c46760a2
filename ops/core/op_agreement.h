// What every rank of an op's group must agree on before the op allocates or compiles anything:
// the config fields and the path each M bucket takes decide which kernel a run at M launches and
// how its buffers are laid out, so ranks that differ there (other m_buckets, another tuning file
// in their cache_dir) would launch different kernels against each other and time out or compute
// garbage. Op::Create exchanges this rank's fields and names the first that differs.
// Standard library only (the ops' CPU tests cover it).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "syncopate/ops.h"

namespace syncopate::ops {

// (name, value) per field, in a fixed order, the buckets' paths included ("path@2048" ->
// "fused sm 2 chunks"). Fields a rank may set alone (timeout_ms, cache_dir) are left out.
// InvalidArgument where the config itself is (CheckConfig's and ChoosePath's errors).
Result<std::vector<std::pair<std::string, std::string>>> AgreedFields(const OpConfig& op,
                                                                      int world);

// The fields as one message, and back (name=value lines; neither holds a newline).
std::string EncodeAgreedFields(const std::vector<std::pair<std::string, std::string>>& fields);
std::vector<std::pair<std::string, std::string>> DecodeAgreedFields(const std::string& message);

// Where rank `peer`'s fields differ from this rank's, as one line naming the field and both
// values; nullopt when they agree.
std::optional<std::string> FirstDisagreement(
    const std::vector<std::pair<std::string, std::string>>& mine,
    const std::vector<std::pair<std::string, std::string>>& theirs, int peer);

}  // namespace syncopate::ops
