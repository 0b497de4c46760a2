// Entry point of the `syncopate` CLI: dispatches to registered subcommands (see command.h).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "client/cli/command.h"

namespace syncopate::cli {

std::map<std::string, Subcommand>& Subcommands() {
  static auto* subcommands = new std::map<std::string, Subcommand>();
  return *subcommands;
}

namespace {

void PrintUsage() {
  std::fprintf(stderr, "usage: syncopate <command> [args...]\n\ncommands:\n");
  for (const auto& [name, command] : Subcommands()) {
    std::fprintf(stderr, "  %-10s %s\n", name.c_str(), command.summary.c_str());
  }
}

}  // namespace
}  // namespace syncopate::cli

int main(int argc, char** argv) {
  using namespace syncopate::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    PrintUsage();
    return argc < 2 ? kExitUsage : kExitOk;
  }
  auto it = Subcommands().find(argv[1]);
  if (it == Subcommands().end()) {
    std::fprintf(stderr, "syncopate: unknown command '%s'\n", argv[1]);
    PrintUsage();
    return kExitUsage;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second.run(args);
  } catch (const std::exception& e) {
    // Commands report errors as statuses; this only keeps a bug from becoming a crash.
    std::fprintf(stderr, "syncopate %s: internal error: %s\n", argv[1], e.what());
    return kExitFailed;
  }
}
