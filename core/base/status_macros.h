// Propagation macros for absl::Status / absl::StatusOr.
//
// Debian's abseil (20220623) predates abseil's own RETURN_IF_ERROR / ASSIGN_OR_RETURN, so these
// are ours. They add no context of their own: the function that first knows what went wrong
// writes the message (UCX's rule), callers only pass it up.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SYNCOPATE_CONCAT_INNER_(a, b) a##b
#define SYNCOPATE_CONCAT_(a, b) SYNCOPATE_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the calling function when not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status syncopate_status_ = (expr);             \
    if (!syncopate_status_.ok()) return syncopate_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` — on error returns the status, else moves the value in.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(SYNCOPATE_CONCAT_(syncopate_statusor_, __LINE__), lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)       \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
