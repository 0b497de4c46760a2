// See include/syncopate/status.h.
#include "syncopate/status.h"

#include <cstdio>
#include <cstdlib>

namespace syncopate {

const char* StatusCodeName(StatusCode code) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",         "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",  "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",     "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index <= 16 ? kNames[index] : "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

void DieOnBadResultAccess(const Status& status) {
  std::fprintf(stderr, "syncopate: value of a failed Result accessed: %s\n",
               status.ToString().c_str());
  std::abort();
}

}  // namespace syncopate
