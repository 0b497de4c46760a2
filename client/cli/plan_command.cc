// `syncopate plan show|validate|simulate|hash|save|templates`: build a plan from a template or
// load it from a file, then print its timeline, validate it, simulate it on host buffers, print
// its hash or write it to a file.
//
//   syncopate plan show --template allgather.ring --world 7 --shape 64,32 --dtype bf16
//   syncopate plan simulate --file examples/plans/allgather_ring_4.textproto --seed 3
//   syncopate plan validate --file tests/data/msccl/allgather_ring_4.xml --shape 64,32
//   syncopate plan save --template alltoall.variable --world 2 --splits "3,1;2,2" --out p.txtpb
//
// Exit codes (command.h): 0 ok; 1 validate/simulate ran and the plan failed; 2 bad flags, bad
// file or impossible parameters (one line on stderr).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "client/cli/command.h"
#include "client/cli/flag_parser.h"
#include "client/cli/plan_flags.h"
#include "core/plan/plan.h"
#include "core/plan/simulate.h"
#include "core/plan/templates.h"
#include "core/plan/timeline.h"
#include "core/plan/validate.h"
#include "core/plan_io/plan_file.h"

namespace syncopate::cli {
namespace {

constexpr char kUsage[] =
    "usage: syncopate plan <show|validate|simulate|hash|save> (--template NAME | --file PATH) "
    "[flags]\n"
    "       syncopate plan templates\n"
    "  show      print the plan's timeline\n"
    "  validate  check the plan statically; prints OK (exit 0) or the problem (exit 1)\n"
    "  simulate  run the plan on host buffers and check the result (exit 1 on failure)\n"
    "  hash      print the plan hash\n"
    "  save      write the plan to --out (.textproto/.txtpb/.pbtxt text, .pb binary)\n"
    "  templates list the template names\n";

struct Options {
  PlanSourceOptions source;
  uint64_t seed = 1;
  std::string out;
  bool help = false;
};

// One line: messages from deeper layers may span lines, the CLI contract is one line.
std::string OneLine(absl::string_view message) {
  return absl::StrReplaceAll(message, {{"\n", "; "}});
}

int Fail(int code, const std::string& verb, absl::string_view message) {
  std::fprintf(stderr, "syncopate plan%s%s: %s\n", verb.empty() ? "" : " ", verb.c_str(),
               OneLine(message).c_str());
  return code;
}

int RunPlan(const std::vector<std::string>& args) {
  if (args.empty()) {
    return Fail(kExitUsage, "", "missing verb (show, validate, simulate, hash, save, templates)");
  }
  const std::string& verb = args[0];
  if (verb == "--help" || verb == "-h" || verb == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (verb == "templates") {
    for (const std::string& name : plan::TemplateNames()) std::printf("%s\n", name.c_str());
    return kExitOk;
  }
  if (verb != "show" && verb != "validate" && verb != "simulate" && verb != "hash" &&
      verb != "save") {
    return Fail(kExitUsage, "",
                absl::StrCat("unknown verb '", verb,
                             "' (show, validate, simulate, hash, save, templates)"));
  }

  Options o;
  FlagParser flags(absl::StrCat("syncopate plan ", verb));
  AddPlanSourceFlags(flags, &o.source);
  flags.AddUint64("seed", &o.seed, "simulate: random seed for delays and interleaving");
  flags.AddString("out", &o.out, "save: output path");
  flags.AddBool("help", &o.help, "print this help");
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (absl::Status s = flags.Parse(rest, nullptr); !s.ok()) {
    return Fail(kExitUsage, verb, s.message());
  }
  if (o.help) {
    std::fputs(kUsage, stdout);
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  if (absl::Status s = CheckPlanSourceFlags(flags, o.source); !s.ok()) {
    return Fail(kExitUsage, verb, s.message());
  }
  if (verb == "save" && o.out.empty()) return Fail(kExitUsage, verb, "missing --out PATH");
  if (verb != "save" && flags.WasSet("out")) {
    return Fail(kExitUsage, verb, "--out applies to save only");
  }
  if (verb != "simulate" && flags.WasSet("seed")) {
    return Fail(kExitUsage, verb, "--seed applies to simulate only");
  }
  auto built = PlanFromFlags(o.source);
  if (!built.ok()) return Fail(kExitUsage, verb, built.status().message());
  const plan::Plan& plan = *built;

  if (verb == "show") {
    std::fputs(plan::RenderTimeline(plan).c_str(), stdout);
    return kExitOk;
  }
  if (verb == "hash") {
    std::printf("%s\n", plan::PlanHash(plan).c_str());
    return kExitOk;
  }
  if (verb == "save") {
    if (absl::Status s = plan_io::SavePlanFile(plan, o.out); !s.ok()) {
      return Fail(kExitUsage, verb, s.message());
    }
    std::printf("wrote %s (plan %s, hash %s)\n", o.out.c_str(), plan.name.c_str(),
                plan::PlanHash(plan).c_str());
    return kExitOk;
  }
  if (verb == "validate") {
    if (absl::Status s = plan::ValidatePlan(plan); !s.ok()) {
      return Fail(kExitFailed, verb, s.message());
    }
    std::printf("OK\n");
    return kExitOk;
  }
  // simulate
  plan::SimulationOptions sim;
  sim.seed = o.seed;
  auto report = plan::SimulatePlan(plan, sim);
  if (!report.ok()) return Fail(kExitFailed, verb, report.status().message());
  std::printf("%s\n", report->Summary().c_str());
  return kExitOk;
}

const SubcommandRegistration kRegistration(
    "plan", "build, load, show, validate, simulate and save chunk plans", RunPlan);

}  // namespace
}  // namespace syncopate::cli
