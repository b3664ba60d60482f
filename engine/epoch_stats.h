// An epoch's figures: what the progress line, the metrics file, the plot and a checkpoint's
// history of the run carry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

struct EpochStats {
  std::string device;
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  // The test split's figures; has_test false: the run had no test split (their place in the
  // files stays empty).
  bool has_test = true;
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0;            // training time of the epoch (without evaluation)
  double images_per_second = 0;  // training throughput
  double learning_rate = 0;
  size_t peak_memory_bytes = 0;
  bool has_val = false;  // a validation split was evaluated (data.val_split)
  double val_loss = 0, val_accuracy = 0;
  int64_t skipped_steps = 0;  // steps not applied for being non-finite (on_nan: skip_step)
  // Loss scaling (fp16): the scale at the epoch's end and the steps whose gradients overflowed
  // (skipped, the scale halved); 0: a run without loss scaling.
  double loss_scale = 0;
  int64_t overflow_steps = 0;
};

// The figures of a logged step (--log-every N): the means over the N steps up to it.
struct LoggedStep {
  std::string device;
  uint64_t step = 0;  // 1-based, over the whole run
  double epoch = 0;   // its place in epochs: 2.5 is half-way through the third
  double loss = 0, accuracy = 0, learning_rate = 0, images_per_second = 0;
  // The mean global L2 norm of the gradients (before clipping), where the run computes it
  // (train.clip_grad_norm, on_nan: skip_step); < 0: not computed.
  double grad_norm = -1;
  double loss_scale = 0;  // loss scaling (fp16): the scale after the step; 0: none
};

}  // namespace tandem
