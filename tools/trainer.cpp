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
#include "tools/help.h"

namespace {

using tandem::split;

int parse_int(const std::string& flag, const std::string& v) {
  const std::string hint = "give a whole number after " + flag + " (see trainer --help)";
  long long n = 0;
  try {
    size_t used = 0;
    n = std::stoll(v, &used);
    if (used != v.size())
      throw tandem::UsageError(flag + " expects an integer, got '" + v + "'", hint);
  } catch (const std::out_of_range&) {
    n = v.starts_with("-") ? std::numeric_limits<long long>::min()
                           : std::numeric_limits<long long>::max();
  } catch (const std::invalid_argument&) {
    throw tandem::UsageError(flag + " expects an integer, got '" + v + "'", hint);
  }
  // A cast alone would wrap 4294967297 to 1 and run with that.
  if (n > std::numeric_limits<int>::max() || n < std::numeric_limits<int>::min())
    throw tandem::UsageError(flag + " " + v + " is out of range (at most " +
                                 std::to_string(std::numeric_limits<int>::max()) + ")",
                             hint);
  return static_cast<int>(n);
}

// Seeds span the whole unsigned 64-bit range (a config's seed: up to 2^63 - 1).
uint64_t parse_seed(const std::string& flag, const std::string& v) {
  const std::string hint = "give a whole number from 0 to 18446744073709551615 after " + flag;
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
    throw tandem::UsageError(flag + " expects a non-negative integer, got '" + v + "'", hint);
  try {
    return std::stoull(v);
  } catch (const std::out_of_range&) {
    throw tandem::UsageError(flag + " " + v + " is out of range", hint);
  }
}

double parse_double(const std::string& flag, const std::string& v) {
  const std::string hint = "give a number after " + flag + ", e.g. " + flag + " 0.01";
  // Not hexadecimal: std::stod would read "0x10" as 16. ("inf" and "nan" are read, for the
  // caller's range check to name.)
  if (v.find_first_of("xX") == std::string::npos) {
    try {
      size_t used = 0;
      double d = std::stod(v, &used);
      if (used == v.size()) return d;
    } catch (const std::out_of_range&) {
      throw tandem::UsageError(flag + " " + v + " is out of range of a double", hint);
    } catch (const std::invalid_argument&) {
    }
  }
  throw tandem::UsageError(flag + " expects a number, got '" + v + "'", hint);
}

// The help that lists a command's flags.
std::string help_of(const std::string& command) {
  return command == "train" ? "trainer --help" : "trainer " + command + " --help";
}

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

// A flag of other commands only says whose it is: a command takes the flags its help lists, and
// no other (they would be ignored, and the user think them used).
void check_flag_of(const std::string& a, const std::string& command) {
  if (!a.starts_with("-") || a == "--help" || a == "-h" || a == "--version") return;
  const std::string flag = a == "-c" ? "--config" : a == "-q" ? "--quiet" : a;
  const std::vector<std::string> owners = tandem::commands_of_flag(flag);
  if (owners.empty() || std::find(owners.begin(), owners.end(), command) != owners.end()) return;
  throw tandem::UsageError(a + " is not a flag of " + command_list({command}),
                           "it belongs to " + command_list(owners) + "; see " + help_of(command) +
                               " for the flags of " + command_list({command}));
}

// A misspelt flag gets the nearest flag.
tandem::UsageError unknown_argument(const std::string& a, const std::string& command) {
  std::vector<std::string> flags = tandem::flag_names();
  flags.insert(flags.end(), {"--help", "--version"});
  const std::string guess = tandem::closest_name(a, flags);
  return tandem::UsageError("unknown argument '" + a + "'" + tandem::did_you_mean(guess),
                            "see " + help_of(command));
}

// The accepted forms of one --device entry.
const char kDeviceForms[] =
    "give cpu, cpu:N (N threads), gpu, gpu:N (GPU number N), auto, all, or a comma list of them "
    "such as cpu,gpu";

// Refuses a device entry that is none of the accepted forms, naming the nearest ("cuda": gpu,
// "GPU:1": gpu:1). A bad number after the colon is parse_device's to tell.
void check_device_name(const std::string& d) {
  const size_t colon = d.find(':');
  const std::string name = d.substr(0, colon);
  const std::vector<std::string> known = colon == std::string::npos
                                             ? std::vector<std::string>{"cpu", "gpu", "auto", "all"}
                                             : std::vector<std::string>{"cpu", "gpu"};
  if (std::find(known.begin(), known.end(), name) != known.end()) return;
  std::string guess = tandem::closest_name(name, known);  // "GPU": gpu, "cuda": gpu
  if (!guess.empty() && colon != std::string::npos) guess += d.substr(colon);
  throw tandem::UsageError("unknown device '" + d + "'" + tandem::did_you_mean(guess),
                           kDeviceForms);
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
    std::fputs((args.size() == 2 ? tandem::command_help(args[1]) : tandem::general_help()).c_str(),
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
    auto value = [&]() -> std::string {
      // "--epochs --quiet": the flag's value is missing, not the word "--quiet".
      if (i + 1 >= args.size() || args[i + 1].starts_with("--"))
        throw tandem::UsageError(a + " needs a value", "see " + help_of(command));
      const std::string flag = a == "-c" ? "--config" : a;
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
      std::fputs((named ? tandem::command_help(command) : tandem::general_help()).c_str(), stdout);
      return 0;
    } else if (a == "--version") {
      fmt::print("tandem {}\n", TANDEM_VERSION);
      return 0;
    } else if (a == "--config" || a == "-c") {
      r.config_path = value();
    } else if (a == "--device") {
      const std::string v = value();
      r.devices = split(v, ',');
      for (const std::string& d : r.devices)
        if (d.empty())
          throw tandem::UsageError(
              v.empty() ? "--device is empty" : "--device '" + v + "' has an empty entry",
              kDeviceForms);
      for (const std::string& d : r.devices) check_device_name(d);
    } else if (a == "--epochs") {
      r.epochs = parse_int(a, value());
    } else if (a == "--batch-size") {
      r.batch_size = parse_int(a, value());
    } else if (a == "--lr") {
      r.lr = parse_double(a, value());
    } else if (a == "--seed") {
      r.seed = parse_seed(a, value());
    } else if (a == "--threads") {
      r.threads = parse_int(a, value());
    } else if (a == "--data") {
      r.data = value();
    } else if (a == "--metrics") {
      r.metrics_path = value();
    } else if (a == "--quiet" || a == "-q") {
      r.quiet = true;
    } else if (command == "train" && a == "--log-every") {
      r.log_every = parse_int(a, value());
      if (r.log_every < 1)
        throw tandem::UsageError("--log-every must be at least 1 step", "e.g. --log-every 50");
    } else if (command == "train" && a == "--tensorboard") {
      r.tensorboard = value();
    } else if (command == "train" && a == "--verbose") {
      const std::string v = value();
      if (v != "0" && v != "1" && v != "2")
        throw tandem::UsageError("--verbose " + v + ": expected 0, 1 or 2",
                                 "0: the result only (as --quiet), 1: the progress bar (default), "
                                 "2: one line per epoch");
      r.verbose = v[0] - '0';
    } else if (a == "--log-level") {
      std::string l = value();
      auto level = spdlog::level::from_str(l);
      if (level == spdlog::level::off && l != "off")
        throw tandem::UsageError("unknown log level '" + l + "'",
                                 "use trace, debug, info, warn, error or off");
      spdlog::set_level(level);
    } else if (a == "--plot") {
      r.plot_path = value();
    } else if (a == "--precision") {
      r.precisions = split(value(), ',');
      const std::vector<std::string> known = {"fp32", "tf32", "bf16", "fp16"};
      for (const std::string& p : r.precisions)
        if (std::find(known.begin(), known.end(), p) == known.end())
          throw tandem::UsageError(
              "unknown precision '" + p + "'" +
                  tandem::did_you_mean(tandem::closest_name(p, known)),
              "give fp32, tf32, bf16 or fp16, or a comma list of them such as fp32,bf16");
    } else if (a == "--log-placement") {
      r.log_placement = true;
    } else if (command == "train" && a == "--checkpoint-dir") {
      r.checkpoint_dir = value();
    } else if (command == "train" && a == "--resume") {
      r.resume = value();
    } else if (command == "bench" && a == "--batch-sizes") {
      for (const std::string& b : split(value(), ',')) r.batch_sizes.push_back(parse_int(a, b));
    } else if (command == "bench" && a == "--per-layer") {
      r.per_layer = true;
    } else if (command == "bench" && a == "--steps") {
      r.steps = parse_int(a, value());
    } else if (command == "bench" && a == "--warmup") {
      r.warmup = parse_int(a, value());
    } else if (command == "bench" && a == "--json") {
      r.json = true;
    } else if ((command == "eval" || command == "predict" || command == "export") &&
               a == "--checkpoint") {
      r.checkpoint = value();
    } else if (command == "predict" && a == "--top-k") {
      r.top_k = parse_int(a, value());
    } else if (command == "predict" && !a.empty() && a[0] != '-') {
      r.inputs.push_back(a);
    } else if (command == "export" && a == "--onnx") {
      r.onnx_path = value();
    } else if (command == "export" && a == "--opset") {
      r.opset = parse_int(a, value());
    } else if (command == "export" && a == "--softmax") {
      r.softmax = true;
    } else if (command == "export" && a == "--fold-normalization") {
      r.fold_normalization = true;
    } else if (command == "export" && a == "--force") {
      r.force = true;
    } else if (command == "export-images" && a == "--out") {
      r.out_dir = value();
    } else if (command == "export-images" && a == "--limit-per-class") {
      const std::vector<std::string> n = split(value(), ',');
      if (n.size() > 2)
        throw tandem::UsageError(a + " expects N or TRAIN,TEST", "e.g. " + a + " 30,10");
      r.limit_per_class = parse_int(a, n[0]);
      r.test_limit_per_class = n.size() == 2 ? parse_int(a, n[1]) : r.limit_per_class;
    } else {
      throw unknown_argument(a, command);
    }
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
  if (command == "bench") return tandem::run_bench(r);
  if (command == "export-images") return tandem::run_export_images(r);
  if (command == "eval") return tandem::run_eval(r);
  if (command == "predict") return tandem::run_predict(r);
  if (command == "export") return tandem::run_export(r);
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
