// The one error family of tandem: every failure carries a one-sentence cause and a hint for the fix.
#pragma once

#include <stdexcept>
#include <string>

namespace tandem {

// Exit codes of the trainer, one per error kind, so scripts can tell failures apart.
enum class ExitCode : int {
  kOk = 0,
  kUsage = 2,         // bad command line
  kConfig = 3,        // malformed or invalid model/config file
  kData = 4,          // missing, corrupt or inconsistent data set
  kDevice = 5,        // device unusable: no GPU, driver, cuDNN, out of memory
  kNumerics = 6,      // NaN/Inf loss or gradients
  kCheckpoint = 7,    // checkpoint unreadable or mismatched
  kPartial = 8,       // a multi-device run where some device could not run
  kInternal = 70,     // a bug: an invariant of the engine did not hold
};

class Error : public std::runtime_error {
 public:
  Error(std::string cause, std::string hint = "", ExitCode code = ExitCode::kInternal)
      : std::runtime_error(cause), cause_(std::move(cause)), hint_(std::move(hint)), code_(code) {}
  const std::string& cause() const { return cause_; }
  const std::string& hint() const { return hint_; }
  ExitCode code() const { return code_; }

 private:
  std::string cause_;
  std::string hint_;
  ExitCode code_;
};

struct UsageError : Error {
  UsageError(std::string cause, std::string hint = "") : Error(std::move(cause), std::move(hint), ExitCode::kUsage) {}
};
struct ConfigError : Error {
  ConfigError(std::string cause, std::string hint = "") : Error(std::move(cause), std::move(hint), ExitCode::kConfig) {}
};
struct DataError : Error {
  DataError(std::string cause, std::string hint = "") : Error(std::move(cause), std::move(hint), ExitCode::kData) {}
};
struct DeviceError : Error {
  DeviceError(std::string cause, std::string hint = "") : Error(std::move(cause), std::move(hint), ExitCode::kDevice) {}
};
struct NumericsError : Error {
  NumericsError(std::string cause, std::string hint = "") : Error(std::move(cause), std::move(hint), ExitCode::kNumerics) {}
};
struct CheckpointError : Error {
  CheckpointError(std::string cause, std::string hint = "") : Error(std::move(cause), std::move(hint), ExitCode::kCheckpoint) {}
};

// Internal invariant check: a failure here is a bug in tandem, not in the user's input.
#define TANDEM_CHECK(cond, msg)                                                            \
  do {                                                                                     \
    if (!(cond))                                                                           \
      throw ::tandem::Error(std::string("internal error: ") + (msg) + " (" #cond ") at " + \
                            __FILE__ + ":" + std::to_string(__LINE__));                   \
  } while (0)

}  // namespace tandem
