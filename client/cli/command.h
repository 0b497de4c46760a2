// The `syncopate` command line: each subcommand lives in its own *_command.cc and registers
// itself here with a static SubcommandRegistration, so subcommands are added without touching
// main.cc. Exit codes: 0 success, 1 the operation ran and failed (a plan that does not simulate,
// a kernel that does not compile), 2 bad usage or bad input (one-line error on stderr).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace syncopate::cli {

// args excludes the program and subcommand names: `syncopate plan show --world 4` -> {"show",
// "--world", "4"}.
using SubcommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Subcommand {
  std::string summary;  // one line for `syncopate --help`
  SubcommandFn run;
};

std::map<std::string, Subcommand>& Subcommands();

struct SubcommandRegistration {
  SubcommandRegistration(std::string name, std::string summary, SubcommandFn run) {
    Subcommands()[std::move(name)] = Subcommand{std::move(summary), std::move(run)};
  }
};

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

}  // namespace syncopate::cli
