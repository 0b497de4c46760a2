// FlagSet: the one command-line parser of every program here (benchmarks, test helpers, tools).
// Each program declares its flags (name, help text, default = the target's value at declaration,
// and a typed target) and parses its argv into them:
//
//   int64_t reps = 20;
//   std::vector<int> chunks = {1, 2};
//   std::string kernel = "auto";
//   FlagSet flags("gpu_overlap_bench", "GPU benchmark on one GPU ...");
//   flags.Int("reps", &reps, "timed repetitions", 1, 100000);
//   flags.IntList("chunks", &chunks, "chunks per shard", 1, 64);
//   flags.Choice("kernel", &kernel, {"auto", "mma"}, "GEMM kernel");
//   flags.ParseOrExit(argc, argv);  // or: absl::Status s = flags.Parse(argc, argv);
//
// Syntax: `--name value` and `--name=value`; a bool flag is `--name` (true) or `--name=true|false|
// 1|0`; lists are comma-separated (empty entries skipped; at least one entry). `--help` / `-h`
// stops parsing and sets help() (ParseOrExit prints Usage() and exits 0). Every error is
// InvalidArgument and names the flag and the value: "unknown flag --wrold", "--reps needs a
// value", "--reps=x: want an integer in [1, 100000]", "--kernel=foo: want one of auto, mma".
// Giving a flag twice keeps the last value (a list is replaced, not appended to), except a
// Repeated flag, which collects every value.
//
// Independent of absl::flags on purpose: flags are scoped to one FlagSet (no globals), errors come
// back as statuses, and the test helpers and forked benchmarks parse more than once per process.
// Thread-safety: a FlagSet is used by one thread; Parse writes through the registered pointers,
// which must outlive it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace syncopate {

class FlagSet {
 public:
  // One declared flag; the setters tune how Usage() shows it.
  class Flag {
   public:
    // The value's placeholder in Usage(): "--gpus N" (default: from the type: N, X, VALUE, a|b,
    // LIST).
    Flag& Metavar(std::string metavar) {
      metavar_ = std::move(metavar);
      return *this;
    }
    // What Usage() shows as the default, in place of the target's value ("" shows none).
    Flag& DefaultText(std::string text) {
      default_text_ = std::move(text);
      return *this;
    }

   private:
    friend class FlagSet;
    std::string name_, help_, metavar_, default_text_;
    bool is_bool_ = false;
    // Parses `value` into the target; the message says what is wrong without naming the flag.
    std::function<absl::Status(const std::string& value)> set_;
  };

  // `program` heads Usage(); `about` (may span lines) follows it.
  explicit FlagSet(std::string program, std::string about = "");
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  Flag& Bool(std::string name, bool* target, std::string help);
  // Any integral target (int, int64_t, size_t, ...); values outside [lo, hi] are errors. The
  // default range is the target type's.
  template <class T>
  Flag& Int(std::string name, T* target, std::string help, int64_t lo = MinOf<T>(),
            int64_t hi = MaxOf<T>());
  Flag& Double(std::string name, double* target, std::string help,
               double lo = -std::numeric_limits<double>::infinity(),
               double hi = std::numeric_limits<double>::infinity());
  Flag& String(std::string name, std::string* target, std::string help);
  // A string that must be one of `choices`.
  Flag& Choice(std::string name, std::string* target, std::vector<std::string> choices,
               std::string help);
  // Comma-separated integers, each in [lo, hi].
  template <class T>
  Flag& IntList(std::string name, std::vector<T>* target, std::string help, int64_t lo = MinOf<T>(),
                int64_t hi = MaxOf<T>());
  // Comma-separated strings; with `choices`, each must be one of them.
  Flag& StringList(std::string name, std::vector<std::string>* target, std::string help,
                   std::vector<std::string> choices = {});

  // A string flag that may be given many times: each one appends its value (commas are not
  // split) to `target`, in order.
  Flag& Repeated(std::string name, std::vector<std::string>* target, std::string help);

  // Parses argv[1..argc) (argv[0] is the program). Arguments not starting with "--" (and all after
  // a bare "--") go to `positional`, or are errors when it is null.
  absl::Status Parse(int argc, const char* const* argv,
                     std::vector<std::string>* positional = nullptr);
  // The same over arguments without the program name.
  absl::Status Parse(const std::vector<std::string>& args,
                     std::vector<std::string>* positional = nullptr);
  // For a main(): Parse; on --help print Usage() to stdout and exit 0; on an error print
  // "<program>: <message>" and a pointer to --help to stderr and exit 2.
  void ParseOrExit(int argc, const char* const* argv);

  bool help() const { return help_; }  // --help or -h was given
  bool WasSet(std::string_view name) const { return set_.contains(std::string(name)); }
  // "usage: <program> [flags]", `about`, then one entry per flag in declaration order:
  // "  --name METAVAR  help [default]", help lines wrapped as given.
  std::string Usage() const;

 private:
  template <class T>
  static constexpr int64_t MinOf() {
    static_assert(std::is_integral_v<T>);
    return std::is_signed_v<T> ? static_cast<int64_t>(std::numeric_limits<T>::min()) : 0;
  }
  template <class T>
  static constexpr int64_t MaxOf() {
    static_assert(std::is_integral_v<T>);
    return std::numeric_limits<T>::max() > static_cast<uint64_t>(INT64_MAX)
               ? INT64_MAX
               : static_cast<int64_t>(std::numeric_limits<T>::max());
  }

  Flag& Add(std::string name, std::string help, std::string metavar, std::string default_text,
            bool is_bool, std::function<absl::Status(const std::string&)> set);
  Flag& AddInt(std::string name, std::string help, int64_t lo, int64_t hi, std::string default_text,
               std::function<void(int64_t)> set);
  Flag& AddIntList(std::string name, std::string help, int64_t lo, int64_t hi,
                   std::string default_text, std::function<void(std::vector<int64_t>)> set);

  std::string program_, about_;
  std::deque<Flag> flags_;  // declaration order (a deque: the returned Flag& stay valid)
  std::map<std::string, size_t> by_name_;
  std::map<std::string, bool> set_;
  bool help_ = false;
};

template <class T>
FlagSet::Flag& FlagSet::Int(std::string name, T* target, std::string help, int64_t lo, int64_t hi) {
  return AddInt(std::move(name), std::move(help), lo, hi, absl::StrCat(*target),
                [target](int64_t v) { *target = static_cast<T>(v); });
}

template <class T>
FlagSet::Flag& FlagSet::IntList(std::string name, std::vector<T>* target, std::string help,
                                int64_t lo, int64_t hi) {
  static_assert(std::is_integral_v<T>);
  return AddIntList(std::move(name), std::move(help), lo, hi, absl::StrJoin(*target, ","),
                    [target](std::vector<int64_t> v) { target->assign(v.begin(), v.end()); });
}

}  // namespace syncopate
