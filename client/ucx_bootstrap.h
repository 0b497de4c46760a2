// DaemonBootstrap: runtime/ucx's Bootstrap over the daemon's control plane. Worker addresses,
// remote keys and barriers travel as Rendezvous.Exchange rounds of an already formed group, so a
// job that joined through syncopated needs no extra hub process or port for UCX.
//
//   auto group = client.Join({...});
//   syncopate::DaemonBootstrap bootstrap(client, *group);
//   transport->Connect(bootstrap, deadline);
//
// Every AllGather is one Exchange round keyed "<prefix>.<n>" (n counts this bootstrap's calls),
// so ranks that fall out of step fail with FAILED_PRECONDITION naming what each rank sent,
// instead of silently pairing one rank's addresses with another's keys.
//
// Thread-safety: as Bootstrap — one thread drives it at a time, every rank calls in the same
// order. Two bootstraps on one group must use different prefixes and not interleave.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/ucx/bootstrap.h"
#include "runtime/ucx/plan_executor.h"
#include "syncopate/client.h"
#include "syncopate/status_absl.h"

namespace syncopate {

// The group's node map for ucx::PlanExecutor, from the node names its ranks joined with: node ids
// in order of first appearance. A rank that gave no node name is a node of its own, so its chunks
// go over UCX rather than assume a shared node it may not have.
ucx::NodeMap NodeMapOf(const Group& group);

class DaemonBootstrap : public ucx::Bootstrap {
 public:
  DaemonBootstrap(Client client, Group group, std::string key_prefix = "ucx.bootstrap")
      : client_(std::move(client)), group_(std::move(group)), prefix_(std::move(key_prefix)) {}

  const Client& client() const { return client_; }
  const Group& group() const { return group_; }
  int rank() const override { return group_.rank; }
  int world_size() const override { return group_.world_size; }
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view mine,
                                                     absl::Time deadline) override;
  absl::Status Barrier(absl::Time deadline) override;

 private:
  absl::StatusOr<std::vector<std::string>> Round(absl::string_view what, absl::string_view mine,
                                                 absl::Time deadline);

  Client client_;
  Group group_;
  std::string prefix_;
  uint64_t calls_ = 0;
};

}  // namespace syncopate
