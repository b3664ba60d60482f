// A training run's checkpoints: every few epochs into a folder (pruned), resuming, and Ctrl-C.
#pragma once

#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/trainer.h"

namespace tandem {

// Writes DIR/epoch-E.safetensors after every `every` epochs and keeps the newest `keep`, and
// DIR/best.safetensors when the epoch's `best` metric improved (never pruned); on a
// stop (Ctrl-C) writes where the run stands, and after the run's last epoch its model (unless
// train.checkpoint.final is false), into DIR or runs/<config name>/ when no DIR is set.
// In a run over several devices each device writes to its own sub-folder (DIR/cpu-2, DIR/gpu).
// As a run's callback it takes every epoch's figures and writes at every checkpoint event; in a
// data-parallel run only the process that `writes` (rank 0) writes files.
class RunCheckpoints : public Callback {
 public:
  RunCheckpoints(const Config& config, const std::string& device_label, bool per_device_folder,
                 bool quiet, std::vector<std::string> class_names, bool writes = true);
  // Writes what is due at `at` (at.stopping: the run ends here, a signal).
  void write(TrainStep& step, const TrainPosition& at);
  // The figures that choose DIR/best.safetensors (train.checkpoint.best), and that the
  // checkpoints carry as the run's history.
  void epoch_done(const EpochStats& e);
  void epoch_end(const EpochEnd& e) override { epoch_done(e.stats); }
  // A second Ctrl-C during the write waits for the checkpoint to be whole.
  void checkpoint(const Checkpoint& c) override;
  // --resume: the epochs before the resume, and the best of them (same metric only), from the
  // checkpoint resumed (`file`), whose folder holds that best epoch's file.
  void resumed(const CheckpointMeta& meta, const std::string& file);
  // Every epoch of the run so far, those before a resume included.
  const std::vector<EpochStats>& history() const { return history_; }
  const std::string& last_path() const { return last_path_; }
  // A new run (no --resume) whose checkpoint folder holds another run's checkpoints: warns that
  // this run's replace those of the same names, and names the --resume that continues that run.
  void warn_if_folder_in_use() const;
  // After early stopping: where its best and last epochs are, or how to keep them.
  std::string early_stop_note() const;
  const std::string& dir() const { return dir_; }  // where this run's checkpoints go

 private:
  bool improved(const TrainPosition& at);  // records the epoch's metric when it is the best yet
  void prune() const;
  CheckpointConfig cfg_;
  std::string device_, dir_, config_text_, config_file_;
  std::string precision_;  // the run's, recorded in each checkpoint
  uint64_t seed_;
  std::vector<float> mean_, std_;  // data.normalize as trained
  int64_t batch_size_;
  std::vector<std::string> class_names_;
  bool quiet_, writes_;
  std::string last_path_;
  std::vector<EpochStats> history_;
  double best_ = 0;
  int64_t best_epoch_ = 0;  // 0: none yet
  std::string best_path_;   // where best_epoch_'s checkpoint is; empty: not kept
  int64_t epochs_;          // the run's, so that its last epoch's model is written
};

// Removes all but the newest `keep` epoch-*.safetensors files of a folder (0: keeps all).
void prune_checkpoints(const std::string& dir, int64_t keep);

// Throws CheckpointError with `hint` when the checkpoint's stored config builds another model than
// `config` (layers, output shapes, parameter counts), naming the first layer that differs, so that
// another model is the error a user sees rather than a seed or batch size that also differs.
// Checkpoints without a stored config, or one this version cannot read, pass: restoring them still
// checks every tensor's name and shape.
void check_same_model(const std::string& file, const CheckpointMeta& meta, const Config& config,
                      const std::string& hint);

// Throws CheckpointError naming the metadata field when the position a checkpoint records (batch,
// step) cannot belong to a run of `batches_per_epoch` batches an epoch (each process's).
void check_position(const std::string& file, const CheckpointMeta& meta, int64_t batches_per_epoch);

// --resume PATH: checks the checkpoint (PATH, or the newest in folder PATH) against the run of
// `batches_per_epoch` batches an epoch (each process's), every field of its metadata before any
// is used, sets where the run starts and the restore of its weights and optimizer state (which
// must find the position it was checked with); says so unless quiet. Returns its metadata.
CheckpointMeta resume_from(const std::string& path, const Config& config, TrainOptions& options,
                           bool quiet, int64_t batches_per_epoch);

}  // namespace tandem
