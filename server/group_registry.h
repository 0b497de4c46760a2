// The leader daemon's group state: rank rendezvous and plan-agreement rounds.
//
// Lifecycle of a job's group:
//   pending   ranks arrive through Join; the first sets the world size. When all world_size ranks
//             are in, the group forms and every waiting Join completes with the same GroupInfo.
//             A duplicate rank or a different world size fails that caller only (InvalidArgument).
//             When any waiter's deadline passes, the whole pending group fails with
//             DeadlineExceeded naming the missing ranks; when a waiter goes away (its call was
//             cancelled: the client or its daemon died), it fails with Aborted naming that rank.
//   formed    ranks call Agree; a rank's k-th call joins round k. When every rank has proposed,
//             the round is decided once (agreement.h) and every rank gets the same result. A
//             deadline or a vanished caller breaks the whole group (every waiter fails naming the
//             missing or vanished rank); a divergence or invalid plan fails only that round.
//   exchange  in a formed group, ranks call Exchange (an all-gather of blobs: UCX worker
//             addresses, remote keys, barriers); a rank's k-th call joins exchange round k, which
//             completes once every rank has given its blob. Exchange rounds are counted apart from
//             Agree rounds but share their waiting, deadline and dead-rank handling: a deadline or
//             a vanished caller breaks the group the same way; differing keys fail that round only.
//   failed    a broken group leaves a tombstone so late callers learn why (Aborted, naming the
//             rank); a new Join with the same job id starts a new group. A Join for a job whose
//             group already formed supersedes the old group (a restarted job).
//   idle      a formed group with no call waiting in it is idle. There is no "leave" call, so a
//             job that finished looks like one between rounds; idle groups end two ways: after
//             group_idle_ttl without a call (swept by a timer, not by new traffic), and, when a
//             new job needs room at max_groups, the group idle longest is evicted (its tombstone
//             says so). Only pending groups and groups with a call in flight can fill the
//             registry, so jobs that use a fresh id per run never lock a node out.
//
// No call holds a thread while it waits: completions are callbacks, run exactly once, never with
// the registry's lock held; deadlines fire from a TimerQueue.
//
// Where the code lives: one class and one mutex (mu_, guarding all of the state below), its
// member functions split by purpose. A public call takes mu_, collects its completions in a
// Deferred under it, and runs them after releasing it (Agree takes it again to record a decision
// it made without it); functions marked ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) never take it.
//   group_registry.cc           construction, Shutdown, Stats, and what Agree and Exchange share:
//                               finding a formed group and entering a round (AddToRound)
//   group_registry_join.cc      Join and Form: admission, the pending group, forming it
//   group_registry_agree.cc     Agree: a full round is decided outside the lock (agreement.h),
//                               reusing a recent decision for the same proposals
//   group_registry_exchange.cc  Exchange: a full round's keys are compared and its blobs gathered
//   group_registry_failure.cc   failing a group: deadlines (Expire), vanished callers (Cancel),
//                               FailPending, BreakGroup and tombstones
//   group_registry_sweep.cc     idle groups: the sweep timer, expiry after group_idle_ttl and
//                               eviction at max_groups
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/agreement.h"
#include "server/timer_queue.h"
#include "syncopate/v1/service.pb.h"

namespace syncopate::server {

struct MemberInfo {
  int rank = 0;
  std::string node_name;
  std::string gpu_arch;
  std::string daemon;  // the daemon the rank joined through
};

struct GroupInfo {
  std::string group_id;
  std::string job_id;
  int world_size = 0;
  std::vector<MemberInfo> members;  // rank order
};

struct AgreeOutcome {
  std::shared_ptr<const AgreeResult> result;
  uint64_t round = 0;
};

struct ExchangeOutcome {
  std::shared_ptr<const std::vector<std::string>> blobs;  // rank order; shared by every rank
  uint64_t round = 0;
};

struct RegistryStats {
  uint64_t groups_formed = 0;
  uint64_t groups_failed = 0;
  uint64_t groups_live = 0;
  uint64_t pending_joins = 0;
  uint64_t pending_agreements = 0;
  uint64_t agreements = 0;
  uint64_t agreements_failed = 0;
  uint64_t groups_expired = 0;  // idle past group_idle_ttl
  uint64_t groups_evicted = 0;  // idle, evicted for a new job at max_groups
};

class GroupRegistry {
 public:
  using WaiterId = uint64_t;
  using JoinDone = absl::AnyInvocable<void(absl::StatusOr<GroupInfo>)>;
  using AgreeDone = absl::AnyInvocable<void(absl::StatusOr<AgreeOutcome>)>;
  using ExchangeDone = absl::AnyInvocable<void(absl::StatusOr<ExchangeOutcome>)>;

  struct Options {
    std::string daemon_name = "syncopated";  // for ids and messages
    int max_groups = 1024;                   // pending + formed
    absl::Duration group_idle_ttl = absl::Hours(1);
    // How often idle groups are swept; zero: ttl / 4, clamped to [10 ms, 60 s].
    absl::Duration sweep_interval = absl::ZeroDuration();
    int tombstones = 1024;
  };

  explicit GroupRegistry(Options options);
  ~GroupRegistry();  // fails every waiter with Unavailable first
  GroupRegistry(const GroupRegistry&) = delete;
  GroupRegistry& operator=(const GroupRegistry&) = delete;

  // `member.daemon` names where the rank came from. `done` runs exactly once (possibly before
  // Join returns). The returned id is for Cancel.
  WaiterId Join(const std::string& job_id, int world_size, MemberInfo member, absl::Time deadline,
                JoinDone done);
  WaiterId Agree(const std::string& group_id, int rank, v1::Proposal proposal,
                 absl::Time deadline, AgreeDone done);
  // Sizes of `key` and `blob` are the caller's to bound (rendezvous_service.cc).
  WaiterId Exchange(const std::string& group_id, int rank, std::string key, std::string blob,
                    absl::Time deadline, ExchangeDone done);
  // The waiter's caller went away (`why` says how). Its group fails, naming the rank; the waiter's
  // own callback gets Cancelled. No-op when the waiter already completed.
  void Cancel(WaiterId id, const std::string& why);
  // Draining: fails every waiter with Unavailable and rejects new calls.
  void Shutdown(const std::string& why);

  RegistryStats Stats() const;

 private:
  struct JoinWaiter {
    WaiterId id = 0;
    MemberInfo member;
    TimerQueue::TimerId timer = 0;
    JoinDone done;
  };
  struct PendingGroup {
    std::string group_id;
    std::string job_id;
    int world_size = 0;
    std::string founder;  // "rank 0 from node n0", for world-size mismatch messages
    std::map<int, JoinWaiter> joined;
  };
  // A rank waiting in a round: an Agree (proposal, done) or an Exchange (key, blob,
  // exchange_done). One struct for both so deadlines, cancels and breaks handle them alike.
  struct AgreeWaiter {
    WaiterId id = 0;
    TimerQueue::TimerId timer = 0;
    v1::Proposal proposal;
    AgreeDone done;
    std::string key;
    std::string blob;
    ExchangeDone exchange_done;

    void Fail(const absl::Status& status) {
      if (done) done(status);
      if (exchange_done) exchange_done(status);
    }
  };
  struct Round {
    std::map<int, AgreeWaiter> proposals;
  };
  struct FormedGroup {
    GroupInfo info;
    std::vector<uint64_t> next_round;  // per rank
    std::map<uint64_t, Round> rounds;
    std::vector<uint64_t> next_exchange;  // per rank
    std::map<uint64_t, Round> exchanges;
    absl::Time last_used;
    // Decided proposals (fingerprint -> result), so a training loop re-agreeing on the same
    // plan does not rebuild and revalidate it; small and bounded.
    std::deque<std::pair<std::string, std::shared_ptr<const AgreeResult>>> decided;
  };
  // Where a waiter is, for Cancel and deadlines.
  struct Location {
    bool is_join = true;
    std::string key;  // job id (join) or group id (agree, exchange)
    int rank = 0;
    uint64_t round = 0;
    bool is_exchange = false;  // with !is_join: an exchange round, not an agree round
  };
  // Callbacks collected under the lock and run after it is released.
  using Deferred = std::vector<absl::AnyInvocable<void()>>;

  // group_registry_join.cc
  // The pending group of `job_id` for a new joiner, created when there is none (evicting the
  // idlest group at max_groups), after superseding the job's formed group; or why the Join is
  // refused (shutting down, registry full).
  absl::StatusOr<PendingGroup*> OpenPendingGroup(const std::string& job_id, int world_size,
                                                 const MemberInfo& member, absl::Time now,
                                                 Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `member` to `group` (moving `done` from the caller only on success) and forms the group
  // when it is the last rank; or why it cannot join (world size mismatch, duplicate rank).
  absl::StatusOr<WaiterId> AddJoiner(PendingGroup& group, int world_size, const MemberInfo& member,
                                     absl::Time deadline, JoinDone& done, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Form(PendingGroup& pending, Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // group_registry.cc: shared by Agree and Exchange.
  // The formed group `group_id` with `rank` in range, or why a round call cannot join it
  // (shutting down, tombstone, unknown group, rank out of range).
  absl::StatusOr<FormedGroup*> FindFormedGroup(const std::string& group_id, int rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts `waiter` (its id set by the caller; its deadline timer set here) into round
  // `location.round` of `rounds`. When that completes the round (every rank is in), removes the
  // round and returns its waiters, their timers cancelled; else returns nothing.
  std::map<int, AgreeWaiter> AddToRound(FormedGroup& group, std::map<uint64_t, Round>& rounds,
                                        Location location, absl::Time deadline, AgreeWaiter waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string Describe(const MemberInfo& member);
  // Logs a round call refused before it joined a round (`event`: agree_rejected, ...).
  static void LogRejected(std::string_view event, const std::string& group_id, int rank,
                          const absl::Status& why);

  // group_registry_agree.cc
  // Counts a decided round and, when it was newly decided, caches it in its group's `decided`.
  void RecordDecision(const std::string& group_id, const std::string& fingerprint,
                      const absl::StatusOr<std::shared_ptr<const AgreeResult>>& result, bool reused)
      ABSL_LOCKS_EXCLUDED(mu_);

  // group_registry_failure.cc
  void Expire(WaiterId id) ABSL_LOCKS_EXCLUDED(mu_);
  // Fails the group waiter `id` is in (a pending group through FailPending, a formed one through
  // BreakGroup) with the status its builder makes; `what` names the waiter's round. Shared by
  // deadlines (Expire) and vanished callers (Cancel), which differ only in the message. No-op
  // when the waiter already completed.
  void FailWaiterGroup(
      WaiterId id, WaiterId cancelled_waiter, const std::string& cancelled_why,
      absl::FunctionRef<absl::Status(const Location&, const PendingGroup&)> pending_status,
      absl::FunctionRef<absl::Status(const Location&, const FormedGroup&, const std::string& what)>
          round_status) ABSL_LOCKS_EXCLUDED(mu_);
  void FailPending(const std::string& job_id, const absl::Status& status,
                   WaiterId cancelled_waiter, const std::string& cancelled_why, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BreakGroup(const std::string& group_id, const absl::Status& status,
                  WaiterId cancelled_waiter, const std::string& cancelled_why,
                  Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddTombstone(const std::string& group_id, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // group_registry_sweep.cc
  // Options::sweep_interval, or its default when zero.
  static absl::Duration SweepIntervalFor(const Options& options);
  void SweepIdle(absl::Time now, Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer's sweep: SweepIdle, then schedules the next one (not after Shutdown).
  void SweepTick() ABSL_LOCKS_EXCLUDED(mu_);
  // At max_groups: breaks the formed group idle longest, for `job_id`. False when every group
  // is pending or has a call waiting in it.
  bool EvictIdlest(const std::string& job_id, absl::Time now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const absl::Duration sweep_interval_;
  const std::string incarnation_;  // random, so group ids differ across daemon restarts
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::string shutdown_why_ ABSL_GUARDED_BY(mu_);
  WaiterId next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_group_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, PendingGroup> pending_ ABSL_GUARDED_BY(mu_);         // by job id
  std::map<std::string, FormedGroup> formed_ ABSL_GUARDED_BY(mu_);           // by group id
  std::map<std::string, std::string> formed_by_job_ ABSL_GUARDED_BY(mu_);    // job -> group id
  std::map<std::string, absl::Status> tombstones_ ABSL_GUARDED_BY(mu_);      // group id -> why
  std::deque<std::string> tombstone_order_ ABSL_GUARDED_BY(mu_);
  std::map<WaiterId, Location> waiters_ ABSL_GUARDED_BY(mu_);
  RegistryStats stats_ ABSL_GUARDED_BY(mu_);
  // Last member: destroyed first, so no timer fires into a half-destroyed registry.
  TimerQueue timers_;
};

}  // namespace syncopate::server
