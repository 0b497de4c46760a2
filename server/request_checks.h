// Validation of every request the daemon accepts, before it touches a group, the cache or a GPU.
//
// Each check returns InvalidArgument with a message that starts with the offending field path
// ("template_request.shape[1]: -4 is negative"), so a client can tell exactly what to fix. The
// limits bound what one request can make the daemon do (hostile shapes, world sizes, transfer
// counts), independently of the gRPC message size limit.
//
// Thread-safety: stateless functions.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "syncopate/v1/service.pb.h"

namespace syncopate::server {

struct RequestLimits {
  int max_world_size = 4096;
  int max_template_world_size = 64;   // plan templates support 1..64 ranks
  int max_dims = 8;
  int64_t max_extent = int64_t{1} << 40;    // per axis
  int64_t max_elements = int64_t{1} << 42;  // per buffer
  int64_t max_transfers = int64_t{1} << 18; // per plan, given or estimated for a template
  int max_buffers = 64;
  int64_t max_boxes = int64_t{1} << 22;     // per plan, all regions together
  int max_chunks = 4096;                    // chunks_per_shard, split, sub_collectives
  int64_t max_source_bytes = 16 << 20;      // kernel source + headers
};

// job_id: [A-Za-z0-9._:/-]{1,128} (service.proto's alphabet).
absl::Status CheckJobId(const std::string& job_id, const char* field);
// group_id: [A-Za-z0-9._:/#-]{1,256}; GroupRegistry makes them as <job_id>#<generation>.
absl::Status CheckGroupId(const std::string& group_id, const char* field);

absl::Status CheckJoinRequest(const v1::JoinRequest& request, const RequestLimits& limits);
// Structure and limits of the proposal; the group's world size is checked by the registry.
absl::Status CheckAgreeRequest(const v1::AgreeRequest& request, const RequestLimits& limits);
absl::Status CheckProposal(const v1::Proposal& proposal, const RequestLimits& limits,
                           const std::string& field);
absl::Status CheckTemplateRequest(const v1::TemplateRequest& request, const RequestLimits& limits,
                                  const std::string& field);
absl::Status CheckPlanLimits(const v1::Plan& plan, const RequestLimits& limits,
                             const std::string& field);
absl::Status CheckCompileRequest(const v1::CompileRequest& request, const RequestLimits& limits);

}  // namespace syncopate::server
