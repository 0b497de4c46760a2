// syncopate::Status (the installed APIs' standard-library-only error type) <-> absl::Status (the
// layers inside), for the code of this project that speaks both: the ops, the client library,
// the CLI, tests and benches. The codes are the same numbers on both sides (gRPC's canonical
// codes). Not installed: consumers of the installed headers never see abseil.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "syncopate/status.h"

namespace syncopate {

inline Status FromAbsl(const absl::Status& status) {
  if (status.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(status.code()), std::string(status.message()));
}

// `context`, when given, leads the message ("context: message"), naming what failed.
inline absl::Status ToAbsl(const Status& status, absl::string_view context = "") {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(
      static_cast<absl::StatusCode>(status.code()),
      context.empty() ? status.message() : absl::StrCat(context, ": ", status.message()));
}

}  // namespace syncopate
