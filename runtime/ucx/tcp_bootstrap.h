// A TCP implementation of Bootstrap for tests and benchmarks: one hub process (usually the test
// driver) accepts every rank's connection and answers each AllGather round once all ranks have
// contributed. When a rank's connection drops, the hub tells every other rank which one, so a
// bootstrap wait fails naming it instead of running into its deadline blind.
//
// Thread-safety: TcpBootstrapHub serves on its own thread; its public methods are thread-safe.
// TcpBootstrap is driven by one thread at a time (see Bootstrap).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/base/scoped_fd.h"
#include "runtime/ucx/bootstrap.h"

namespace syncopate::ucx {

class TcpBootstrapHub {
 public:
  // Listens on `host` (an IPv4 literal) on an ephemeral port and serves one group.
  static absl::StatusOr<std::unique_ptr<TcpBootstrapHub>> Start(int world_size,
                                                                std::string host = "127.0.0.1");
  ~TcpBootstrapHub();  // stops serving and closes every connection
  TcpBootstrapHub(const TcpBootstrapHub&) = delete;
  TcpBootstrapHub& operator=(const TcpBootstrapHub&) = delete;

  std::string address() const { return address_; }  // "host:port", for TcpBootstrap::Connect

 private:
  TcpBootstrapHub(int world_size, ScopedFd listen_fd, ScopedFd wake_read, ScopedFd wake_write,
                  std::string address);
  void Serve();

  const int world_size_;
  ScopedFd listen_fd_;
  ScopedFd wake_read_;
  ScopedFd wake_write_;
  const std::string address_;
  std::thread thread_;
};

class TcpBootstrap : public Bootstrap {
 public:
  // Connects to the hub at "host:port" and announces `rank`; retries until `deadline` while the
  // hub is not listening yet.
  static absl::StatusOr<std::unique_ptr<TcpBootstrap>> Connect(absl::string_view hub_address,
                                                               int rank, int world_size,
                                                               absl::Time deadline);
  ~TcpBootstrap() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view mine,
                                                     absl::Time deadline) override;

 private:
  TcpBootstrap(ScopedFd fd, int rank, int world_size)
      : fd_(std::move(fd)), rank_(rank), world_size_(world_size) {}
  ScopedFd fd_;
  int rank_;
  int world_size_;
  bool broken_ = false;  // a failed round leaves the stream mid-frame: no further rounds
};

}  // namespace syncopate::ucx
