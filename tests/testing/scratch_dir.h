// A fresh directory under the test temp dir for one test, removed with everything in it when the
// object goes. Header-only; for tests of anything that writes files (caches, tables, sockets).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace syncopate::testing {

class ScratchDir {
 public:
  // `prefix` names the directory ("<prefix>_XXXXXX"), which helps when one is left behind.
  explicit ScratchDir(const std::string& prefix = "syncopate") {
    std::string tmpl = ::testing::TempDir() + "/" + prefix + "_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr) << tmpl;
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace syncopate::testing
