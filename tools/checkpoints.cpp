// A training run's checkpoints: file names, pruning, and what the user is told.
#include "tools/checkpoints.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/communicator.h"
#include "engine/epoch_metric.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/graph.h"
#include "engine/loss_scaling.h"
#include "engine/progress.h"
#include "engine/run_control.h"
#include "engine/text.h"
#include "tools/stop_signal.h"

namespace tandem {
namespace fs = std::filesystem;
namespace {

std::string file_text(const std::string& path) {
  return read_whole_file(path, kMaxConfigBytes, [&](const std::string& why) {
    throw ConfigError("config file '" + path + "' " + why, "give a YAML file");
  });
}

}  // namespace

RunCheckpoints::RunCheckpoints(const Config& config, const std::string& device_label,
                               bool per_device_folder, bool quiet,
                               std::vector<std::string> class_names, bool writes)
    : cfg_(config.train.checkpoint),
      device_(device_label),
      config_text_(file_text(config.file)),
      config_file_(fs::absolute(config.file).string()),
      precision_(config.precision),
      seed_(config.train.seed),
      mean_(config.data.mean),
      std_(config.data.std),
      batch_size_(config.train.batch_size),
      class_names_(std::move(class_names)),
      quiet_(quiet),
      writes_(writes),
      epochs_(config.train.epochs) {
  // Early stopping keeps the best epoch of the metric it watches, unless told another.
  if (cfg_.best.empty() && !cfg_.dir.empty() && config.train.early_stopping.enabled())
    cfg_.best = config.train.early_stopping.metric;
  fs::path dir = cfg_.dir.empty() ? fs::path("runs") / config.name : fs::path(cfg_.dir);
  if (per_device_folder) {
    std::string sub = device_label;
    std::replace(sub.begin(), sub.end(), ':', '-');
    std::replace(sub.begin(), sub.end(), ' ', '-');  // "cpu bf16", a run of a precision list
    dir /= sub;
  }
  dir_ = dir.string();
  // Created before training, so that a folder that cannot be made does not cost an epoch first.
  std::error_code ec;
  if (!cfg_.dir.empty()) fs::create_directories(dir_, ec);
  if (ec)
    throw CheckpointError(
        fmt::format("cannot create checkpoint folder '{}': {}", dir_, ec.message()),
        "pick a writable folder with --checkpoint-dir");
  if (!cfg_.dir.empty() && ::access(dir_.c_str(), W_OK | X_OK) != 0)
    throw CheckpointError(
        fmt::format("cannot write in checkpoint folder '{}': {}", dir_, std::strerror(errno)),
        "pick a writable folder with --checkpoint-dir");
}

void RunCheckpoints::epoch_done(const EpochStats& e) { history_.push_back(e); }

void RunCheckpoints::checkpoint(const Checkpoint& c) {
  QuitDeferral writing;
  if (writes_) write(c.step, c.at);
}

void RunCheckpoints::resumed(const CheckpointMeta& meta, const std::string& file) {
  for (const EpochStats& e : meta.history)
    if (e.epoch <= meta.epoch) history_.push_back(e);
  if (meta.best_epoch == 0 || meta.best_metric != cfg_.best) return;
  best_ = meta.best_value;
  best_epoch_ = meta.best_epoch;
  // Where the resumed run kept it: its folder, which may be another than this run's.
  std::error_code ec;
  const fs::path kept = fs::path(file).parent_path() / kBestCheckpoint;
  if (fs::is_regular_file(kept, ec)) best_path_ = kept.string();
}

bool RunCheckpoints::improved(const TrainPosition& at) {
  const EpochMetric* metric = find_epoch_metric(cfg_.best);
  if (!metric || at.batch != 0 || history_.empty() || history_.back().epoch != at.epoch)
    return false;
  const double v = metric->of(history_.back());
  if (!std::isfinite(v)) return false;
  if (best_epoch_ && (metric->lower_is_better ? v >= best_ : v <= best_)) return false;
  best_ = v;
  best_epoch_ = at.epoch;
  return true;
}

void RunCheckpoints::write(TrainStep& step, const TrainPosition& at) {
  const bool stopping = at.stopping;
  // The finished run's model: after its last epoch, or the one early stopping ends it after.
  const bool final = cfg_.final && !stopping && at.batch == 0 && (at.epoch >= epochs_ || at.last);
  const bool periodic =
      (!cfg_.dir.empty() && at.batch == 0 && (at.epoch % cfg_.every == 0 || at.last)) || final;
  const bool best = improved(at);
  if (!periodic && !stopping && !best) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec && stopping && cfg_.dir.empty()) {
    // The stop's checkpoint in the default folder, which the working folder cannot hold: the
    // system's temporary folder keeps the run rather than lose it.
    const std::string other = (fs::temp_directory_path() / "tandem-runs" / fs::path(dir_)).string();
    spdlog::warn("cannot create checkpoint folder '{}' ({}): writing to '{}' instead", dir_,
                 ec.message(), other);
    dir_ = other;
    ec.clear();
    fs::create_directories(dir_, ec);
  }
  if (ec)
    throw CheckpointError(
        fmt::format("cannot create checkpoint folder '{}': {}", dir_, ec.message()),
        "pick a writable folder with --checkpoint-dir");
  CheckpointMeta meta;
  meta.config_text = config_text_;
  meta.config_file = config_file_;
  meta.device = device_;
  meta.epoch = at.epoch;
  meta.batch = at.batch;
  meta.step = at.step;
  meta.seed = seed_;
  meta.normalize_mean = mean_;
  meta.normalize_std = std_;
  meta.class_names = class_names_;
  meta.batch_size = batch_size_;
  meta.processes = world().size();
  meta.precision = precision_;
  meta.loss_scale = at.loss_scale;
  meta.good_steps = at.good_steps;
  for (const EpochStats& e : history_)
    if (e.epoch <= at.epoch) meta.history.push_back(e);
  if (best_epoch_) {
    meta.best_metric = cfg_.best;
    meta.best_value = best_;
    meta.best_epoch = best_epoch_;
  }
  if (periodic || stopping) {
    // A stop mid-epoch is named for the epoch it was in and the batches it had done.
    const std::string name =
        at.batch == 0 ? fmt::format("epoch-{}.safetensors", at.epoch)
                      : fmt::format("epoch-{}-batch-{}.safetensors", at.epoch + 1, at.batch);
    last_path_ = (fs::path(dir_) / name).string();
    save_checkpoint(last_path_, step.graph(), step.optimizer(), meta);
    if (final)  // quiet or not: where the run's model is
      fmt::print("{}", fill_words(fmt::format("model: {} (eval, predict and export take "
                                              "--checkpoint {})",
                                              last_path_, dir_),
                                  0, 2, output_width()));
    else if (!quiet_ || stopping)
      fmt::print("checkpoint: {} (step {})\n", last_path_,
                 format_count(static_cast<double>(at.step)));
    if (!cfg_.dir.empty()) prune();
  }
  if (best) {
    const std::string path = (fs::path(dir_) / kBestCheckpoint).string();
    save_checkpoint(path, step.graph(), step.optimizer(), meta);
    best_path_ = path;
    if (!quiet_)
      fmt::print("new best {} {} at epoch {} -> {}\n", cfg_.best,
                 metric_text(*find_epoch_metric(cfg_.best), best_), at.epoch, path);
  }
}

void RunCheckpoints::warn_if_folder_in_use() const {
  if (cfg_.dir.empty()) return;
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".safetensors" &&
        (name.starts_with("epoch-") || name == kBestCheckpoint))
      found.push_back(name);
  }
  if (found.empty()) return;
  std::sort(found.begin(), found.end());
  const size_t shown = std::min<size_t>(found.size(), 3);
  spdlog::warn(
      "the checkpoint folder {} already holds {} checkpoint{} of another run ({}{}): this run "
      "writes its own there, replacing those of the same names; to continue that run instead, "
      "add --resume {}",
      dir_, found.size(), found.size() == 1 ? "" : "s",
      fmt::join(found.begin(), found.begin() + static_cast<long>(shown), ", "),
      found.size() > shown ? ", ..." : "", dir_);
}

std::string RunCheckpoints::early_stop_note() const {
  if (cfg_.dir.empty())
    return "  no checkpoint folder was set: --checkpoint-dir DIR keeps the best epoch and the last";
  std::string note = "  last epoch: " + last_path_;
  if (best_epoch_)
    note += fmt::format("; best: {} ({} {}, epoch {})",
                        best_path_.empty() ? "not kept (epoch " + std::to_string(best_epoch_) +
                                                 " was written by the run resumed, elsewhere)"
                                           : best_path_,
                        cfg_.best, metric_text(*find_epoch_metric(cfg_.best), best_), best_epoch_);
  return note;
}

void RunCheckpoints::prune() const { prune_checkpoints(dir_, cfg_.keep); }

void prune_checkpoints(const std::string& dir, int64_t keep) {
  if (keep <= 0) return;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("epoch-") && e.path().extension() == ".safetensors")
      files.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(files.begin(), files.end(), std::greater<>());  // newest first
  for (size_t i = static_cast<size_t>(keep); i < files.size(); ++i) fs::remove(files[i].second, ec);
}

void check_same_model(const std::string& file, const CheckpointMeta& meta, const Config& config,
                      const std::string& hint) {
  if (meta.config_text.empty()) return;
  std::vector<SummaryRow> trained, ours;
  try {
    Config stored =
        parse_config(meta.config_text, meta.config_file.empty() ? file : meta.config_file);
    trained = Graph(stored).summary();
  } catch (const ConfigError&) {
    return;
  }
  Config c = config;
  ours = Graph(c).summary();
  auto text = [](const SummaryRow& r) {
    return fmt::format("{} {} ({} parameters){}", r.name, r.output.str(),
                       format_count(static_cast<double>(r.params)),
                       r.inputs.empty() ? "" : fmt::format(" of {}", fmt::join(r.inputs, ", ")));
  };
  for (size_t i = 0; i < std::min(trained.size(), ours.size()); ++i)
    if (trained[i].name != ours[i].name || trained[i].output != ours[i].output ||
        trained[i].params != ours[i].params || trained[i].inputs != ours[i].inputs)
      throw CheckpointError(fmt::format("checkpoint '{}' holds another model: its layer {} is {}, "
                                        "this config's is {}",
                                        file, i + 1, text(trained[i]), text(ours[i])),
                            hint);
  if (trained.size() != ours.size())
    throw CheckpointError(fmt::format("checkpoint '{}' holds another model: it has {} layers, this "
                                      "config {}",
                                      file, trained.size(), ours.size()),
                          hint);
}

void check_position(const std::string& file, const CheckpointMeta& meta,
                    int64_t batches_per_epoch) {
  auto refuse = [&](const std::string& field, const std::string& why) {
    throw CheckpointError(
        fmt::format("checkpoint '{}' cannot be resumed: metadata '{}' {}", file, field, why),
        "the file is damaged or was written for another data set; resume an earlier checkpoint "
        "(an epoch-E file), or start a new run without --resume");
  };
  // A stop mid-epoch records the batches done of the epoch it was in: fewer than an epoch has.
  if (meta.batch >= batches_per_epoch)
    refuse("batch", fmt::format("is {}, but an epoch of this run has {} batch{}", meta.batch,
                                batches_per_epoch, batches_per_epoch == 1 ? "" : "es"));
  // Every batch is one step, a skipped one (on_nan: skip_step) included.
  const auto steps = static_cast<uint64_t>(meta.epoch) * static_cast<uint64_t>(batches_per_epoch) +
                     static_cast<uint64_t>(meta.batch);
  if (meta.step != steps)
    refuse("step", fmt::format("is {}, but {} epoch{} of {} batch{} and {} batch{} more make {}",
                               meta.step, meta.epoch, meta.epoch == 1 ? "" : "s", batches_per_epoch,
                               batches_per_epoch == 1 ? "" : "es", meta.batch,
                               meta.batch == 1 ? "" : "es", steps));
  // fp16's loss scale: an fp32 number (0: none), and fewer applied steps since it last changed
  // than the growth interval, at which it would have doubled and counted from 0 again.
  if (!(meta.loss_scale <= std::numeric_limits<float>::max()))
    refuse("loss_scale", fmt::format("is {}, beyond an fp32 number", meta.loss_scale));
  const GateParams rules = loss_scaling_gate();
  if (meta.good_steps < 0 || meta.good_steps >= rules.growth_interval)
    refuse("good_steps",
           fmt::format("is {}, outside 0 to {}", meta.good_steps, rules.growth_interval - 1));
}

CheckpointMeta resume_from(const std::string& path, const Config& config, TrainOptions& options,
                           bool quiet, int64_t batches_per_epoch) {
  const std::string file = find_checkpoint(path);
  const CheckpointMeta meta = read_checkpoint_meta(file);
  check_same_model(
      file, meta, config,
      meta.config_file.empty()
          ? "resume with the config it was trained with, or start a new run without --resume"
          : fmt::format("resume with the config it was trained with (--config {}), or "
                        "start a new run without --resume",
                        meta.config_file));
  // The seed fixes every epoch's order and every dropout mask: another one would not continue.
  if (meta.seed != config.train.seed)
    throw CheckpointError(
        fmt::format("checkpoint '{}' was trained with seed {}, this run has seed {}", file,
                    meta.seed, config.train.seed),
        fmt::format("pass --seed {} (or drop --seed)", meta.seed));
  // The batch size fixes which samples each step sees: another one would not continue either.
  if (meta.batch_size != 0 && meta.batch_size != config.train.batch_size)
    throw CheckpointError(
        fmt::format("checkpoint '{}' was trained with batch size {}, this run has batch size {}",
                    file, meta.batch_size, config.train.batch_size),
        fmt::format("resume with --batch-size {}, or start a new run without --resume",
                    meta.batch_size));
  // So does the number of data-parallel processes: each step takes a batch from every one.
  if (meta.processes != world().size()) {
    auto run_of = [](int64_t n) {
      return n == 1 ? std::string("one process")
                    : fmt::format("{} data-parallel processes (mpirun -np {})", n, n);
    };
    throw CheckpointError(
        fmt::format("checkpoint '{}' was trained by {}, this run is {}", file,
                    run_of(meta.processes), run_of(world().size())),
        meta.processes == 1
            ? std::string("resume it without mpirun, or start a new run")
            : fmt::format("resume it under mpirun -np {}, or start a new run", meta.processes));
  }
  if (meta.epoch >= config.train.epochs)
    throw CheckpointError(
        fmt::format("checkpoint '{}' has already trained {} epoch{} of the {} asked", file,
                    meta.epoch, meta.epoch == 1 ? "" : "s", config.train.epochs),
        fmt::format("--epochs is the total: pass --epochs {} or more to train further",
                    meta.epoch + 1));
  check_position(file, meta, batches_per_epoch);
  options.start = {meta.epoch, meta.batch, meta.step};
  options.start.loss_scale = meta.loss_scale;  // fp16's, so that it goes on where it stood
  options.start.good_steps = meta.good_steps;
  auto restore = std::make_shared<LambdaCallback>();
  restore->on_run_start = [file, meta](const RunStart& e) {
    // Another run may have written a new file under this name since it was checked.
    const CheckpointMeta now = restore_checkpoint(file, e.step.graph(), e.step.optimizer());
    if (now.epoch != meta.epoch || now.batch != meta.batch || now.step != meta.step ||
        now.seed != meta.seed)
      throw CheckpointError(
          fmt::format("checkpoint '{}' changed while the run started (it was at step {}, it is "
                      "at step {}): another run writes to its folder",
                      file, meta.step, now.step),
          "give each run its own --checkpoint-dir, then --resume again");
  };
  options.callbacks.push_back(restore);
  if (!quiet) {
    fmt::print("Resume {} (written on {}, {}): epoch {}, step {}{}\n", file, meta.device,
               meta.precision, meta.epoch + 1, meta.step,
               meta.batch > 0 ? fmt::format(" (this epoch's train figures will cover its batches "
                                            "from {} on)",
                                            meta.batch + 1)
                              : "");
    // Its fp32 weights continue in any precision; only the same one continues bit for bit.
    if (meta.precision != config.precision)
      fmt::print("       note: trained in {}, continuing in {}\n", meta.precision,
                 config.precision);
  }
  return meta;
}

}  // namespace tandem
