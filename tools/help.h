// The trainer's help: one table of its commands and flags, printed whole by trainer --help and
// one command at a time by trainer COMMAND --help.
#pragma once

#include <string>

namespace tandem {

std::string general_help();

// The usage, flags, notes and an example of one command: train, bench, devices, export-images,
// eval or predict.
std::string command_help(const std::string& command);

}  // namespace tandem
