// The include scanner, the include and option rules and the log filter (compile_policy.h,
// include_scan.h, log_filter.h) on their own; tests/server/compile_includes_test.cc drives the
// same through a daemon.
#include "jit/nvrtc/compile_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jit/nvrtc/include_scan.h"
#include "jit/nvrtc/log_filter.h"
#include "absl/strings/str_cat.h"

namespace syncopate::nvrtc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Names(std::string_view text) {
  std::vector<std::string> out;
  for (const IncludeDirective& d : FindIncludes(text)) {
    out.push_back(absl::StrCat(d.line, ":", d.directive, ":", d.literal ? d.name : "~" + d.operand));
  }
  return out;
}

TEST(IncludeScan, FindsEverySpelling) {
  EXPECT_THAT(Names("#include <a.h>\n  #  include \"b.h\"\n%:include <c.h>\n??=include <d.h>\n"),
              ::testing::ElementsAre("1:include:a.h", "2:include:b.h", "3:include:c.h",
                                     "4:include:d.h"));
  EXPECT_THAT(Names("#inc\\\nlude <a.h>\n#include \\\n <b.h>\n"),
              ::testing::ElementsAre("1:include:a.h", "3:include:b.h"));
  EXPECT_THAT(Names("/* x\n y */ #include <a.h>\nint x; /* */ #include <no.h>\n"),
              ::testing::ElementsAre("2:include:a.h"));
  EXPECT_THAT(Names("#include_next <a.h>\n#import \"b\"\n#embed \"c\"\n#include M\n"),
              ::testing::ElementsAre("1:include_next:a.h", "2:import:b", "3:embed:c",
                                     "4:include:~M"));
  EXPECT_THAT(Names("#if __has_include(<a.h>) && __has_include( \"b.h\" )\n#endif\n"),
              ::testing::ElementsAre("1:__has_include:a.h", "1:__has_include:b.h"));
}

TEST(IncludeScan, CommentsAndLiteralsDoNotHideOrInventDirectives) {
  // Commented out: not a directive. In a string: not a comment start.
  EXPECT_THAT(Names("// #include <a.h>\n/* #include <b.h> */\n"), ::testing::IsEmpty());
  EXPECT_THAT(Names("const char* s = \"/*\";\n#include <a.h>\n// */\n"),
              ::testing::ElementsAre("2:include:a.h"));
  EXPECT_THAT(Names("char c = '\"'; const char* s = \"/*\";\n#include <a.h>\n"),
              ::testing::ElementsAre("2:include:a.h"));
  // A raw string may hold "/*" and newlines; a digit separator is no character literal.
  EXPECT_THAT(Names("auto s = R\"x(\n/*)x\";\n#include <a.h>\n// */\n"),
              ::testing::ElementsAre("3:include:a.h"));
  EXPECT_THAT(Names("int v = 1'0 + '/*';\n#include <a.h>\n// */\n"),
              ::testing::ElementsAre("2:include:a.h"));
  // A line comment continued by a splice swallows the next line, as in the preprocessor.
  EXPECT_THAT(Names("// x \\\n#include <a.h>\n#include <b.h>\n"),
              ::testing::ElementsAre("3:include:b.h"));
}

TEST(IncludeScan, LineDirectiveNames) {
  EXPECT_THAT(LineDirectiveNames("int a;\n#line 1 \"kernel.cuh\"\n  # line 40 \"gen.cu\"\n#line 7\n"),
              ::testing::ElementsAre("kernel.cuh", "gen.cu"));
}

TEST(CompilePolicy, IncludesOutsideTheRootsAreRefused) {
  IncludeRoots roots;
  roots.in_memory = {"mine.h", "syncopate/device.cuh"};
  roots.dirs = {CUDA_INCLUDE_DIR};
  EXPECT_TRUE(CheckIncludes("#include \"mine.h\"\n#include <syncopate/device.cuh>\n"
                            "#include <cuda_bf16.h>\n",
                            "src", roots)
                  .ok());
  for (const char* bad : {"#include \"/etc/passwd\"", "#include <../include/cuda_bf16.h>",
                          "#include \"sub/../mine.h\"", "#include \"nope.h\"", "#include M",
                          "#include_next <cuda_bf16.h>", "#import <cuda_bf16.h>",
                          "#include \"a\\\\b.h\"", "#if __has_include(</etc/shadow>)\n#endif"}) {
    const absl::Status status = CheckIncludes(absl::StrCat("int x;\n", bad, "\n"), "src", roots);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("src:2: ")) << bad;
  }
}

TEST(CompilePolicy, OptionsFollowTheAllowList) {
  for (const char* good : {"-std=c++17", "--std=c++20", "-DX", "-DX=1", "--define-macro=X=\"a b\"",
                           "-UX", "--undefine-macro=X", "--use_fast_math", "-use_fast_math",
                           "-lineinfo", "-G", "--ftz=true", "-prec-div=false", "--fmad=true",
                           "--maxrregcount=64", "--dopt=on", "-Ofast-compile=max", "-w",
                           "--diag-suppress=177,550", "--restrict"}) {
    EXPECT_TRUE(CheckOption(good, "o").ok()) << good;
  }
  for (const char* bad : {"-include=/etc/passwd", "--pre-include=/x", "-I/x", "--include-path=/x",
                          "@/x", "--time=/tmp/t", "-MD", "-MF/x", "-arch=sm_90",
                          "--gpu-architecture=sm_90", "-std=c++17 -I/x", "-D", "-D1=2",
                          "-DX=a\\", "-DX=1\n#include \"/x\"", "--maxrregcount=1,2",
                          "--fdevice-time-trace=/x", "-trigraphs", "x", ""}) {
    const absl::Status status = CheckOption(bad, "kernel.options[3]");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("kernel.options[3]: '")) << bad;
    EXPECT_THAT(status.message(), Not(HasSubstr("\n"))) << bad;
  }
}

TEST(CompilePolicy, ProgramNameIsAPlainFileName) {
  EXPECT_TRUE(CheckProgramName("my_kernel-1.cu", "p").ok());
  for (const char* bad : {"/tmp/x.cu", "a/b.cu", "..", ".", "x\n.cu"}) {
    EXPECT_FALSE(CheckProgramName(bad, "p").ok()) << bad;
  }
}

TEST(LogFilter, KeepsOnlyLinesOfTheCompilesOwnFiles) {
  const std::string log =
      "p.cu(3): error: identifier \"x\" is undefined\n"
      "  x = 1;\n"
      "  ^\n"
      "\n"
      "/cuda/include/cuda_fp8.h(10): error: invalid combination of type specifiers\n"
      "  TOOLKIT LINE\n"
      "  ^\n"
      "\n"
      "/etc/passwd(1): error: identifier \"root\" is undefined\n"
      "  root:x:0:0\n"
      "  ^\n"
      "\n"
      "3 errors detected in the compilation of \"p.cu\".";
  const std::string filtered = FilterLog(log, {"p.cu"}, {"/cuda/include"});
  EXPECT_THAT(filtered, HasSubstr("p.cu(3): error: identifier \"x\" is undefined\n  x = 1;\n"));
  EXPECT_THAT(filtered, HasSubstr("/cuda/include/cuda_fp8.h(10): error: invalid combination"));
  EXPECT_THAT(filtered, Not(HasSubstr("TOOLKIT LINE")));
  EXPECT_THAT(filtered, Not(HasSubstr("root")));
  EXPECT_THAT(filtered, HasSubstr("/etc/passwd(1): error: (message withheld"));
  EXPECT_THAT(filtered, HasSubstr(kWithheldLine));
  EXPECT_THAT(filtered, HasSubstr("3 errors detected"));
}

}  // namespace
}  // namespace syncopate::nvrtc
