// libsyncopate client: join a rank group, agree on a chunk plan, compile the fused kernel.
//
// A Client talks to the node's syncopated over its Unix socket (Connect), to a daemon over TCP
// (Connect "host:port", with the shared token), or to the same services running inside this
// process (Embedded: no daemon; for one process driving all GPUs of a node, and for tests).
//
//   auto client = syncopate::Client::Connect("/run/syncopate/syncopated.sock");
//   auto group = client->Join({.job_id = "train-42", .world_size = 8, .rank = r,
//                              .leader_address = "node0:7450"});
//   auto plan = client->Agree(*group, {.kernel_hash = h, .template_spec = TemplateSpec{...}});
//   auto kernel = client->Compile({.kernel = source, .plan = plan->plan, .rank = r});
//
// Every call has a deadline (options below); errors carry the gRPC status code and the daemon's
// message, which names the field, rank or daemon at fault. The compiled kernel then goes to the
// runtime (runtime/cuda) for launch.
//
// Thread-safety: a Client is a cheap handle to shared state; copies share one channel (or one
// embedded daemon). All methods are thread-safe, so one Client can serve every rank thread of a
// process. Standard library only: gRPC and the generated protos stay behind the pimpl.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "syncopate/status.h"

namespace syncopate {

struct ClientOptions {
  // Deadline of Compile and Stats calls.
  std::chrono::milliseconds rpc_timeout{120000};
  // Join/Agree calls wait up to their own timeout at the daemon; their RPC deadline adds this.
  std::chrono::milliseconds wait_grace{5000};
  std::string token;   // shared token, for TCP targets
  std::string tls_ca;  // PEM root certificates (contents); non-empty: TLS to a TCP target
  int64_t max_message_bytes = int64_t{64} << 20;
};

struct EmbeddedOptions {
  std::string node_name = "embedded";
  std::string cache_dir;  // kernel cache directory; "" = memory only
  int compile_threads = 4;
  int64_t max_wait_ms = 600000;
  // The daemon logs through spdlog's default logger, which is the host process's. "" leaves its
  // level alone; "warn", "error", ... set it (process-wide) when the embedded daemon starts.
  std::string log_level;
};

struct JoinOptions {
  std::string job_id;
  int world_size = 0;
  int rank = -1;
  std::string node_name;  // default: the daemon's node name
  std::string gpu_arch;   // e.g. "sm_90"
  // host:port of the leader daemon (like MASTER_ADDR); "" = the daemon this client talks to.
  std::string leader_address;
  std::chrono::milliseconds timeout{60000};  // how long to wait for every rank
};

struct Member {
  int rank = 0;
  std::string node_name;
  std::string gpu_arch;
  std::string daemon;
};

struct Group {
  std::string group_id;
  std::string job_id;
  int world_size = 0;
  int rank = 0;
  std::vector<Member> members;
  std::string leader_address;
  std::string leader_daemon;
};

// A plan template request (core/plan/templates.h names and parameters).
struct TemplateSpec {
  std::string name;  // "allgather.ring", "reducescatter.direct", ...
  std::vector<int64_t> shape;
  std::string dtype = "bf16";  // f32 f16 bf16 f64 i32 i64 i8 u8
  int axis = 0;
  int chunks_per_shard = 1;
  std::string reduce_op = "sum";  // sum, max (ReduceScatter / AllReduce)
  int ranks_per_node = 0;
  int sub_collectives = 1;
  std::vector<std::vector<int64_t>> splits;  // AllToAll variable: splits[src][dst]
  int split = 0;  // > 1: re-chunk the built plan
};

// What this rank wants to run. Exactly one of template_spec and plan is given.
struct Proposal {
  std::string kernel_hash;
  std::optional<TemplateSpec> template_spec;
  std::string plan;  // a serialized syncopate.v1.Plan (binary protobuf)
};

struct AgreedPlan {
  std::string plan_hash;
  std::string kernel_hash;
  uint64_t round = 0;
  std::string plan;  // serialized syncopate.v1.Plan, plan_hash set
};

struct KernelSource {
  std::string source;
  std::map<std::string, std::string> headers;
  std::vector<std::string> options;
  std::string spec;  // kernel spec text (jit/compiler/kernel_spec.h)
  std::string program_name;
};

struct CompileRequest {
  KernelSource kernel;
  std::string plan;  // serialized syncopate.v1.Plan (AgreedPlan::plan); "" for none
  // AgreedPlan::plan_hash. When set, the plan travels by hash only (the daemon that answered
  // Agree holds it), which makes a repeated Compile a few hundred bytes; should the daemon no
  // longer hold it (restart, eviction), the call is retried once with `plan` in full. Without
  // `plan`, that case is NOT_FOUND.
  std::string plan_hash;
  int rank = 0;
  std::string arch = "sm_90";
  std::chrono::milliseconds timeout{0};  // 0: ClientOptions::rpc_timeout
  // The cache_key of a binary this caller already holds: when the result has the same key the
  // daemon does not send the binary again (CompiledKernel::binary_omitted).
  std::string known_cache_key;
  // Rank -> node id for a group spanning nodes (what the runtime's Group::nodes() says); the
  // kernel differs per map, so a rank of a multi-node group must send it to get its binary.
  // Empty: one node. Needs `plan` or `plan_hash`.
  std::vector<int> nodes;
};

struct LaunchInfo {
  std::string entry;
  std::vector<uint32_t> grid;
  uint32_t block_threads = 0;
  uint32_t shared_mem_bytes = 0;
  uint32_t num_comm_ctas = 0;
  uint32_t num_tiles = 0;
  uint32_t num_chunks = 0;
};

struct CompiledKernel {
  std::string binary;  // cubin, or PTX when is_ptx
  bool is_ptx = false;
  std::string target;
  std::string log;
  std::string nvrtc_version;
  std::string plan_hash;
  std::string cache_key;
  bool cache_hit = false;
  bool binary_omitted = false;  // binary empty: it is the one for known_cache_key
  LaunchInfo launch;
};

struct DaemonStats {
  std::string daemon;
  uint64_t uptime_ms = 0;
  uint64_t groups_formed = 0;
  uint64_t groups_failed = 0;
  uint64_t groups_live = 0;
  uint64_t pending_joins = 0;
  uint64_t pending_agreements = 0;
  uint64_t agreements = 0;
  uint64_t agreements_failed = 0;
  uint64_t compiles = 0;
  uint64_t compile_cache_hits = 0;
  uint64_t compile_errors = 0;
  uint64_t nvrtc_compiles = 0;  // compiles actually run (cache misses)
  uint64_t forwarded_calls = 0;
  uint64_t rejected_calls = 0;
  uint64_t rss_bytes = 0;
  bool draining = false;
  // Compile calls the daemon holds now: running, or waiting on the same kernel's compile that
  // another call runs (an answered call is released at once).
  uint64_t compile_calls_held = 0;
};

class Client {
 public:
  // `target`: a Unix socket path ("/run/syncopate/syncopated.sock" or "unix:/path"), or
  // "host:port" for a daemon's TCP port. Fails at once when a socket path does not exist.
  static Result<Client> Connect(const std::string& target, const ClientOptions& options = {});
  // Runs the daemon's services inside this process.
  static Result<Client> Embedded(const EmbeddedOptions& options = {});

  // Waits until every rank of the job has joined. DEADLINE_EXCEEDED names the missing ranks;
  // ABORTED names a rank or daemon that went away; INVALID_ARGUMENT a duplicate rank or a world
  // size that does not match.
  Result<Group> Join(const JoinOptions& options) const;
  // One round of plan agreement. FAILED_PRECONDITION names the ranks that proposed differently;
  // INVALID_ARGUMENT a plan that fails validation.
  Result<AgreedPlan> Agree(const Group& group, const Proposal& proposal,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // An all-gather of opaque blobs within the group (UCX worker addresses, remote keys, a
  // barrier with empty blobs): returns every rank's blob in rank order. Every rank's k-th
  // Exchange on a group is one round, and all of them must give the same `key` (else
  // FAILED_PRECONDITION names what each rank gave). RESOURCE_EXHAUSTED: a blob over 1 MiB;
  // DEADLINE_EXCEEDED names the ranks that did not contribute; ABORTED names a rank that went
  // away (the group is then broken, like after a failed Agree wait).
  Result<std::vector<std::string>> Exchange(
      const Group& group, std::string key, std::string blob,
      std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  Result<CompiledKernel> Compile(const CompileRequest& request) const;
  Result<DaemonStats> Stats() const;
  // OK when the daemon's grpc.health.v1 reports SERVING.
  Status CheckHealth() const;

 private:
  struct Impl;
  explicit Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace syncopate
