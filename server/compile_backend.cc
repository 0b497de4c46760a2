// See compile_backend.h.
#include "server/compile_backend.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan_io/plan_proto.h"
#include "jit/build/kernel_build.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/embedded_headers.h"
#include "jit/compiler/kernel_spec.h"
#include "jit/nvrtc/compile_policy.h"
#include "server/agreement.h"

namespace syncopate::server {
namespace {

absl::Status Prefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

void FillLaunch(const jit::GeneratedKernel& generated, v1::LaunchMetadata& launch) {
  const jit::LaunchMetadata& m = generated.metadata;
  launch.set_entry(generated.entry_symbol);
  launch.add_grid(static_cast<uint32_t>(m.suggested_comm_ctas + std::max(1, m.num_tiles)));
  launch.add_grid(1);
  launch.add_grid(1);
  launch.set_block_threads(m.block_dim);
  launch.set_shared_mem_bytes(m.dynamic_smem_bytes);
  launch.set_num_comm_ctas(m.suggested_comm_ctas);
  launch.set_num_tiles(m.num_tiles);
  launch.set_num_chunks(m.num_outgoing_chunks);
  launch.set_fused(m.fused);
  launch.set_tiles_m(m.tiles_m);
  launch.set_tiles_n(m.tiles_n);
  launch.set_world_size(m.world_size);
  launch.set_num_signals(m.num_signals);
  launch.set_num_plan_signals(m.num_plan_signals);
  for (const auto& per_rank : m.outgoing_transfers) {
    launch.add_outgoing_transfers()->mutable_values()->Add(per_rank.begin(), per_rank.end());
  }
  for (const auto& per_rank : m.landing_guards) {
    v1::LaunchMetadata::Guards* guards = launch.add_landing_guards();
    for (const auto& guard : per_rank) {
      v1::LaunchMetadata::Guard* g = guards->add_guards();
      g->set_transfer(guard.transfer);
      g->set_signal(guard.signal);
    }
  }
  for (const jit::OperandSlot& slot : m.operands) {
    v1::LaunchMetadata::OperandSlot* out = launch.add_operands();
    out->set_slot(slot.slot);
    out->set_name(slot.name);
    out->set_buffer(slot.buffer);
    out->set_dtype(plan_io::ToProto(slot.dtype));
    out->set_role(jit::OperandRoleName(slot.role));
    out->set_kernel_param(slot.kernel_param);
    out->set_needs_identity_fill(slot.needs_identity_fill);
    out->mutable_shape()->Add(slot.shape.begin(), slot.shape.end());
    out->set_bytes(slot.bytes);
    out->set_rank_private(slot.rank_private);
  }
}

// The memo key of a request: the deterministic encodings of everything that affects the result
// (not the timeout), length-prefixed. The bytes themselves are the key (hashed by the map,
// compared in full), so a repeated request costs a serialization, no copy and no SHA-256.
void AppendDeterministic(const google::protobuf::Message& message, std::string& out) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  absl::StrAppend(&out, bytes.size(), ":", bytes);
}

std::string RequestKey(const v1::CompileRequest& request) {
  std::string key;
  AppendDeterministic(request.kernel(), key);
  if (!request.plan_hash().empty()) {
    // '#' cannot start the length prefix of the full-plan form: the two never collide.
    absl::StrAppend(&key, "#", request.plan_hash(), ":");
  } else {
    AppendDeterministic(request.plan(), key);
  }
  // rank and known_cache_key do not change the result: one generated kernel serves every rank.
  absl::StrAppend(&key, request.arch().size(), ":", request.arch());
  // The node map does: inter-node chunks leave the kernel's tables.
  for (int32_t node : request.nodes()) absl::StrAppend(&key, ",", node);
  return key;
}

// A client of the daemon must not make NVRTC read files it did not send (issue 17): its
// includes, options and program name pass compile_policy.h before anything is generated.
absl::Status CheckWhatTheCompileReads(const v1::KernelSource& kernel,
                                      const std::string& cuda_include_dir) {
  const std::map<std::string, std::string> headers(kernel.headers().begin(),
                                                   kernel.headers().end());
  const std::vector<std::string> options(kernel.options().begin(), kernel.options().end());
  nvrtc::IncludeRoots roots;
  for (const auto& [name, content] : jit::DeviceHeaders()) roots.in_memory.insert(name);
  roots.dirs = jit::NvrtcIncludeDirs(cuda_include_dir);  // what every build gives NVRTC
  nvrtc::UntrustedCompile compile;
  compile.source = kernel.source();
  compile.headers = &headers;
  compile.options = &options;
  compile.program_name = kernel.program_name();
  return nvrtc::CheckUntrustedCompile(compile, std::move(roots), "kernel.");
}

std::chrono::steady_clock::time_point ToSteady(absl::Time deadline) {
  return std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(deadline - absl::Now());
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompileBackend>> CompileBackend::Create(const Options& options) {
  cache::KernelCache::Options cache_options;
  cache_options.dir = options.cache_dir;
  cache_options.memory_only = options.cache_dir.empty();
  cache_options.disk_budget_bytes = options.cache_max_bytes;
  ASSIGN_OR_RETURN(std::unique_ptr<cache::KernelCache> cache,
                   cache::KernelCache::Open(cache_options));
  return std::unique_ptr<CompileBackend>(new CompileBackend(options, std::move(cache)));
}

absl::StatusOr<std::shared_ptr<const CompileBackend::Prepared>> CompileBackend::Prepare(
    const v1::CompileRequest& request, const std::string& fingerprint,
    const std::string& expected_plan_hash) {
  RETURN_IF_ERROR(CheckWhatTheCompileReads(request.kernel(), options_.cuda_include_dir));
  absl::StatusOr<jit::KernelSpec> spec = jit::ParseKernelSpec(request.kernel().spec());
  if (!spec.ok()) return Prefix(spec.status(), "kernel.spec: ");
  if (absl::Status s = jit::ValidateKernelSpec(*spec); !s.ok()) return Prefix(s, "kernel.spec: ");

  if (absl::StatusOr<nvrtc::Arch> arch = nvrtc::ParseArch(request.arch()); !arch.ok()) {
    return Prefix(arch.status(), "arch: ");
  }
  // The shared build path prepares (validates, generates, derives NVRTC's options and the cache
  // key), so a kernel compiled here is a cache hit for the runtime and the CLI on this node, and
  // the other way round.
  jit::BuildOptions build;
  build.arch = request.arch();
  // BuildOptions' default language standard for the device headers, then the caller's options
  // (which may override it).
  build.extra_options.insert(build.extra_options.end(), request.kernel().options().begin(),
                             request.kernel().options().end());
  build.extra_headers.insert(request.kernel().headers().begin(), request.kernel().headers().end());
  build.cuda_include_dir = options_.cuda_include_dir;
  build.program_name = request.kernel().program_name();
  jit::CodegenOptions codegen;
  if (!request.kernel().program_name().empty()) {
    codegen.kernel_source_name = request.kernel().program_name();
  }
  codegen.nodes.assign(request.nodes().begin(), request.nodes().end());

  auto prepared = std::make_shared<Prepared>();
  if (request.has_plan()) {
    absl::StatusOr<plan::Plan> plan = plan_io::FromProto(request.plan());
    if (!plan.ok()) return Prefix(plan.status(), "plan.");
    ASSIGN_OR_RETURN(
        prepared->kernel,
        jit::PrepareFusedKernel(*plan, *spec, request.kernel().source(), build, codegen));
    const std::string& hash = prepared->kernel.plan_hash;
    if (!expected_plan_hash.empty() && expected_plan_hash != hash) {
      // The store is filled under hashes computed by daemons; a mismatch is our bug, not the
      // caller's, and must not compile the wrong plan.
      return absl::InternalError(
          absl::StrCat("plan_hash: the plan held under ", expected_plan_hash, " hashes to ", hash));
    }
    if (options_.plans != nullptr && expected_plan_hash.empty()) {
      options_.plans->Remember(hash, request.plan());
    }
  } else {
    if (!request.nodes().empty()) {
      return absl::InvalidArgumentError(
          "nodes: a node map needs a plan (the local kernel has none)");
    }
    ASSIGN_OR_RETURN(prepared->kernel,
                     jit::PrepareLocalKernel(*spec, request.kernel().source(), build, codegen));
  }
  FillLaunch(prepared->kernel.generated, prepared->launch);

  std::shared_ptr<const Prepared> result = std::move(prepared);
  // Keys are whole requests (sources, plans) and entries pin sources and binaries: counted.
  size_t bytes = fingerprint.size() + result->kernel.generated.source.size();
  for (const auto& [name, text] : result->kernel.generated.headers) bytes += text.size();
  if (bytes > options_.memo_max_bytes) return result;  // kept, it would push out all the others
  absl::MutexLock lock(&mu_);
  if (prepared_.emplace(fingerprint, MemoEntry{result, nullptr, bytes}).second) {
    prepared_order_.push_back(fingerprint);
    prepared_bytes_ += bytes;
  }
  TrimMemoLocked();
  return result;
}

void CompileBackend::TrimMemoLocked() {
  while (!prepared_order_.empty() && (prepared_order_.size() > options_.memo_max_entries ||
                                      prepared_bytes_ > options_.memo_max_bytes)) {
    auto it = prepared_.find(prepared_order_.front());
    if (it != prepared_.end()) {
      prepared_bytes_ -= it->second.bytes;
      prepared_.erase(it);
    }
    prepared_order_.pop_front();
  }
}

CompileBackend::MemoStats CompileBackend::Memo() const {
  absl::MutexLock lock(&mu_);
  return MemoStats{.entries = prepared_.size(), .bytes = prepared_bytes_};
}

std::optional<CompileOutcome> CompileBackend::CompileIfServedBefore(
    const v1::CompileRequest& request) {
  const std::string key = RequestKey(request);
  absl::MutexLock lock(&mu_);
  auto it = prepared_.find(key);
  if (it == prepared_.end() || it->second.kernel == nullptr) return std::nullopt;
  CompileOutcome outcome;
  outcome.kernel = it->second.kernel;
  outcome.cache_hit = true;
  outcome.cache_key = it->second.prepared->kernel.key.hex();
  outcome.plan_hash = it->second.prepared->kernel.plan_hash;
  outcome.launch = it->second.prepared->launch;
  return outcome;
}

absl::StatusOr<std::shared_ptr<const CompileBackend::Prepared>> CompileBackend::PrepareFirst(
    const v1::CompileRequest& request, const std::string& request_key) {
  if (request.plan_hash().empty()) return Prepare(request, request_key, "");
  // A request by plan hash is prepared as the same request with the held plan in it. The copy is
  // made here, once per distinct request, not on every repeat.
  std::shared_ptr<const v1::Plan> held =
      options_.plans != nullptr ? options_.plans->Find(request.plan_hash()) : nullptr;
  if (held == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "plan_hash: this daemon does not hold plan ", request.plan_hash(),
        " (it never saw it, restarted, or evicted it); send the plan itself"));
  }
  v1::CompileRequest with_plan = request;
  with_plan.clear_plan_hash();
  *with_plan.mutable_plan() = *held;
  return Prepare(with_plan, request_key, request.plan_hash());
}

absl::StatusOr<CompileOutcome> CompileBackend::Compile(const v1::CompileRequest& request,
                                                       absl::Time deadline) {
  std::optional<absl::StatusOr<CompileOutcome>> outcome = Run(request, deadline, nullptr, nullptr);
  return *std::move(outcome);
}

std::optional<absl::StatusOr<CompileOutcome>> CompileBackend::CompileUnlessInFlight(
    const v1::CompileRequest& request, absl::Time deadline, Joined joined,
    std::string* joined_key) {
  return Run(request, deadline, &joined, joined_key);
}

pid_t CompileBackend::LockHolderOf(const std::string& cache_key) const {
  if (!cache::IsValidKeyHex(cache_key)) return 0;
  return cache_->LockHolderOf(cache::CacheKey::FromHex(cache_key));
}

absl::StatusOr<CompileOutcome> CompileBackend::Conclude(
    const std::string& request_key, const std::shared_ptr<const Prepared>& prepared,
    const absl::StatusOr<cache::KernelCache::Result>& result, bool compiled_here) {
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kInvalidArgument) {
      return Prefix(result.status(), "kernel.source: does not compile: ");
    }
    return result.status();
  }
  {
    absl::MutexLock lock(&mu_);
    if (auto it = prepared_.find(request_key);
        it != prepared_.end() && it->second.kernel == nullptr && result->kernel != nullptr) {
      const size_t binary = result->kernel->binary.size() + result->kernel->log.size();
      if (it->second.bytes + binary > options_.memo_max_bytes) {
        prepared_bytes_ -= it->second.bytes;  // too large to keep
        prepared_.erase(it);
        prepared_order_.erase(
            std::find(prepared_order_.begin(), prepared_order_.end(), request_key));
      } else {
        it->second.kernel = result->kernel;
        it->second.bytes += binary;
        prepared_bytes_ += binary;
        TrimMemoLocked();
      }
    }
  }
  CompileOutcome outcome;
  outcome.kernel = result->kernel;
  // A hit: this request ran no compile (memory, disk, or another request's compile in flight).
  outcome.cache_hit = !compiled_here;
  outcome.cache_key = prepared->kernel.key.hex();
  outcome.plan_hash = prepared->kernel.plan_hash;
  outcome.launch = prepared->launch;
  return outcome;
}

std::optional<absl::StatusOr<CompileOutcome>> CompileBackend::Run(
    const v1::CompileRequest& request, absl::Time deadline, Joined* joined,
    std::string* joined_key) {
  const std::string request_key = RequestKey(request);
  std::shared_ptr<const Prepared> prepared;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = prepared_.find(request_key); it != prepared_.end()) prepared = it->second.prepared;
  }
  if (prepared == nullptr) {
    absl::StatusOr<std::shared_ptr<const Prepared>> first = PrepareFirst(request, request_key);
    if (!first.ok()) return first.status();
    prepared = *std::move(first);
  }
  bool compiled_here = false;
  const jit::PreparedKernel& kernel = prepared->kernel;
  auto compile = [&]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    // Only a miss gets here; the slots bound the NVRTC compiles running at once.
    compiled_here = true;
    return jit::CompilePrepared(kernel, ToSteady(deadline), &slots_);
  };
  if (joined == nullptr) {
    return Conclude(request_key, prepared,
                    cache_->GetOrCompile(kernel.key, compile, {}, ToSteady(deadline)),
                    compiled_here);
  }
  // Runs on the thread that leads the flight, once it ends: this request compiled nothing.
  auto on_joined = [this, request_key, prepared,
                    done = std::move(*joined)](const absl::StatusOr<cache::KernelCache::Result>& r) {
    done(Conclude(request_key, prepared, r, false));
  };
  std::optional<absl::StatusOr<cache::KernelCache::Result>> result =
      cache_->GetOrCompileUnlessInFlight(kernel.key, compile, {}, ToSteady(deadline),
                                         std::move(on_joined));
  if (!result.has_value()) {
    if (joined_key != nullptr) *joined_key = kernel.key.hex();
    return std::nullopt;
  }
  return Conclude(request_key, prepared, *result, compiled_here);
}

}  // namespace syncopate::server
