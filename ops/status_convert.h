// absl::Status (the layers below) <-> syncopate::Status (the ops' public, standard-library-only
// error type): the same canonical code numbers, the same message.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "syncopate/status.h"

namespace syncopate::ops {

inline Status FromAbsl(const absl::Status& status) {
  if (status.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status ToAbsl(const Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

}  // namespace syncopate::ops
