// libFuzzer target for everything a request goes through before it reaches a group, the cache or
// NVRTC: protobuf parsing of hostile bytes, the request checks, agreement (proposal comparison,
// template building / plan decoding, validation), kernel-spec parsing, and what a Compile may make
// NVRTC read (jit/nvrtc/compile_policy.h: the include scan of source and headers, the option
// allow-list, the program name; and the NVRTC log filter on arbitrary text). Any crash, sanitizer
// report or unbounded work here is a daemon bug, since these bytes come from the network.
//
// The first input byte picks the message; the rest is its wire encoding.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "jit/compiler/embedded_headers.h"
#include "jit/compiler/kernel_spec.h"
#include "jit/nvrtc/compile_policy.h"
#include "jit/nvrtc/include_scan.h"
#include "jit/nvrtc/log_filter.h"
#include "server/agreement.h"
#include "server/request_checks.h"
#include "syncopate/v1/service.pb.h"

namespace {

// Smaller than the daemon's defaults so each input stays fast; the code paths are the same.
syncopate::server::RequestLimits FuzzLimits() {
  syncopate::server::RequestLimits limits;
  limits.max_world_size = 256;
  limits.max_template_world_size = 16;
  limits.max_transfers = 1 << 12;
  limits.max_boxes = 1 << 14;
  limits.max_chunks = 64;
  return limits;
}

// What the daemon checks a Compile's kernel with (server/compile_backend.cc), the include folder a
// fixed one: the toolkit's, so that names resolving there are exercised too.
void CheckWhatItReads(const syncopate::v1::KernelSource& kernel) {
  using namespace syncopate;
  static const nvrtc::IncludeRoots roots = [] {
    nvrtc::IncludeRoots r;
    for (const auto& [name, content] : jit::DeviceHeaders()) r.in_memory.insert(name);
    r.dirs = {"/usr/local/cuda/include", "/usr/local/cuda/include/cccl"};
    return r;
  }();
  const std::map<std::string, std::string> headers(kernel.headers().begin(), kernel.headers().end());
  const std::vector<std::string> options(kernel.options().begin(), kernel.options().end());
  nvrtc::UntrustedCompile compile;
  compile.source = kernel.source();
  compile.headers = &headers;
  compile.options = &options;
  compile.program_name = kernel.program_name();
  (void)nvrtc::CheckUntrustedCompile(compile, roots, "kernel.");
}

}  // namespace

// Hostile bytes make protobuf log every invalid UTF-8 string; that noise hides real findings.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace syncopate;
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const server::RequestLimits limits = FuzzLimits();
  switch (data[0] % 4) {
    case 0: {
      v1::JoinRequest request;
      if (request.ParseFromString(bytes)) (void)server::CheckJoinRequest(request, limits);
      break;
    }
    case 1: {
      v1::AgreeRequest request;
      if (!request.ParseFromString(bytes)) break;
      if (!server::CheckAgreeRequest(request, limits).ok()) break;
      const v1::Proposal& p = request.proposal();
      const int world = p.has_plan() ? p.plan().world_size() : p.template_request().world_size();
      // A one-rank decision builds and validates the plan; then the build alone at its size.
      (void)server::DecideAgreement("fuzz#1", 1, {&p}, {"n0"});
      (void)server::BuildAgreedPlan(p, world);
      break;
    }
    case 2: {
      v1::CompileRequest request;
      if (!request.ParseFromString(bytes)) break;
      if (!server::CheckCompileRequest(request, limits).ok()) break;
      CheckWhatItReads(request.kernel());
      auto spec = jit::ParseKernelSpec(request.kernel().spec());
      if (spec.ok()) (void)jit::ValidateKernelSpec(*spec);
      break;
    }
    case 3: {
      // Raw text, as a source (the scanner's own corner cases: splices, comments, raw strings)
      // and as an NVRTC log.
      (void)nvrtc::FindIncludes(bytes);
      (void)nvrtc::LineDirectiveNames(bytes);
      (void)nvrtc::FilterLog(bytes, {"p.cu", "kernel.cuh"}, {"/usr/local/cuda/include"});
      break;
    }
  }
  return 0;
}
