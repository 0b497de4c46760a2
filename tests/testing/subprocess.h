// Test helpers: child processes (the syncopated binary, rank helper processes) with their stdout
// captured, and a daemon wrapper that starts syncopated on ephemeral ports in a temp dir.
//
// Thread-safety: one owner per object; children are killed (SIGKILL) on destruction.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace syncopate::testing {

// A child process whose stdout+stderr go to a file (read back with Output()).
class Subprocess {
 public:
  Subprocess(const std::string& binary, const std::vector<std::string>& args,
             const std::string& output_path)
      : output_path_(output_path) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Subprocess() {
    if (pid_ > 0 && !exit_code_) {
      kill(pid_, SIGKILL);
      int status;
      waitpid(pid_, &status, 0);
    }
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  void Signal(int sig) {
    if (pid_ > 0 && !exit_code_) kill(pid_, sig);
  }

  // Exit code (128+signal when killed), or nullopt if still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    if (exit_code_) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void Kill() {
    Signal(SIGKILL);
    Wait();
  }

  std::string Output() const {
    std::ifstream in(output_path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string output_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// A fresh directory under $TMPDIR, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "syncopate_test_XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline constexpr char kTestToken[] = "test-token-7f3a";

// syncopated on a Unix socket in `dir` and TCP 127.0.0.1:0 (the port read back from a file).
class DaemonProcess {
 public:
  DaemonProcess(const std::string& binary, const TempDir& dir, const std::string& name,
                std::vector<std::string> extra = {})
      : socket_(dir.Path(name + ".sock")), port_file_(dir.Path(name + ".port")) {
    std::filesystem::remove(port_file_);
    std::vector<std::string> args = {
        "--unix_socket=" + socket_,           "--listen=127.0.0.1:0", "--port_file=" + port_file_,
        std::string("--token=") + kTestToken, "--node_name=" + name,  "--log_level=debug"};
    args.insert(args.end(), extra.begin(), extra.end());
    process_.emplace(binary, args, dir.Path(name + ".log"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file_);
      if (in >> port_ && port_ > 0) break;
      if (process_->Wait(std::chrono::milliseconds(0))) break;  // died
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  bool ok() const { return port_ > 0; }
  const std::string& socket() const { return socket_; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  Subprocess& process() { return *process_; }
  std::string Log() const { return process_->Output(); }

 private:
  std::string socket_;
  std::string port_file_;
  int port_ = 0;
  std::optional<Subprocess> process_;
};

}  // namespace syncopate::testing
