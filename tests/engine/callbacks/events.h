// Recorded events for the callbacks' tests: each callback is fed the events a run would raise,
// alone, and what it printed or decided is read back.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend_registry.h"
#include "engine/callback.h"
#include "engine/config.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"

namespace tandem::test {

// An epoch's figures with a validation loss (what the controls watch with a validation split).
inline EpochStats val_epoch(int64_t n, double val_loss) {
  EpochStats e;
  e.epoch = n;
  e.has_val = true;
  e.val_loss = val_loss;
  return e;
}

// The train section of a small config with a validation split.
inline TrainConfig controls(const std::string& train_yaml) {
  return parse_config(R"(name: t
input: {shape: [4]}
layers: [dense: {units: 2}]
data: {format: synthetic, classes: 2, val_split: 0.25}
train: )" + train_yaml + "\n",
                      "t.yaml")
      .train;
}

// An applied step of epoch 0 with `loss` over 8 samples, 6 of them right.
inline StepEnd step_event(uint64_t step, double loss, StepEnd::Outcome outcome = StepEnd::kApplied,
                          int64_t batches = 4) {
  const int64_t b = static_cast<int64_t>(step) % batches;
  return {static_cast<int64_t>(step) / batches,
          b,
          batches,
          step,
          0.1,
          loss,
          6.0,
          8,
          outcome,
          -1,
          0,
          loss,
          0.75,
          8 * (b + 1),
          1000.0};
}

// A run's start for a callback: a small model's training step on the CPU, `earlier` epochs.
struct RunStartOf {
  explicit RunStartOf(std::vector<EpochStats> before = {}, std::string reductions = "")
      : earlier(std::move(before)), sums(std::move(reductions)) {
    graph.allocate(*backend, 4, 0);
    step.emplace(graph, *loss, *backend, config.train.optimizer, 0);
  }
  RunStart event() { return {*step, earlier, 20, 4, sums, state}; }
  Config config = parse_config(
      "name: t\ninput: {shape: [4]}\nlayers: [dense: {units: 2}]\n"
      "data: {format: synthetic, classes: 2}\n",
      "t.yaml");
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  Graph graph{config};
  std::unique_ptr<Loss> loss = make_loss(config.loss);
  std::optional<TrainStep> step;
  std::vector<EpochStats> earlier;
  std::string sums;
  RunState state;
};

// A temporary file a callback prints into, read back whole.
class Captured {
 public:
  Captured() : file_(std::tmpfile()) {}
  ~Captured() { std::fclose(file_); }
  Captured(const Captured&) = delete;
  Captured& operator=(const Captured&) = delete;
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    std::rewind(file_);
    std::string s;
    for (int c = std::fgetc(file_); c != EOF; c = std::fgetc(file_)) s += static_cast<char>(c);
    return s;
  }

 private:
  std::FILE* file_;
};

}  // namespace tandem::test
