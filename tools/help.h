// The trainer's help and flags: one table of its commands and flags, printed whole by trainer
// --help and one command at a time by trainer COMMAND --help, which the command line is parsed
// by too (flag_use).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tools/app.h"

namespace tandem {

// trainer --help, filled to `width` columns (breaking between words only).
std::string general_help(size_t width = 80);

// The commands, in the order of trainer --help: train, bench, devices, ...
std::vector<std::string> command_names();

// The usage, flags, notes and an example of one command: train, bench, devices, export-images,
// eval or predict; filled to `width` columns as general_help.
std::string command_help(const std::string& command, size_t width = 80);

// The commands whose help lists `flag` ("--epochs"), in the order of trainer --help; empty: no
// command has it. --help and --version, every command's, are not in the table.
std::vector<std::string> commands_of_flag(const std::string& flag);

// Every flag of the table, once each ("--epochs").
std::vector<std::string> flag_names();

// How `flag` sets the request of `command`, from the same table --help prints: whether it takes a
// value, and what it does with it (throwing UsageError for a bad one). None: the command has no
// such flag.
struct FlagUse {
  bool takes_value;
  std::function<void(RunRequest& r, const std::string& flag, const std::string& value)> set;
};
std::optional<FlagUse> flag_use(const std::string& flag, const std::string& command);

// A flag that takes no value: --quiet, --json, --help, ...
bool is_switch(const std::string& flag);

}  // namespace tandem
