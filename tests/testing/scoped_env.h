// Sets one environment variable (or unsets it, value nullptr) for a test's scope, and puts back
// what was there before: a test that needs a knob unset must not also wipe the caller's setting
// for the tests after it. Header-only; not thread-safe (setenv), like the environment itself.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

namespace syncopate::testing {

class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str()); old != nullptr) old_ = old;
    Set(value);
  }
  ~ScopedEnv() { Set(old_ ? old_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void Set(const char* value) {
    if (value == nullptr) {
      ::unsetenv(name_.c_str());
    } else {
      ::setenv(name_.c_str(), value, 1);
    }
  }
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace syncopate::testing
