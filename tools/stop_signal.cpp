// Signal handlers that only set a flag (and, the second time, exit): all a handler may safely do.
#include "tools/stop_signal.h"

#include <unistd.h>

#include <csignal>

namespace tandem {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_armed = 0;
struct sigaction g_old_int, g_old_term;

void on_signal(int sig) {
  // The second one: the user means it. Before training there is nothing to save: as the default
  // action would (mpirun's SIGTERM after another process failed ends this one quietly too).
  if (g_signal != 0) {
    static const char quit[] = "\nstopped at once: no checkpoint of this step\n";
    [[maybe_unused]] ssize_t n = write(STDERR_FILENO, quit, sizeof quit - 1);
    _exit(128 + sig);
  }
  if (!g_armed) _exit(128 + sig);
  g_signal = sig;
  // Static: in read-only memory, not in a frame that an instrumented build allocates.
  static const char msg[] =
      "\nstopping after this step to write a checkpoint (again to quit now)\n";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
}

}  // namespace

StopOnSignal::StopOnSignal() {
  g_signal = 0;
  g_armed = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in progress carry on
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopOnSignal::~StopOnSignal() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

void StopOnSignal::arm() { g_armed = 1; }
bool StopOnSignal::requested() const { return g_signal != 0; }
int StopOnSignal::signal() const { return g_signal; }
int StopOnSignal::exit_status() const { return 128 + g_signal; }
const char* StopOnSignal::name() const { return g_signal == SIGTERM ? "SIGTERM" : "SIGINT"; }

}  // namespace tandem
