// `syncopate compile`: local kernel + kernel spec + chunk plan -> fused kernel -> NVRTC cubin,
// through the kernel cache. Prints the entry, launch shape, timing and cache hit/miss, and writes
// the cubin; --emit-source prints the generated CUDA source instead of compiling.
//
//   syncopate compile --workload ag_gemm --m 8192 --n 4096 --k 4096 --world 4 --chunks 2
//   syncopate compile --kernel my.cuh --spec my.spec --template allgather.ring --world 8
//                     --shape 8192,4096 --arch sm_90 --out fused.cubin   (one command line)
//   syncopate compile --workload gemm_rs --emit-source > fused.cu
//   syncopate compile --workload ag_gemm --daemon /run/syncopate/syncopated.sock   (pre-warm)
//
// With --daemon the binary comes from the node's syncopated (which compiles it once, into its
// cache, for every later job and rank on the node) and is used only for the key this command
// derives; should the daemon fail or disagree, NVRTC compiles here and the reason is printed.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cli/command.h"
#include "client/cli/flag_parser.h"
#include "client/cli/plan_flags.h"
#include "client/cli/workload_flags.h"
#include "core/base/status_macros.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#if SYNCOPATE_HAVE_DAEMON_STEP
#include "client/kernel_fetch.h"
#include "syncopate/client.h"
#endif

namespace syncopate::cli {
namespace {

struct Options : KernelBuildOptions {
  bool no_cache = false;
  bool local = false;
  bool emit_source = false;
  bool explain_key = false;
  std::string out;
  std::string daemon;  // Unix socket or host:port of a syncopated: take the binary from it
  std::string token;   // for a TCP daemon
  bool help = false;
};

int Fail(int code, absl::string_view message) {
  std::fprintf(stderr, "syncopate compile: %s\n",
               absl::StrReplaceAll(message, {{"\n", "; "}}).c_str());
  return code;
}

// The flags of `syncopate compile`.
void AddCompileFlags(FlagParser& flags, Options& o) {
  AddPlanSourceFlags(flags, &o.source);
  AddWorkloadFlags(flags, &o.workload);
  flags.AddString("arch", &o.arch, "target: sm_80, sm_90, sm_90a, ... (PTX for unknown ones)");
  flags.AddString("cache-dir", &o.cache_dir,
                  "kernel cache directory (default: $SYNCOPATE_CACHE_DIR "
                  "or ~/.cache/syncopate)");
  flags.AddBool("no-cache", &o.no_cache, "compile without the kernel cache");
  flags.AddBool("local", &o.local, "compile the identity-schedule (plain local) kernel instead");
  flags.AddBool("emit-source", &o.emit_source, "print the generated CUDA source and stop");
  flags.AddBool("explain-key", &o.explain_key, "print the cache key's parts");
  flags.AddString("out", &o.out, "where to write the cubin (default ./<entry>.cubin)");
  flags.AddString("daemon", &o.daemon,
                  "take the binary from this syncopated (Unix socket or host:port), which "
                  "compiles it into its cache; NVRTC here if it cannot");
  flags.AddString("token", &o.token, "shared token for a --daemon given as host:port");
  flags.AddBool("help", &o.help, "print this help");
}

// What the flags name: the workload (kernel, spec, default plan) and, unless --local, the plan.
struct Target {
  Workload workload;
  std::optional<plan::Plan> plan;
};

absl::StatusOr<Target> TargetFromFlags(const FlagParser& flags, Options& o) {
  RETURN_IF_ERROR(CheckPlanSourceFlags(flags, o.source, /*allow_none=*/true));
  absl::StatusOr<plan::DType> dtype = plan::ParseDType(o.source.dtype);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
  }
  ASSIGN_OR_RETURN(Workload workload, WorkloadFromFlags(o.workload, *dtype));
  if (o.source.template_name.empty() && o.source.file.empty()) {
    if (workload.default_template.empty() && !o.local) {
      return absl::InvalidArgumentError(
          "a custom kernel needs a plan: --template NAME or --file PATH");
    }
    o.source.template_name = workload.default_template;
  }
  if (o.source.world == 8 && !flags.WasSet("world")) o.source.world = 4;
  Target target{std::move(workload), std::nullopt};
  if (!o.local) {
    ASSIGN_OR_RETURN(target.plan, PlanFromFlags(o.source, target.workload.default_shape));
  }
  return target;
}

// --daemon: the daemon's binary for this build's key, NVRTC here if it cannot give one.
absl::Status UseDaemon(const Options& o, const Target& target, jit::BuildOptions& build) {
#if SYNCOPATE_HAVE_DAEMON_STEP
  ClientOptions client_options;
  client_options.token = o.token;
  Result<Client> client = Client::Connect(o.daemon, client_options);
  if (!client.ok()) {
    return absl::UnavailableError(
        absl::StrCat("--daemon ", o.daemon, ": ", client.status().ToString()));
  }
  ASSIGN_OR_RETURN(CompileRequest base,
                   CompileRequestFor(target.plan ? &*target.plan : nullptr, target.workload.spec,
                                     target.workload.kernel_source));
  build.fetch = DaemonKernelFetcher(*client, std::move(base));
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError(
      "--daemon: this build has no client library (SYNCOPATE_BUILD_SERVER)");
#endif
}

absl::Status WriteBinary(const std::string& path, const nvrtc::CompiledKernel& compiled) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(compiled.binary.data(), static_cast<std::streamsize>(compiled.binary.size()));
  if (!file) return absl::InvalidArgumentError(absl::StrCat("--out: cannot write '", path, "'"));
  return absl::OkStatus();
}

void PrintSummary(const Options& o, const Target& target, const jit::PreparedKernel& prepared,
                  const jit::BuiltKernel& built, const std::string& out) {
  const jit::LaunchMetadata& md = prepared.generated.metadata;
  std::printf("kernel   %s (%s)\n", target.workload.kernel_name.c_str(),
              built.generated.entry_symbol.c_str());
  if (target.plan) {
    std::printf("plan     %s, world %d, %d transfers, hash %.16s\n", target.plan->name.c_str(),
                target.plan->world_size, target.plan->NumTransfers(), prepared.plan_hash.c_str());
  }
  std::printf(
      "launch   block %d, smem %d B, tiles %dx%d = %d, signals %d, outgoing chunks %d, "
      "comm CTAs (SM backend) %d\n",
      md.block_dim, md.dynamic_smem_bytes, md.tiles_m, md.tiles_n, md.num_tiles, md.num_signals,
      md.num_outgoing_chunks, md.suggested_comm_ctas);
  std::printf("compile  %s for %s: %.1f ms%s\n", built.compiled->is_ptx ? "PTX" : "cubin",
              built.compiled->target.c_str(), built.elapsed_ms,
              o.no_cache ? "" : absl::StrCat(", cache: ", cache::SourceName(built.source)).c_str());
  std::printf("key      %s\n", built.cache_key.c_str());
  if (!o.daemon.empty()) {
    std::printf("daemon   %s\n",
                built.fetched ? "binary from the daemon (same key)"
                : built.fetch_error.empty()
                    ? "not asked: the local cache had the kernel"
                    : absl::StrCat("not used, compiled here: ", built.fetch_error).c_str());
  }
  std::printf("wrote    %s (%zu bytes)\n", out.c_str(), built.compiled->binary.size());
}

int RunCompile(const std::vector<std::string>& args) {
  Options o;
  FlagParser flags("syncopate compile");
  AddCompileFlags(flags, o);
  if (absl::Status s = flags.Parse(args, nullptr); !s.ok()) return Fail(kExitUsage, s.message());
  if (o.help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  absl::StatusOr<Target> target = TargetFromFlags(flags, o);
  if (!target.ok()) return Fail(kExitUsage, target.status().message());

  jit::BuildOptions build;
  build.arch = o.arch;
  std::unique_ptr<cache::KernelCache> kernel_cache;
  if (!o.no_cache) {
    cache::KernelCache::Options cache_options;
    cache_options.dir = o.cache_dir;
    auto opened = cache::KernelCache::Open(cache_options);
    if (!opened.ok()) return Fail(kExitUsage, opened.status().message());
    kernel_cache = *std::move(opened);
    build.cache = kernel_cache.get();
  }
  const Workload& w = target->workload;
  absl::StatusOr<jit::PreparedKernel> prepared =
      target->plan ? jit::PrepareFusedKernel(*target->plan, w.spec, w.kernel_source, build)
                   : jit::PrepareLocalKernel(w.spec, w.kernel_source, build);
  if (!prepared.ok()) return Fail(kExitUsage, prepared.status().message());
  if (o.emit_source) {
    std::fputs(prepared->generated.source.c_str(), stdout);
    return kExitOk;
  }
  if (o.explain_key) {
    std::fputs(cache::CacheKey::FromParts(prepared->key_parts).Explain().c_str(), stdout);
  }
  if (!o.daemon.empty()) {
    if (absl::Status s = UseDaemon(o, *target, build); !s.ok()) {
      return Fail(s.code() == absl::StatusCode::kFailedPrecondition ? kExitUsage : kExitFailed,
                  s.message());
    }
  }
  absl::StatusOr<jit::BuiltKernel> built = jit::BuildKernel(*prepared, build);
  if (!built.ok()) return Fail(kExitFailed, built.status().message());
  const std::string out = o.out.empty() ? absl::StrCat(built->generated.entry_symbol,
                                                       built->compiled->is_ptx ? ".ptx" : ".cubin")
                                        : o.out;
  if (absl::Status s = WriteBinary(out, *built->compiled); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  PrintSummary(o, *target, *prepared, *built, out);
  return kExitOk;
}

const SubcommandRegistration kRegistration(
    "compile", "plan x local kernel -> fused CUDA source -> NVRTC cubin (through the cache)",
    RunCompile);

}  // namespace
}  // namespace syncopate::cli
