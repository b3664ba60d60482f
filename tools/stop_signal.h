// Ctrl-C and SIGTERM during training: the first asks the run to stop after its step; a second
// ends the process at once, as one does before training starts.
#pragma once

namespace tandem {

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

}  // namespace tandem
