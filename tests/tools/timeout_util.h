// Bounds on the time a test may wait: work that could hang if the code regressed (a read that
// waits on a FIFO for a writer) runs in a child process or under timeout(1), so that the test
// fails instead of stalling the suite.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "tests/tools/cli_util.h"

namespace tandem::test {

// The status timeout(1) exits with when the command ran out of time.
inline constexpr int kTimedOut = 124;

struct ChildResult {
  bool timed_out = false;
  int exit_code = -1;  // body's return value; -1 when the child died of a signal
};

// Runs body() in a forked child and returns its exit code; kills it after `seconds`. The child
// must not start threads (a fork keeps only the calling thread): file operations only. An
// exception that escapes body() exits with 101.
inline ChildResult run_in_child(double seconds, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 101;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  ChildResult r;
  if (pid < 0) return r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

// The trainer with `args`, killed after `seconds` (status kTimedOut then).
inline CliResult run_trainer_within(int seconds, const std::string& args) {
  return run_trainer_with("timeout -k 5 " + std::to_string(seconds), args);
}

}  // namespace tandem::test
