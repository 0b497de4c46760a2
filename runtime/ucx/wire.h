// A tiny length-prefixed binary encoding for out-of-band blobs (worker addresses, remote keys,
// region tables). Little-endian hosts only, which every supported machine is.
//
// Thread-safety: value types, no shared state.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace syncopate::ucx {

class WireWriter {
 public:
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Bytes(absl::string_view s) {
    U64(s.size());
    out_.append(s.data(), s.size());
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class WireReader {
 public:
  // `what` names the blob in errors ("rank 3's transport info").
  WireReader(absl::string_view in, std::string what) : in_(in), what_(std::move(what)) {}

  absl::StatusOr<uint64_t> U64() {
    if (in_.size() < sizeof(uint64_t)) return Truncated();
    uint64_t v;
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return v;
  }
  absl::StatusOr<absl::string_view> Bytes() {
    absl::StatusOr<uint64_t> n = U64();
    if (!n.ok()) return n.status();
    if (in_.size() < *n) return Truncated();
    absl::string_view s = in_.substr(0, *n);
    in_.remove_prefix(*n);
    return s;
  }

 private:
  absl::Status Truncated() const {
    return absl::DataLossError(absl::StrCat(what_, " is truncated or malformed"));
  }
  absl::string_view in_;
  std::string what_;
};

}  // namespace syncopate::ucx
