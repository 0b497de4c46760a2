// Integration (issue 17, item 1): a Compile may make NVRTC read only the request's own headers,
// the embedded device headers and the configured CUDA include folder. Includes that point
// anywhere else, and NVRTC options that name files, are refused naming the include or option,
// and neither the answer nor the daemon's log carries a byte of a file the request did not send.
// The "secret" is a file next to the daemon's token that the daemon user can read.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "syncopate/v1/service.grpc.pb.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "SECRET_CONTENT_7c1e";

class CompileIncludes : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_path_ = dir_.Path("token_file");
    std::ofstream(secret_path_) << kSecret << " = 1;\nint " << kSecret << "_line2;\n";
    daemon_ = std::make_unique<DaemonProcess>(
        SYNCOPATED_PATH, dir_, "includes",
        std::vector<std::string>{"--cache_dir=" + dir_.Path("cache")});
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    compiler_ = v1::Compiler::NewStub(grpc::CreateChannel("unix:" + daemon_->socket(),
                                                          grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    // Whatever was refused or failed, the log never quotes the secret file.
    EXPECT_THAT(daemon_->Log(), Not(HasSubstr(kSecret)));
  }

  // The test kernel with `extra` in front of it (an include, usually).
  static v1::CompileRequest Request(const std::string& extra) {
    v1::CompileRequest request;
    request.mutable_kernel()->set_source(extra + "\n" + kTestKernelSource);
    request.mutable_kernel()->set_spec(kTestKernelSpec);
    request.set_arch("sm_90");
    request.set_timeout_ms(60000);
    return request;
  }

  grpc::Status Compile(const v1::CompileRequest& request) {
    v1::CompileResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    grpc::Status status = compiler_->Compile(&ctx, request, &response);
    EXPECT_THAT(status.error_message(), Not(HasSubstr(kSecret)));
    EXPECT_THAT(response.kernel().log(), Not(HasSubstr(kSecret)));
    return status;
  }

  void ExpectRefused(const v1::CompileRequest& request, const std::string& field,
                     const std::string& named) {
    const grpc::Status status = Compile(request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(field));
    EXPECT_THAT(status.error_message(), HasSubstr(named));
  }

  TempDir dir_;
  std::string secret_path_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Compiler::Stub> compiler_;
};

TEST_F(CompileIncludes, AbsoluteIncludeInSourceIsRefused) {
  ExpectRefused(Request("#include \"" + secret_path_ + "\""), "kernel.source:1:", secret_path_);
  ExpectRefused(Request("#include <" + secret_path_ + ">"), "kernel.source:1:", secret_path_);
}

TEST_F(CompileIncludes, SpellingsOfTheDirectiveAreAllSeen) {
  const std::string q = "\"" + secret_path_ + "\"";
  ExpectRefused(Request("  #   include " + q), "kernel.source:1:", secret_path_);
  ExpectRefused(Request("/* a comment */ # include " + q), "kernel.source:1:", secret_path_);
  // The line is where the '#' is.
  ExpectRefused(Request("/* a comment\n over lines */ #include " + q), "kernel.source:2:",
                secret_path_);
  ExpectRefused(Request("#inc\\\nlude " + q), "kernel.source:1:", secret_path_);
  ExpectRefused(Request("%:include " + q), "kernel.source:1:", secret_path_);
  ExpectRefused(Request("#include_next " + q), "kernel.source:1:", secret_path_);
  ExpectRefused(Request("#if 0\n#include " + q + "\n#endif"), "kernel.source:2:", secret_path_);
  // Computed includes cannot be checked before preprocessing: refused as such.
  ExpectRefused(Request("#define F " + q + "\n#include F"), "kernel.source:2:", "#include F");
  ExpectRefused(Request("#if __has_include(" + q + ")\n#endif"), "kernel.source:1:",
                secret_path_);
}

TEST_F(CompileIncludes, RelativeAndUnknownIncludesAreRefused) {
  // The daemon's working directory and the program's directory are not searched.
  ExpectRefused(Request("#include \"../../../../../../../../" + secret_path_ + "\""),
                "kernel.source:1:", "..");
  ExpectRefused(Request("#include \"token_file\""), "kernel.source:1:", "token_file");
  ExpectRefused(Request("#include <not_a_cuda_header.h>"), "kernel.source:1:",
                "not_a_cuda_header.h");
}

TEST_F(CompileIncludes, IncludeInARequestHeaderIsRefused) {
  v1::CompileRequest request = Request("#include \"mine.h\"");
  (*request.mutable_kernel()->mutable_headers())["mine.h"] =
      "// ok so far\n#include \"" + secret_path_ + "\"\n";
  ExpectRefused(request, "kernel.headers[\"mine.h\"]:2:", secret_path_);
}

TEST_F(CompileIncludes, OptionsThatReadFilesAreRefused) {
  const std::vector<std::string> options = {
      "-include=" + secret_path_, "--pre-include=" + secret_path_, "-include", "-I" + dir_.Path(""),
      "--include-path=" + dir_.Path(""), "@" + secret_path_, "--time=" + dir_.Path("t.csv"),
      "-DX=1\n#include \"" + secret_path_ + "\"", "--gpu-architecture=sm_90", "-arch=sm_80",
      "-std=c++17 -include " + secret_path_};
  for (size_t i = 0; i < options.size(); ++i) {
    v1::CompileRequest request = Request("");
    request.mutable_kernel()->add_options("-DTILE=1");
    request.mutable_kernel()->add_options(options[i]);
    ExpectRefused(request, "kernel.options[1]", "is not allowed");
  }
}

TEST_F(CompileIncludes, ProgramNameMustBeAPlainFileName) {
  v1::CompileRequest request = Request("");
  request.mutable_kernel()->set_program_name(dir_.Path("x.cu"));
  ExpectRefused(request, "kernel.program_name", "plain file name");
}

TEST_F(CompileIncludes, AllowedIncludesAndOptionsStillCompile) {
  v1::CompileRequest request =
      Request("#include \"mine.h\"\n#  include <cuda_fp16.h>\n#include <syncopate/device.cuh>");
  (*request.mutable_kernel()->mutable_headers())["mine.h"] = "#define MINE 1\n";
  for (const char* option : {"-std=c++20", "-DTILE=16", "--define-macro=FOO=\"a b\"", "-UFOO",
                             "--use_fast_math", "-lineinfo", "--dopt=on", "-maxrregcount=128",
                             "--diag-suppress=177", "-w"}) {
    request.mutable_kernel()->add_options(option);
  }
  const grpc::Status status = Compile(request);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(CompileIncludes, ErrorsInsideToolkitHeadersDoNotQuoteThem) {
  // A macro that breaks a toolkit header (one the device headers do not include first): NVRTC's
  // errors point into cuda_fp8.h, whose lines the answer must not quote (a file the request did
  // not send), while it still says where.
  v1::CompileRequest request = Request("#define __nv_fp8_e4m3 int int\n#include <cuda_fp8.h>");
  const grpc::Status status = Compile(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("does not compile"));
  EXPECT_THAT(status.error_message(), HasSubstr("cuda_fp8"));
  EXPECT_THAT(status.error_message(), HasSubstr("source line withheld"));
}

}  // namespace
}  // namespace syncopate::testing
