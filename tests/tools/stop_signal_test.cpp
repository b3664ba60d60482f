// The signal handlers: the first Ctrl-C asks for a stop (and says what happens next), a second one
// quits at once and says so. Each case runs in a child process, which the handlers may end.
#include "tools/stop_signal.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>

namespace tandem {
namespace {

struct Ended {
  int status = -1;  // exit status; -1: killed
  std::string err;  // what it wrote to stderr
};

// Runs `body` in a child process whose stderr is kept; the child exits 0 when `body` returns.
Ended in_child(const std::function<void()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    body();
    _exit(0);
  }
  close(fds[1]);
  Ended e;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    e.err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  e.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return e;
}

TEST(StopSignal, TheFirstCtrlCAsksForAStopAndSaysWhatComesNext) {
  const Ended e = in_child([] {
    StopOnSignal stop;
    stop.arm();
    raise(SIGINT);
    if (!stop.requested() || stop.exit_status() != 130) _exit(3);
  });
  EXPECT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(e.err, "\nstopping after this step to write a checkpoint (again to quit now)\n");
}

// Past the window in which a repeat is the same signal again.
void after_the_repeat_window() { usleep(static_cast<useconds_t>(kRepeatWindowMs * 1000 + 100000)); }

TEST(StopSignal, ASecondCtrlCQuitsAtOnceAndSaysSo) {
  const Ended e = in_child([] {
    StopOnSignal stop;
    stop.arm();
    raise(SIGINT);
    after_the_repeat_window();
    raise(SIGINT);
    _exit(3);  // not reached
  });
  EXPECT_EQ(e.status, 130) << e.err;
  EXPECT_NE(e.err.find("\nstopped at once: no checkpoint of this step\n"), std::string::npos)
      << e.err;
}

// GNU timeout sends SIGTERM to the process, then to its group: one timeout, two signals.
TEST(StopSignal, ARepeatWithinASecondIsTheSameSignalAgain) {
  const Ended e = in_child([] {
    StopOnSignal stop;
    stop.arm();
    raise(SIGTERM);
    raise(SIGTERM);
    if (!stop.requested() || stop.exit_status() != 143) _exit(3);
  });
  EXPECT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(e.err, "\nstopping after this step to write a checkpoint (again to quit now)\n");
}

TEST(StopSignal, ASecondSignalWhileACheckpointIsWrittenQuitsWhenItIsComplete) {
  const Ended e = in_child([] {
    StopOnSignal stop;
    stop.arm();
    raise(SIGINT);
    after_the_repeat_window();
    {
      QuitDeferral writing;
      raise(SIGINT);
      static const char done[] = "written\n";
      [[maybe_unused]] ssize_t n = write(STDERR_FILENO, done, sizeof done - 1);
    }
    _exit(3);  // not reached: the deferred quit ends the process
  });
  EXPECT_EQ(e.status, 130) << e.err;
  const size_t waiting = e.err.find("quitting once the checkpoint being written is complete\n");
  const size_t written = e.err.find("written\n", waiting);
  ASSERT_NE(waiting, std::string::npos) << e.err;
  ASSERT_NE(written, std::string::npos) << e.err;
  EXPECT_NE(e.err.find("stopped: the checkpoint is complete\n", written), std::string::npos)
      << e.err;
}

TEST(StopSignal, BeforeTrainingASignalEndsTheProcessQuietly) {
  const Ended e = in_child([] {
    StopOnSignal stop;  // not armed: nothing to save yet
    raise(SIGTERM);
    _exit(3);
  });
  EXPECT_EQ(e.status, 143) << e.err;
  EXPECT_EQ(e.err, "");
}

}  // namespace
}  // namespace tandem
