// The C ABI's bootstrap (syncopate_allgather_fn, syncopate_ops.h) as the C++ API's
// GroupConfig::bootstrap. Internal to libsyncopate; its own file so a test can drive it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "syncopate/status.h"
#include "syncopate/syncopate_ops.h"

namespace syncopate::ops {

// Each rank's message arrives through the deliver function the C callback is given; a rank
// delivered out of range, or a gap (rank r delivered, a lower one not), is InvalidArgument
// naming it; a non-OK code from the callback is returned with its name.
std::function<Status(const std::string&, std::vector<std::string>*)> BootstrapOf(
    syncopate_allgather_fn fn, void* user_data);

}  // namespace syncopate::ops
