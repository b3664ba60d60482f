// Signal handlers that only set a flag (and, for a later repeat, exit): all a handler may safely
// do.
#include "tools/stop_signal.h"

#include <time.h>
#include <unistd.h>

#include <csignal>

namespace tandem {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_armed = 0;
volatile std::sig_atomic_t g_deferring = 0;   // a checkpoint is being written
volatile std::sig_atomic_t g_quit_after = 0;  // a repeat came while it was: 128 + its signal
// When the first signal came, in milliseconds of the monotonic clock.
volatile std::sig_atomic_t g_first_ms = 0;
struct sigaction g_old_int, g_old_term;

// Milliseconds of the monotonic clock, modulo what a sig_atomic_t holds (clock_gettime is
// async-signal-safe).
long now_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long>((t.tv_sec % 1000000) * 1000 + t.tv_nsec / 1000000);
}

void say(const char* text, size_t n) { [[maybe_unused]] ssize_t w = write(STDERR_FILENO, text, n); }

void on_signal(int sig) {
  if (!g_armed) _exit(128 + sig);  // before training there is nothing to save
  if (g_signal != 0) {
    // GNU timeout sends its signal to the process and then to its group, and a terminal's Ctrl-C
    // reaches every process of the foreground group: repeats this close to the first are that
    // one signal again.
    const long since = now_ms() - g_first_ms;
    if (since >= 0 && since < kRepeatWindowMs) return;
    // The user means it. A checkpoint being written is finished first: quitting mid-write
    // would lose it (the previous one stays, renamed files being whole).
    if (g_deferring) {
      g_quit_after = 128 + sig;
      static const char wait[] = "\nquitting once the checkpoint being written is complete\n";
      say(wait, sizeof wait - 1);
      return;
    }
    static const char quit[] = "\nstopped at once: no checkpoint of this step\n";
    say(quit, sizeof quit - 1);
    _exit(128 + sig);
  }
  g_signal = sig;
  g_first_ms = static_cast<std::sig_atomic_t>(now_ms());
  // Static: in read-only memory, not in a frame that an instrumented build allocates.
  static const char msg[] =
      "\nstopping after this step to write a checkpoint (again to quit now)\n";
  say(msg, sizeof msg - 1);
}

}  // namespace

StopOnSignal::StopOnSignal() {
  g_signal = 0;
  g_armed = 0;
  g_deferring = 0;
  g_quit_after = 0;
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

QuitDeferral::QuitDeferral() { g_deferring = 1; }

QuitDeferral::~QuitDeferral() {
  g_deferring = 0;
  if (const int status = g_quit_after; status != 0) {
    static const char quit[] = "stopped: the checkpoint is complete\n";
    say(quit, sizeof quit - 1);
    _exit(status);
  }
}

}  // namespace tandem
