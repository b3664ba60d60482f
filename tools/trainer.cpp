// trainer: the command line of tandem. Parses flags, calls the engine, prints errors, exits.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/communicator.h"
#include "engine/config.h"  // closest_name
#include "engine/error.h"
#include "engine/progress.h"
#include "engine/text.h"
#include "engine/user_message.h"
#include "tools/app.h"
#include "tools/flag_values.h"
#include "tools/help.h"

namespace {

using tandem::help_of;

// "train, bench and eval", training named as trainer --help names it.
std::string command_list(const std::vector<std::string>& commands) {
  std::string out;
  for (size_t k = 0; k < commands.size(); ++k)
    out += (k == 0                     ? ""
            : k + 1 == commands.size() ? " and "
                                       : ", ") +
           (commands[k] == "train" ? std::string("training") : commands[k]);
  return out;
}

// The flag an argument names: its long form for the short ones (-c, -q).
std::string long_form(const std::string& a) {
  return a == "-c" ? "--config" : a == "-q" ? "--quiet" : a;
}

// A flag of other commands only says whose it is: a command takes the flags its help lists, and
// no other (they would be ignored, and the user think them used).
void check_flag_of(const std::string& a, const std::string& command) {
  if (!a.starts_with("-") || a == "--help" || a == "-h" || a == "--version") return;
  const std::vector<std::string> owners = tandem::commands_of_flag(long_form(a));
  if (owners.empty() || std::find(owners.begin(), owners.end(), command) != owners.end()) return;
  throw tandem::UsageError(a + " is not a flag of " + command_list({command}),
                           "it belongs to " + command_list(owners) + "; see " + help_of(command) +
                               " for the flags of " + command_list({command}));
}

// A misspelt flag gets the nearest flag.
tandem::UsageError unknown_argument(const std::string& a, const std::string& command) {
  std::vector<std::string> flags = tandem::flag_names();
  flags.insert(flags.end(), {"--help", "--version"});
  // A config file given alone, as other trainers take it: the flag it needs.
  if (!a.starts_with("-") && (a.ends_with(".yaml") || a.ends_with(".yml")))
    return tandem::UsageError(
        "unknown argument '" + a + "'; a config file is given with --config",
        "trainer " + std::string(command == "train" ? "" : command + " ") + "--config " + a);
  const std::string guess = tandem::closest_name(a, flags);
  return tandem::UsageError("unknown argument '" + a + "'" + tandem::did_you_mean(guess),
                            "see " + help_of(command));
}

int run(int argc, char** argv) {
  // "--lr=0.02" is "--lr 0.02".
  std::vector<std::string> args;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    const size_t eq = a.find('=');
    if (a.starts_with("--") && eq != std::string::npos) {
      if (tandem::is_switch(a.substr(0, eq)))
        throw tandem::UsageError(a.substr(0, eq) + " takes no value, got '" + a + "'",
                                 "write " + a.substr(0, eq) + " alone");
      args.push_back(a.substr(0, eq));
      args.push_back(a.substr(eq + 1));
    } else {
      args.push_back(a);
    }
  }
  const std::vector<std::string> commands = tandem::command_names();
  std::string command = "train";
  size_t i = 0;
  if (!args.empty() && std::find(commands.begin(), commands.end(), args[0]) != commands.end()) {
    command = args[0];
    i = 1;
  } else if (!args.empty() && args[0] == "version") {
    fmt::print("tandem {}\n", TANDEM_VERSION);
    return 0;
  } else if (!args.empty() && args[0] == "help") {  // "trainer help", "trainer help bench"
    if (args.size() > 2 || (args.size() == 2 &&
                            std::find(commands.begin(), commands.end(), args[1]) == commands.end()))
      throw tandem::UsageError(
          "trainer help takes one command name, got '" +
              fmt::format("{}", fmt::join(args.begin() + 1, args.end(), " ")) + "'",
          fmt::format("give one of {}, or nothing for the whole help", fmt::join(commands, ", ")));
    const size_t width = tandem::output_width();
    std::fputs(
        (args.size() == 2 ? tandem::command_help(args[1], width) : tandem::general_help(width))
            .c_str(),
        stdout);
    return 0;
  } else if (!args.empty() && !args[0].starts_with("-")) {  // a misspelt command: "bnech"
    std::vector<std::string> words = commands;
    words.insert(words.end(), {"help", "version"});
    if (const std::string guess = tandem::closest_name(args[0], words); !guess.empty())
      throw tandem::UsageError("unknown command '" + args[0] + "'" + tandem::did_you_mean(guess),
                               fmt::format("the commands are {} (train when none is given); see "
                                           "trainer --help",
                                           fmt::join(commands, ", ")));
  }
  const bool named = i == 1;  // "trainer bench --help" is bench's help, "trainer --help" all of it
  tandem::RunRequest r;
  r.command_line.push_back(argv[0]);
  r.command_line.insert(r.command_line.end(), args.begin(), args.end());
  spdlog::set_level(spdlog::level::warn);
  std::map<std::string, std::string> given;  // flag -> its value, so that a second one is refused
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    check_flag_of(a, command);
    const std::string flag = long_form(a);
    auto value = [&]() -> std::string {
      // "--epochs --quiet": the flag's value is missing, not the word "--quiet".
      if (i + 1 >= args.size() || args[i + 1].starts_with("--"))
        throw tandem::UsageError(a + " needs a value", "see " + help_of(command));
      const std::string& v = args[++i];
      // --checkpoint-dir "" from an unset shell variable: refused, not read as no flag.
      if (v.empty() && flag != "--device")  // --device names its accepted forms
        throw tandem::UsageError(flag + " is given an empty value",
                                 "give it a value, or leave " + flag + " out");
      // The last of two would win silently; --batch-sizes lists add up by design.
      if (auto [first, fresh] = given.emplace(flag, v); !fresh && flag != "--batch-sizes")
        throw tandem::UsageError(
            flag + " is given twice ('" + first->second + "', then '" + v + "')", "give it once");
      return v;
    };
    if (a == "--help" || a == "-h") {
      // Filled to the terminal's width (80 columns in a file or a pipe), broken between words.
      const size_t width = tandem::output_width();
      std::fputs(
          (named ? tandem::command_help(command, width) : tandem::general_help(width)).c_str(),
          stdout);
      return 0;
    } else if (a == "--version") {
      fmt::print("tandem {}\n", TANDEM_VERSION);
      return 0;
    } else if ((command == "predict" || command == "import") && !a.empty() && a[0] != '-') {
      r.inputs.push_back(a);
      continue;
    }
    // Every other flag is set as the table --help prints says (tools/help.cpp).
    const std::optional<tandem::FlagUse> use = tandem::flag_use(flag, command);
    if (!use) throw unknown_argument(a, command);
    use->set(r, flag, use->takes_value ? value() : "");
  }
  // --quiet is --verbose 0; with another level the two disagree.
  if (r.quiet && given.count("--verbose") && r.verbose != 0)
    throw tandem::UsageError("--quiet and --verbose " + std::to_string(r.verbose) + " disagree",
                             "give one of them (--quiet is --verbose 0)");
  if (r.verbose == 0) r.quiet = true;
  if (r.quiet) r.verbose = 0;
  tandem::register_everything();
  // Only training shares its work out over the processes of a data-parallel run; the other
  // commands would each do all of it (bench would time processes competing for the cores).
  if (const int n = tandem::world().size(); n > 1 && command != "train")
    throw tandem::UsageError(
        fmt::format("trainer {} runs in one process; mpirun started {}", command, n),
        "run it without mpirun (only training is data-parallel)");
  if (command == "devices") return tandem::run_devices(r);
  if (command == "summary") return tandem::run_summary(r);
  if (command == "bench") return tandem::run_bench(r);
  if (command == "export-images") return tandem::run_export_images(r);
  if (command == "eval") return tandem::run_eval(r);
  if (command == "predict") return tandem::run_predict(r);
  if (command == "export") return tandem::run_export(r);
  if (command == "import") return tandem::run_import(r);
  return tandem::run_train(r);
}

// Runs the command and tells its error, if any, the way a user reads it; returns the exit status.
// untold: the error text this process leaves to the first process of a data-parallel run to tell
// (empty: none, or told here).
int run_and_report(int argc, char** argv, std::string* untold) {
  const tandem::Communicator& w = tandem::world();
  const std::string who =
      w.rank() > 0 ? fmt::format(" (process {} of {})", w.rank(), w.size()) : "";
  // Errors that every process of a data-parallel run meets alike (the command line, the config,
  // the run's loss, a device error such as no usable GPU) are the first process's to tell; the
  // others tell what may be theirs alone, and the rest too when the first does not end the run.
  auto shared = [&](tandem::ExitCode c) {
    using tandem::ExitCode;
    return w.rank() > 0 && (c == ExitCode::kUsage || c == ExitCode::kConfig ||
                            c == ExitCode::kNumerics || c == ExitCode::kDevice);
  };
  // An error ends the progress line it interrupts, and comes after what stdout holds.
  auto end_output = [] {
    tandem::end_progress_line();
    std::fflush(stdout);
  };
  try {
    return run(argc, argv);
  } catch (const tandem::Error& e) {
    end_output();
    std::string text = fmt::format("error{}: {}\n", who, tandem::user_message(e.cause()));
    if (!e.hint().empty()) text += fmt::format("hint: {}\n", e.hint());
    if (shared(e.code()))
      *untold = text;
    else
      fmt::print(stderr, "{}", text);
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    end_output();
    fmt::print(stderr, "error{}: out of host memory\nhint: try a smaller --batch-size\n", who);
    return static_cast<int>(tandem::ExitCode::kDevice);
  } catch (const std::exception& e) {
    end_output();
    fmt::print(stderr,
               "error{}: internal error: {}\nhint: please report this with the command line (and "
               "what --log-level debug adds to this message)\n",
               who, tandem::user_message(e.what()));
    return static_cast<int>(tandem::ExitCode::kInternal);
  }
}

// Log lines as a user reads them, "warning: ..." (the default logger's lines start with the date
// and time), on stderr like errors, each on a line of its own after an open progress line and
// after what stdout holds.
class UserLogSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    // A data-parallel run's first process tells its warnings (the others' stdout, where they
    // went before, is silenced: they would repeat them).
    if (tandem::world().rank() > 0) return;
    spdlog::memory_buf_t text;
    formatter_->format(msg, text);
    tandem::end_progress_line();
    std::fflush(stdout);
    const std::string line = tandem::user_message(std::string(text.data(), text.size()));
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

}  // namespace

int main(int argc, char** argv) {
  auto logger = std::make_shared<spdlog::logger>("tandem", std::make_shared<UserLogSink>());
  logger->set_pattern("%l: %v");
  spdlog::set_default_logger(logger);
  try {
    tandem::join_world(&argc, &argv);
  } catch (const tandem::Error& e) {
    fmt::print(stderr, "error: {}\nhint: {}\n", e.cause(), e.hint());
    return static_cast<int>(e.code());
  }
  tandem::Communicator& w = tandem::world();
  // In a data-parallel run the first process prints the run; the others only their errors.
  if (w.rank() > 0 && !std::freopen("/dev/null", "w", stdout))
    fmt::print(stderr, "warning: process {} could not silence its output\n", w.rank());
  std::string untold;
  const int status = run_and_report(argc, argv, &untold);
  // A failed process may leave the others waiting in a sum, so it ends the run. A stop by a
  // signal is the whole run's, taken at one step: each process leaves on its own.
  if (status != 0 && status < 128 && w.size() > 1) {
    std::fflush(stdout);
    // An error left to the first process: it ends the run once it has told it, and this process
    // with it. Should it not (the error was this process's alone, e.g. a file missing on this
    // host), this one tells it after all.
    if (!untold.empty()) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      fmt::print(stderr, "{}", untold);
    }
    w.abort(status);
  }
  tandem::leave_world();
  return status;
}
