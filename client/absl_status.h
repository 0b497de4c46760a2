// The client's Status as an absl::Status, for code that links the client library into layers
// that speak absl (the UCX bootstrap, the runtime's kernel fetcher, the CLI). The codes are the
// same numbers on both sides: both are gRPC's.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "syncopate/status.h"

namespace syncopate {

// `context`, when given, leads the message ("context: message"), naming what failed.
inline absl::Status ToAbslStatus(const Status& status, absl::string_view context = "") {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.code()),
                      context.empty() ? status.message()
                                      : absl::StrCat(context, ": ", status.message()));
}

}  // namespace syncopate
