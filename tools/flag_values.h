// The values of the trainer's flags, read and checked: numbers, seeds, device lists. Each error
// names the flag, what it got and a value that would do (UsageError).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

int parse_int(const std::string& flag, const std::string& v);
// Seeds span the whole unsigned 64-bit range (a config's seed: up to 2^63 - 1).
uint64_t parse_seed(const std::string& flag, const std::string& v);
double parse_double(const std::string& flag, const std::string& v);

// The accepted forms of one --device entry.
extern const char kDeviceForms[];
// --device's list ("cpu,gpu:1"), each entry one of the accepted forms; refuses an empty entry or
// an unknown name, naming the nearest ("cuda": gpu, "GPU:1": gpu:1). A bad number after the
// colon is parse_device's to tell.
std::vector<std::string> parse_device_list(const std::string& v);

// The help that lists a command's flags: "trainer --help", "trainer bench --help".
std::string help_of(const std::string& command);

}  // namespace tandem
