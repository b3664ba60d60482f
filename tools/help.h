// The trainer's help: one table of its commands and flags, printed whole by trainer --help and
// one command at a time by trainer COMMAND --help.
#pragma once

#include <string>
#include <vector>

namespace tandem {

std::string general_help();

// The commands, in the order of trainer --help: train, bench, devices, ...
std::vector<std::string> command_names();

// The usage, flags, notes and an example of one command: train, bench, devices, export-images,
// eval or predict.
std::string command_help(const std::string& command);

// The commands whose help lists `flag` ("--epochs"), in the order of trainer --help; empty: no
// command has it. --help and --version, every command's, are not in the table.
std::vector<std::string> commands_of_flag(const std::string& flag);

// Every flag of the table, once each ("--epochs").
std::vector<std::string> flag_names();

// A flag that takes no value: --quiet, --json, --help, ...
bool is_switch(const std::string& flag);

}  // namespace tandem
