// See include/syncopate/client.h. The only file of the client that sees gRPC and the protos.
#include "syncopate/client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <future>

#include "core/plan/plan.h"
#include "core/plan_io/plan_proto.h"
#include "server/embedded.h"
#include "syncopate/v1/service.grpc.pb.h"

namespace syncopate {

struct Client::Impl {
  ClientOptions options;
  std::string token;
  bool remote = false;  // TCP target: send the token
  std::shared_ptr<server::EmbeddedDaemon> embedded;  // kept alive as long as any Client copy
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Rendezvous::Stub> rendezvous;
  std::unique_ptr<v1::Compiler::Stub> compiler;
  std::unique_ptr<v1::Daemon::Stub> daemon;

  void Prepare(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) const {
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    if (remote && !token.empty()) ctx.AddMetadata("x-syncopate-token", token);
  }
};

namespace {

Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return Status();
  return Status(static_cast<StatusCode>(status.error_code()), status.error_message());
}

Status Invalid(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

grpc::ChannelArguments ChannelArgs(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  args.SetMaxSendMessageSize(-1);  // the daemon enforces its own limit and says so
  // Notice a dead daemon during long waits.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}


Result<v1::DType> DTypeFromName(const std::string& name) {
  absl::StatusOr<plan::DType> parsed = plan::ParseDType(name);
  if (!parsed.ok()) return Invalid("template_spec.dtype: unknown dtype '" + name + "'");
  return plan_io::ToProto(*parsed);
}

Result<v1::Proposal> ToProto(const Proposal& proposal) {
  v1::Proposal out;
  out.set_kernel_hash(proposal.kernel_hash);
  if (proposal.template_spec.has_value() == !proposal.plan.empty()) {
    return Invalid("proposal: give exactly one of template_spec and plan");
  }
  if (!proposal.plan.empty()) {
    if (!out.mutable_plan()->ParseFromString(proposal.plan)) {
      return Invalid("proposal.plan: not a serialized syncopate.v1.Plan");
    }
    return out;
  }
  const TemplateSpec& spec = *proposal.template_spec;
  v1::TemplateRequest* t = out.mutable_template_request();
  t->set_template_name(spec.name);
  for (int64_t d : spec.shape) t->add_shape(d);
  Result<v1::DType> dtype = DTypeFromName(spec.dtype);
  if (!dtype.ok()) return dtype.status();
  t->set_dtype(*dtype);
  t->set_axis(spec.axis);
  t->set_chunks_per_shard(spec.chunks_per_shard);
  if (spec.reduce_op == "sum") {
    t->set_op(v1::REDUCE_OP_SUM);
  } else if (spec.reduce_op == "max") {
    t->set_op(v1::REDUCE_OP_MAX);
  } else {
    return Invalid("template_spec.reduce_op: '" + spec.reduce_op + "' is not sum or max");
  }
  t->set_ranks_per_node(spec.ranks_per_node);
  t->set_sub_collectives(spec.sub_collectives);
  for (const auto& row : spec.splits) {
    v1::SplitRow* out_row = t->add_splits();
    for (int64_t rows : row) out_row->add_rows(rows);
  }
  t->set_split(spec.split);
  return out;
}

}  // namespace

Result<Client> Client::Connect(const std::string& target, const ClientOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->token = options.token;
  std::string address = target;
  std::string socket_path;
  if (target.rfind("unix:", 0) == 0) {
    socket_path = target.substr(5);
  } else if (!target.empty() && (target[0] == '/' || target[0] == '.')) {
    socket_path = target;
    address = "unix:" + target;
  }
  if (target.empty()) return Invalid("target: is empty (a socket path or host:port)");
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!socket_path.empty()) {
    struct stat st;
    if (stat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      return Status(StatusCode::kUnavailable,
                    "no syncopated socket at " + socket_path + " (is the daemon running?)");
    }
  } else {
    impl->remote = true;
    if (!options.tls_ca.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = options.tls_ca;
      creds = grpc::SslCredentials(ssl);
    }
  }
  impl->channel = grpc::CreateCustomChannel(address, creds, ChannelArgs(options));
  impl->rendezvous = v1::Rendezvous::NewStub(impl->channel);
  impl->compiler = v1::Compiler::NewStub(impl->channel);
  impl->daemon = v1::Daemon::NewStub(impl->channel);
  return Client(std::move(impl));
}

Result<Client> Client::Embedded(const EmbeddedOptions& options) {
  server::EmbeddedDaemonOptions eo;
  eo.node_name = options.node_name;
  eo.cache_dir = options.cache_dir;
  eo.compile_threads = options.compile_threads;
  eo.max_wait_ms = options.max_wait_ms;
  eo.log_level = options.log_level;
  absl::StatusOr<std::shared_ptr<server::EmbeddedDaemon>> daemon =
      server::EmbeddedDaemon::Start(eo);
  if (!daemon.ok()) {
    return Status(static_cast<StatusCode>(daemon.status().code()),
                  std::string(daemon.status().message()));
  }
  auto impl = std::make_shared<Impl>();
  impl->embedded = *std::move(daemon);
  impl->channel = impl->embedded->Channel(ChannelArgs(impl->options));
  impl->rendezvous = v1::Rendezvous::NewStub(impl->channel);
  impl->compiler = v1::Compiler::NewStub(impl->channel);
  impl->daemon = v1::Daemon::NewStub(impl->channel);
  return Client(std::move(impl));
}

Result<Group> Client::Join(const JoinOptions& options) const {
  if (options.timeout.count() <= 0) return Invalid("timeout: must be positive");
  v1::JoinRequest request;
  request.set_job_id(options.job_id);
  request.set_world_size(options.world_size);
  request.set_rank(options.rank);
  request.set_node_name(options.node_name);
  request.set_gpu_arch(options.gpu_arch);
  request.set_leader_address(options.leader_address);
  request.set_timeout_ms(static_cast<uint32_t>(
      std::min<int64_t>(options.timeout.count(), std::numeric_limits<uint32_t>::max())));
  v1::JoinResponse response;
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, options.timeout + impl_->options.wait_grace);
  Status status = FromGrpc(impl_->rendezvous->Join(&ctx, request, &response));
  if (!status.ok()) return status;
  Group group;
  group.group_id = response.group_id();
  group.job_id = response.job_id();
  group.world_size = response.world_size();
  group.rank = response.rank();
  group.leader_address = options.leader_address;
  group.leader_daemon = response.leader_daemon();
  for (const v1::Member& m : response.members()) {
    group.members.push_back(Member{m.rank(), m.node_name(), m.gpu_arch(), m.daemon()});
  }
  return group;
}

Result<AgreedPlan> Client::Agree(const Group& group, const Proposal& proposal,
                                 std::chrono::milliseconds timeout) const {
  if (timeout.count() <= 0) return Invalid("timeout: must be positive");
  Result<v1::Proposal> wire = ToProto(proposal);
  if (!wire.ok()) return wire.status();
  v1::AgreeRequest request;
  request.set_group_id(group.group_id);
  request.set_rank(group.rank);
  request.set_leader_address(group.leader_address);
  *request.mutable_proposal() = std::move(*wire);
  if (request.proposal().has_template_request()) {
    // A template is built for the group's world size.
    request.mutable_proposal()->mutable_template_request()->set_world_size(group.world_size);
  }
  request.set_timeout_ms(static_cast<uint32_t>(
      std::min<int64_t>(timeout.count(), std::numeric_limits<uint32_t>::max())));
  v1::AgreeResponse response;
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, timeout + impl_->options.wait_grace);
  Status status = FromGrpc(impl_->rendezvous->Agree(&ctx, request, &response));
  if (!status.ok()) return status;
  AgreedPlan agreed;
  agreed.plan_hash = response.plan_hash();
  agreed.kernel_hash = response.kernel_hash();
  agreed.round = response.round();
  agreed.plan = response.plan().SerializeAsString();
  return agreed;
}

Result<std::vector<std::string>> Client::Exchange(const Group& group, std::string key,
                                                  std::string blob,
                                                  std::chrono::milliseconds timeout) const {
  if (timeout.count() <= 0) return Invalid("timeout: must be positive");
  v1::ExchangeRequest request;
  request.set_group_id(group.group_id);
  request.set_rank(group.rank);
  request.set_leader_address(group.leader_address);
  request.set_key(std::move(key));
  request.set_blob(std::move(blob));
  request.set_timeout_ms(static_cast<uint32_t>(
      std::min<int64_t>(timeout.count(), std::numeric_limits<uint32_t>::max())));
  v1::ExchangeResponse response;
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, timeout + impl_->options.wait_grace);
  Status status = FromGrpc(impl_->rendezvous->Exchange(&ctx, request, &response));
  if (!status.ok()) return status;
  if (response.blobs_size() != group.world_size) {
    return Status(StatusCode::kInternal,
                  "exchange returned " + std::to_string(response.blobs_size()) +
                      " blobs for a group of " + std::to_string(group.world_size) + " ranks");
  }
  std::vector<std::string> blobs;
  blobs.reserve(response.blobs_size());
  for (std::string& b : *response.mutable_blobs()) blobs.push_back(std::move(b));
  return blobs;
}

Result<CompiledKernel> Client::Compile(const CompileRequest& request) const {
  v1::CompileRequest wire;
  v1::KernelSource* kernel = wire.mutable_kernel();
  kernel->set_source(request.kernel.source);
  kernel->mutable_headers()->insert(request.kernel.headers.begin(), request.kernel.headers.end());
  for (const std::string& option : request.kernel.options) kernel->add_options(option);
  kernel->set_spec(request.kernel.spec);
  kernel->set_program_name(request.kernel.program_name);
  auto attach_plan = [&]() -> Status {
    wire.clear_plan_hash();
    if (!request.plan.empty() && !wire.mutable_plan()->ParseFromString(request.plan)) {
      return Invalid("plan: not a serialized syncopate.v1.Plan");
    }
    return Status::Ok();
  };
  if (request.plan_hash.empty()) {
    if (Status s = attach_plan(); !s.ok()) return s;
  } else {
    wire.set_plan_hash(request.plan_hash);
  }
  wire.set_rank(request.rank);
  wire.set_arch(request.arch);
  wire.set_known_cache_key(request.known_cache_key);
  wire.mutable_nodes()->Add(request.nodes.begin(), request.nodes.end());
  const std::chrono::milliseconds timeout =
      request.timeout.count() > 0 ? request.timeout : impl_->options.rpc_timeout;
  wire.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  v1::CompileResponse response;
  auto call = [&]() {
    grpc::ClientContext ctx;
    impl_->Prepare(ctx, timeout + impl_->options.wait_grace);
    return FromGrpc(impl_->compiler->Compile(&ctx, wire, &response));
  };
  Status status = call();
  if (status.code() == StatusCode::kNotFound && !wire.plan_hash().empty() &&
      !request.plan.empty()) {
    // The daemon does not hold the plan (it restarted or evicted it): send it in full, once.
    if (Status s = attach_plan(); !s.ok()) return s;
    response.Clear();
    status = call();
  }
  if (!status.ok()) return status;
  CompiledKernel out;
  const v1::CompiledKernel& k = response.kernel();
  out.binary = k.binary();
  out.is_ptx = k.is_ptx();
  out.target = k.target();
  out.log = k.log();
  out.nvrtc_version = k.nvrtc_version();
  out.plan_hash = k.plan_hash();
  out.cache_key = response.cache_key();
  out.cache_hit = response.cache_hit();
  out.binary_omitted = response.binary_omitted();
  out.launch.entry = k.launch().entry();
  out.launch.grid.assign(k.launch().grid().begin(), k.launch().grid().end());
  out.launch.block_threads = k.launch().block_threads();
  out.launch.shared_mem_bytes = k.launch().shared_mem_bytes();
  out.launch.num_comm_ctas = k.launch().num_comm_ctas();
  out.launch.num_tiles = k.launch().num_tiles();
  out.launch.num_chunks = k.launch().num_chunks();
  return out;
}

Result<DaemonStats> Client::Stats() const {
  v1::StatsResponse r;
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, impl_->options.rpc_timeout);
  Status status = FromGrpc(impl_->daemon->Stats(&ctx, v1::StatsRequest(), &r));
  if (!status.ok()) return status;
  DaemonStats s;
  s.daemon = r.daemon();
  s.uptime_ms = r.uptime_ms();
  s.groups_formed = r.groups_formed();
  s.groups_failed = r.groups_failed();
  s.groups_live = r.groups_live();
  s.pending_joins = r.pending_joins();
  s.pending_agreements = r.pending_agreements();
  s.agreements = r.agreements();
  s.agreements_failed = r.agreements_failed();
  s.compiles = r.compiles();
  s.compile_cache_hits = r.compile_cache_hits();
  s.compile_errors = r.compile_errors();
  s.nvrtc_compiles = r.nvrtc_compiles();
  s.forwarded_calls = r.forwarded_calls();
  s.rejected_calls = r.rejected_calls();
  s.rss_bytes = r.rss_bytes();
  s.draining = r.draining();
  s.compile_calls_held = r.compile_calls_held();
  return s;
}

Status Client::CheckHealth() const {
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest (service ""); the response is
  // HealthCheckResponse{status = 1 (SERVING)}, encoded as the two bytes 0x08 0x01. A generic call
  // avoids generating the health protos for one message.
  grpc::GenericStub stub(impl_->channel);
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, impl_->options.rpc_timeout);
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;  // an empty message, but a message
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  Status status = FromGrpc(done.get_future().get());
  if (!status.ok()) return status;
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  if (bytes == std::string("\x08\x01", 2)) return Status();
  return Status(StatusCode::kUnavailable, "daemon health is not SERVING");
}

}  // namespace syncopate
