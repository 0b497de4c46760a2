// The client library's error type: a status code (the gRPC canonical codes, same numbers) and the
// daemon's message, plus Result<T> (a value or a non-OK Status). Standard library only, so a
// serving engine can include it without gRPC or abseil.
//
// Thread-safety: value types; const methods are safe to call concurrently.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace syncopate {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "OK", "INVALID_ARGUMENT", ... (the gRPC spelling).
const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "ABORTED: rank 3 (node n1) vanished ..." or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A T or the Status saying why there is none. Accessing the value of a failed Result is a bug
// (checked with an assertion-like abort).
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like absl::StatusOr
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result built from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked();
  Status status_;
  std::optional<T> value_;
};

[[noreturn]] void DieOnBadResultAccess(const Status& status);

template <class T>
T& Result<T>::Checked() {
  if (!value_.has_value()) DieOnBadResultAccess(status_);
  return *value_;
}

}  // namespace syncopate
