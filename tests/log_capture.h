// What a piece of code logs through spdlog's default logger, for the tests that check warnings.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace tandem::test {

// The log lines `fn` writes (the default logger restored after, an exception passed on).
template <typename Fn>
std::string log_of(Fn&& fn) {
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  try {
    fn();
  } catch (...) {
    spdlog::set_default_logger(previous);
    throw;
  }
  spdlog::set_default_logger(previous);
  return log.str();
}

}  // namespace tandem::test
