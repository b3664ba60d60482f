// The values of the trainer's flags (flag_values.h).
#include "tools/flag_values.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "engine/config.h"  // closest_name, did_you_mean
#include "engine/error.h"
#include "engine/text.h"

namespace tandem {

int parse_int(const std::string& flag, const std::string& v) {
  const std::string hint = "give a whole number after " + flag + " (see trainer --help)";
  long long n = 0;
  try {
    size_t used = 0;
    n = std::stoll(v, &used);
    if (used != v.size()) throw UsageError(flag + " expects an integer, got '" + v + "'", hint);
  } catch (const std::out_of_range&) {
    n = v.starts_with("-") ? std::numeric_limits<long long>::min()
                           : std::numeric_limits<long long>::max();
  } catch (const std::invalid_argument&) {
    throw UsageError(flag + " expects an integer, got '" + v + "'", hint);
  }
  // A cast alone would wrap 4294967297 to 1 and run with that.
  if (n > std::numeric_limits<int>::max() || n < std::numeric_limits<int>::min())
    throw UsageError(flag + " " + v + " is out of range (at most " +
                         std::to_string(std::numeric_limits<int>::max()) + ")",
                     hint);
  return static_cast<int>(n);
}

// Seeds span the whole unsigned 64-bit range (a config's seed: up to 2^63 - 1).
uint64_t parse_seed(const std::string& flag, const std::string& v) {
  const std::string hint = "give a whole number from 0 to 18446744073709551615 after " + flag;
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(flag + " expects a non-negative integer, got '" + v + "'", hint);
  try {
    return std::stoull(v);
  } catch (const std::out_of_range&) {
    throw UsageError(flag + " " + v + " is out of range", hint);
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
      throw UsageError(flag + " " + v + " is out of range of a double", hint);
    } catch (const std::invalid_argument&) {
    }
  }
  throw UsageError(flag + " expects a number, got '" + v + "'", hint);
}

// The accepted forms of one --device entry.
const char kDeviceForms[] =
    "give cpu, cpu:N (N threads), gpu, gpu:N (GPU number N), auto, all, or a comma list of them "
    "such as cpu,gpu";

namespace {

// Refuses a device entry that is none of the accepted forms, naming the nearest ("cuda": gpu,
// "GPU:1": gpu:1). A bad number after the colon is parse_device's to tell.
void check_device_name(const std::string& d) {
  const size_t colon = d.find(':');
  const std::string name = d.substr(0, colon);
  const std::vector<std::string> known = colon == std::string::npos
                                             ? std::vector<std::string>{"cpu", "gpu", "auto", "all"}
                                             : std::vector<std::string>{"cpu", "gpu"};
  if (std::find(known.begin(), known.end(), name) != known.end()) return;
  std::string guess = closest_name(name, known);  // "GPU": gpu, "cuda": gpu
  if (!guess.empty() && colon != std::string::npos) guess += d.substr(colon);
  throw UsageError("unknown device '" + d + "'" + did_you_mean(guess), kDeviceForms);
}

}  // namespace

std::vector<std::string> parse_device_list(const std::string& v) {
  const std::vector<std::string> devices = split(v, ',');
  for (const std::string& d : devices)
    if (d.empty())
      throw UsageError(v.empty() ? "--device is empty" : "--device '" + v + "' has an empty entry",
                       kDeviceForms);
  for (const std::string& d : devices) check_device_name(d);
  return devices;
}

// The help that lists a command's flags.
std::string help_of(const std::string& command) {
  return command == "train" ? "trainer --help" : "trainer " + command + " --help";
}

}  // namespace tandem
