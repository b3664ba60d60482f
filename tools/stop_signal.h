// Ctrl-C and SIGTERM during training: the first asks the run to stop after its step; a second
// ends the process at once, as one does before training starts. Repeats within
// kRepeatWindowMs of the first count as that one (GNU timeout delivers its signal twice), and a
// checkpoint being written is finished before any quit.
#pragma once

namespace tandem {

inline constexpr long kRepeatWindowMs = 1000;

// Installs the SIGINT and SIGTERM handlers while alive; the previous ones come back after.
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // Training has started: from now on the first signal asks for a stop after the step (and a
  // checkpoint); until now it ends the process at once, with 128 + the signal.
  void arm();
  bool requested() const;
  int signal() const;        // SIGINT or SIGTERM; 0 when none came
  int exit_status() const;   // 128 + the signal, as shells report it: 130, 143
  const char* name() const;  // "SIGINT", "SIGTERM"
};

// While alive, a signal that would quit at once waits: the process quits when this ends (a
// checkpoint being written, which quitting midway would lose).
class QuitDeferral {
 public:
  QuitDeferral();
  ~QuitDeferral();
  QuitDeferral(const QuitDeferral&) = delete;
  QuitDeferral& operator=(const QuitDeferral&) = delete;
};

}  // namespace tandem
