// UcxTransport, construction and the progress thread (see transport.h for the threading model
// and where the other parts live): Create starts the thread that creates and owns the UCX
// context and worker, runs posted commands and progresses the worker; Impl's command queue.
#include "runtime/ucx/transport.h"

#include <memory>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/transport_internal.h"
#include "spdlog/spdlog.h"

namespace syncopate::ucx {

namespace {

// How often the progress loop polls same-host peers' pidfds: one poll(2) per interval keeps the
// idle and busy loops as cheap as before, and a peer's exit still fails its waits within about
// a millisecond rather than at their deadline.
constexpr absl::Duration kLivenessInterval = absl::Milliseconds(1);

}  // namespace

bool Completion::done() const {
  return state_ != nullptr && state_->done.load(std::memory_order_acquire);
}

UcxTransport::UcxTransport(const TransportOptions& options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(
    const TransportOptions& options) {
  std::unique_ptr<UcxTransport> t(new UcxTransport(options));
  Impl* impl = t->impl_.get();
  auto ready = std::make_shared<absl::Notification>();
  auto init_status = std::make_shared<absl::Status>();
  UcxTransport* self = t.get();
  impl->thread = std::thread([self, impl, ready, init_status] {
    absl::Status s = impl->Init(*self);
    *init_status = s;
    ready->Notify();
    if (s.ok()) impl->ProgressLoop(*self);
  });
  ready->WaitForNotification();
  if (!init_status->ok()) {
    impl->thread.join();
    t->impl_->stop = true;
    return *init_status;
  }
  return t;
}

UcxTransport::~UcxTransport() {
  absl::Status s = Shutdown();
  if (!s.ok()) spdlog::warn("ucx transport teardown: {}", s.ToString());
}

// The worker is created on the thread that drives it (UCS_THREAD_MODE_SINGLE).
absl::Status UcxTransport::Impl::Init(UcxTransport& t) {
  Context::Options copts;
  copts.name = t.options_.name;
  copts.features = UCP_FEATURE_RMA;
  copts.config = t.options_.ucx_config;
  ASSIGN_OR_RETURN(context, Context::Create(copts));
  ASSIGN_OR_RETURN(t.memory_types_, context.MemoryTypes());
  ASSIGN_OR_RETURN(worker, Worker::Create(context, UCS_THREAD_MODE_SINGLE));
  return absl::OkStatus();
}

void UcxTransport::Impl::ProgressLoop(UcxTransport& t) {
  absl::Time last_active = absl::Now();
  const absl::Duration spin = t.options_.spin_window;
  while (!stop.load(std::memory_order_acquire)) {
    bool ran = DrainQueue();
    if (stop.load(std::memory_order_acquire)) break;  // teardown ran in the queue
    if (!liveness.empty()) {
      if (absl::Time now = absl::Now(); now >= next_liveness_check) {
        next_liveness_check = now + kLivenessInterval;
        for (int r : liveness.Exited()) {
          t.MarkPeerFailed(r, absl::UnavailableError("process exited"));
        }
      }
    }
    unsigned progressed = ucp_worker_progress(worker.get());
    if (ran || progressed != 0) {
      last_active = absl::Now();
      continue;
    }
    // Operations in flight (a flush or a get waits on progress) or recent traffic (a target
    // of tcp RMA applies incoming puts only while progressed): keep polling, yielding the
    // core to whoever else is runnable (these machines share 2 cores).
    if (t.in_flight_.load(std::memory_order_relaxed) > 0 || absl::Now() - last_active < spin) {
      std::this_thread::yield();
      continue;
    }
    // Idle (or waiting on a slow peer): sleep briefly, waking early for new commands.
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](std::atomic<bool>* w) { return w->load(); }, &has_work),
                        absl::Microseconds(50));
  }
}

void UcxTransport::Impl::Enqueue(std::function<void()> fn) {
  absl::MutexLock lock(&mu);
  queue.push_back(std::move(fn));
  has_work.store(true, std::memory_order_release);
}

absl::Status UcxTransport::Impl::RunSync(std::function<absl::Status()> fn, absl::Time deadline) {
  auto done = std::make_shared<absl::Notification>();
  auto result = std::make_shared<absl::Status>();
  Enqueue([fn = std::move(fn), done, result] {
    *result = fn();
    done->Notify();
  });
  if (!done->WaitForNotificationWithDeadline(deadline)) {
    return absl::DeadlineExceededError("UCX progress thread did not run a setup step in time");
  }
  return *result;
}

bool UcxTransport::Impl::DrainQueue() {
  if (!has_work.load(std::memory_order_acquire)) return false;
  std::vector<std::function<void()>> batch;
  {
    absl::MutexLock lock(&mu);
    batch.swap(queue);
    has_work.store(false, std::memory_order_relaxed);
  }
  for (auto& fn : batch) fn();
  return true;
}

}  // namespace syncopate::ucx
