// trainer (train): one config on each device of a list in turn, from the same initial weights,
// with the start-up summary, the progress, the outputs the flags ask for, and the side-by-side
// table at the end.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "datasets/dataset.h"
#include "datasets/split.h"
#include "engine/batch_source.h"
#include "engine/callbacks/metrics_file.h"
#include "engine/communicator.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/graph.h"
#include "engine/init_weights.h"
#include "engine/json_text.h"
#include "engine/layer_registry.h"
#include "engine/parity.h"
#include "engine/precision.h"
#include "engine/progress.h"
#include "engine/report.h"
#include "engine/text.h"
#include "engine/trainer.h"
#include "engine/user_message.h"
#include "tools/app.h"
#include "tools/checkpoints.h"
#include "tools/plot.h"
#include "tools/runner.h"
#include "tools/stop_signal.h"
#include "tools/tensorboard.h"
#include "tools/training_plot.h"

namespace tandem {

std::string model_table(const Graph& g) {
  std::vector<Row> rows;
  for (const SummaryRow& r : g.summary()) {
    std::string layer = r.named ? r.name + " (" + r.type + ")" : r.name;
    if (r.frozen) layer += ", frozen";
    if (r.lr_mult != 1) layer += fmt::format(", lr x{:g}", r.lr_mult);
    rows.push_back(
        {std::to_string(r.index), layer, r.output.str(), format_count(r.params), si(r.flops)});
    if (g.branches()) rows.back().push_back(fmt::format("{}", fmt::join(r.inputs, ", ")));
  }
  rows.push_back({"", "total", "", format_count(g.parameter_count()), si(g.forward_flops())});
  if (!g.branches()) return format_table({"#", "layer", "output", "params", "FLOPs/sample"}, rows);
  rows.back().push_back("");
  return format_table({"#", "layer", "output", "params", "FLOPs/sample", "inputs"}, rows);
}

// "Params 431,080 trainable, 0 non-trainable; 1.64 MiB (fp32)", under the model table; with
// frozen layers, their parameters' count after the trainable ones' and a line on what freezing
// does.
std::string parameter_line(const Graph& g) {
  int64_t trainable = 0, frozen = 0, fixed = 0;
  std::vector<std::string> frozen_norms;
  for (const SummaryRow& r : g.summary()) {
    (r.frozen ? frozen : trainable) += r.params;
    fixed += r.buffers;
    if (r.frozen && r.buffers > 0) frozen_norms.push_back(r.name);
  }
  const double mib = static_cast<double>(trainable + frozen + fixed) * sizeof(float) / (1 << 20);
  std::string out = fmt::format(
      "Params {} trainable, {}{} non-trainable{}; {:.{}f} MiB (fp32)\n", format_count(trainable),
      frozen ? format_count(frozen) + " frozen, " : "", format_count(fixed),
      fixed ? " (batch normalization's running statistics)" : "", mib, mib < 0.1 ? 4 : 2);
  if (frozen)
    out += fmt::format(
        "       frozen layers keep their weights: no weight gradients, no optimizer state{}\n",
        frozen_norms.empty()
            ? ""
            : fmt::format("; frozen batch normalization ({}) normalizes with its running "
                          "statistics in training too, and keeps them",
                          fmt::join(frozen_norms, ", ")));
  return out;
}

namespace {

// "bf16 (16-bit activations, fp32 weights and optimizer)".
std::string precision_text(const std::string& p) {
  if (p == "bf16" || p == "fp16")
    return p + " (mixed: 16-bit activations and products, fp32 weights, optimizer and loss)";
  return p;
}

std::string optimizer_text(const OptimizerConfig& o) {
  std::string s = fmt::format("{} lr {:g}", o.type, o.lr);
  if (o.type == "sgd" && o.momentum > 0)
    s += fmt::format(" momentum {:g}{}", o.momentum, o.nesterov ? " (nesterov)" : "");
  if (o.weight_decay > 0) s += fmt::format(" weight decay {:g}", o.weight_decay);
  for (const auto& [name, factor] : o.lr_multipliers) s += fmt::format(" ({} x{:g})", name, factor);
  return s;
}

std::string schedule_text(const ScheduleConfig& s) {
  std::string t = s.type;
  if (s.type == "step") t += fmt::format(" (x{:g} every {} epochs)", s.gamma, s.step);
  if (s.type == "multistep") {
    t += fmt::format(" (x{:g} at epochs", s.gamma);
    for (auto m : s.milestones) t += " " + std::to_string(m);
    t += ")";
  }
  if (s.type == "cosine") t += fmt::format(" (to {:g})", s.min_lr);
  if (s.type == "plateau")
    t += fmt::format(" (x{:g} after {} epoch{} without {} improving)", s.factor, s.patience,
                     s.patience == 1 ? "" : "s", s.metric);
  if (s.warmup_epochs) t += fmt::format(", {} warm-up epochs", s.warmup_epochs);
  return t;
}

// The run's early stopping and gradient clipping, a line each under the Run line.
std::string controls_text(const TrainConfig& t) {
  std::string out;
  if (t.early_stopping.enabled())
    out += fmt::format(
        "       early stopping: after {} epoch{} without {} improving by more "
        "than {:g}\n",
        t.early_stopping.patience, t.early_stopping.patience == 1 ? "" : "s",
        t.early_stopping.metric, t.early_stopping.min_delta);
  if (t.clip_grad_norm > 0)
    out += fmt::format("       gradients clipped to a global L2 norm of {:g}\n", t.clip_grad_norm);
  return out;
}

struct DeviceRun {
  DeviceSpec device;
  std::string reason;  // why it did not run to the end; empty: it did
  TrainResult result;
  bool ran() const { return reason.empty(); }
};

double training_seconds(const TrainResult& t) {  // the epochs this run trained
  double s = 0;
  for (const auto& e : t.epochs) s += e.seconds;
  return s;
}

double mean_epoch_seconds(const TrainResult& t) {
  return t.epochs.empty() ? 0 : training_seconds(t) / static_cast<double>(t.epochs.size());
}

// Over every epoch but the run's first step (primitive creation, algorithm search), so that a
// short run compares the devices' steady speeds; all of it when that step was all there was.
double images_per_second(const TrainResult& t) {
  double images = 0, seconds = 0;
  for (const auto& e : t.epochs) images += e.images_per_second * e.seconds, seconds += e.seconds;
  const double rest = seconds - t.first_step_seconds;
  if (images > static_cast<double>(t.first_step_samples) && rest > 0)
    return (images - static_cast<double>(t.first_step_samples)) / rest;
  return seconds > 0 ? images / seconds : 0;
}

size_t peak_memory(const TrainResult& t) {
  size_t m = 0;
  for (const auto& e : t.epochs) m = std::max(m, e.peak_memory_bytes);
  return m;
}

// Two tables that fit 80 columns: the speeds, then the results; the notes filled to the width.
void print_side_by_side(const std::vector<DeviceRun>& runs) {
  const DeviceRun* ref = nullptr;
  for (const DeviceRun& r : runs)
    if (r.ran()) {
      ref = &r;
      break;
    }
  // A validation split (data.val_split) adds its loss and accuracy after the test columns.
  bool val = false;
  for (const DeviceRun& r : runs) val = val || (r.ran() && r.result.epochs.back().has_val);
  std::vector<Row> speeds, results;
  std::vector<std::string> notes;
  for (const DeviceRun& r : runs) {
    if (!r.ran()) {
      speeds.push_back({r.device.label, "-", "-", "-", "-", "not run"});
      results.push_back({r.device.label, "-", "-", "-", "-", "-"});
      if (val) results.back().insert(results.back().end(), {"-", "-"});
      notes.push_back(r.device.label + ": not run: " + r.reason);
      continue;
    }
    const EpochStats& last = r.result.epochs.back();
    std::string speedup = "1.00x", parity = "reference";
    if (&r != ref) {
      speedup = fmt::format(
          "{:.2f}x", images_per_second(r.result) / std::max(1e-9, images_per_second(ref->result)));
      // Runs of a 16-bit precision agree to its rounding, not to fp32's.
      const double tolerance = std::max(parity_tolerance(parse_precision(ref->device.precision)),
                                        parity_tolerance(parse_precision(r.device.precision)));
      // fp16's overflowed steps applied no update: left out of the step-by-step comparison.
      std::vector<int64_t> overflowed = ref->result.overflowed_at;
      overflowed.insert(overflowed.end(), r.result.overflowed_at.begin(),
                        r.result.overflowed_at.end());
      Parity p = compare_runs(ref->result.step_losses, r.result.step_losses,
                              ref->result.epochs.back().test_accuracy, last.test_accuracy,
                              tolerance, 20, overflowed);
      parity = p.agree ? "agree" : "DIFFER";
      notes.push_back(fmt::format("{} vs {}: {}", r.device.label, ref->device.label, p.verdict()));
    }
    speeds.push_back({r.device.label, fmt::format("{:.2f}", mean_epoch_seconds(r.result)),
                      format_count(images_per_second(r.result)),
                      format_bytes(peak_memory(r.result)), speedup, parity});
    results.push_back({r.device.label, std::to_string(last.epoch), format_loss(last.train_loss),
                       fmt::format("{:.2f}%", 100 * last.train_accuracy),
                       format_loss(last.test_loss),
                       fmt::format("{:.2f}%", 100 * last.test_accuracy)});
    if (val)
      results.back().insert(results.back().end(),
                            {last.has_val ? format_loss(last.val_loss) : "-",
                             last.has_val ? fmt::format("{:.2f}%", 100 * last.val_accuracy) : "-"});
  }
  Row result_header{"device", "epochs", "train loss", "train acc", "test loss", "test acc"};
  if (val) result_header.insert(result_header.end(), {"val loss", "val acc"});
  fmt::print(
      "\nSide by side (speedup and parity against {}):\n{}\n{}",
      ref ? ref->device.label : "the first device",
      format_table({"device", "s/epoch", "images/s", "peak mem", "speedup", "parity"}, speeds),
      format_table(result_header, results));
  std::vector<std::string> first_steps;
  for (const DeviceRun& r : runs)
    if (r.ran() && r.result.first_step_samples)
      first_steps.push_back(
          fmt::format("{} {:.0f} ms", r.device.label, 1e3 * r.result.first_step_seconds));
  if (!first_steps.empty())
    notes.push_back(
        fmt::format("images/s and speedup leave out each device's first step ({}: "
                    "primitive creation, algorithm search); s/epoch (training only) includes it",
                    fmt::join(first_steps, ", ")));
  if (const std::string load = load_note(load_average(), allowed_cores()); !load.empty())
    notes.push_back(load);
  const size_t width = output_width();
  for (const std::string& n : notes) fmt::print("  {}", fill_words(n, 2, 4, width));
}

void plot_training(const TrainingPlot& plot) {
  plot.draw();
  fmt::print("plot written to {}\n", plot.path());
}

// Batch normalization of a flat input cannot train on a batch of one sample: said before training,
// not at the end of the first epoch.
void check_training_batches(const Config& c, const Graph& model, int64_t train_samples) {
  const int64_t need = model.min_training_batch(), b = c.train.batch_size;
  if (c.train.drop_last && b > train_samples)
    throw ConfigError(
        fmt::format("{}: train.batch_size {} is more than the {} train samples, and "
                    "train.drop_last: true drops that one short batch: no epoch "
                    "would train",
                    c.file, b, format_count(train_samples)),
        fmt::format("use --batch-size {} or less, or train.drop_last: false", train_samples));
  if (need <= 1) return;
  if (b < need)
    throw ConfigError(fmt::format("{}: train.batch_size {}: the model's batch normalization of a "
                                  "flat input needs at least {} samples a batch",
                                  c.file, b, need),
                      fmt::format("set train.batch_size (or --batch-size) to {} or more", need));
  const int64_t last = train_samples % b;
  if (!c.train.drop_last && last > 0 && last < need)
    throw ConfigError(
        fmt::format("{}: the last batch of each epoch would hold {} sample ({} train samples in "
                    "batches of {}); the model's batch normalization of a flat input needs at "
                    "least {}",
                    c.file, last, train_samples, b, need),
        "set train.drop_last: true, or a batch size that leaves more samples over");
}

// `word` as a POSIX shell reads it back: as it is when it holds no character the shell treats
// specially, else in single quotes.
std::string shell_quoted(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789_@%+=:,./-") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command line that continues a stopped run: the user's own, every flag kept, --device the
// stopped device (one of a list, or what auto chose), and --resume its checkpoint (in place of
// the one it may have resumed from). checkpoint_dir: non-empty, the --checkpoint-dir to give (a
// device of a list wrote to its own subfolder, where a single device writes to the folder).
std::string continue_command(const RunRequest& r, const Config& config, const DeviceSpec& device,
                             const std::string& checkpoint, const std::string& checkpoint_dir) {
  std::vector<std::string> words;
  if (r.command_line.empty()) {  // in-process: the flags are not known
    words = {"trainer", "--config", config.file};
  } else {
    const std::vector<std::string>& a = r.command_line;
    words.push_back(a[0]);
    for (size_t i = 1; i < a.size(); ++i) {
      if ((a[i] == "--resume" || (a[i] == "--checkpoint-dir" && !checkpoint_dir.empty())) &&
          i + 1 < a.size()) {
        ++i;
        continue;
      }
      words.push_back(a[i]);
      if (a[i] == "--device" && i + 1 < a.size()) {
        words.push_back(device.label.substr(0, device.label.find(' ')));  // not "cpu bf16"
        ++i;
      }
      if (a[i] == "--precision" && i + 1 < a.size()) {  // the stopped run's, of a list
        words.push_back(device.precision.empty() ? a[i + 1] : device.precision);
        ++i;
      }
    }
  }
  if (!checkpoint_dir.empty()) words.insert(words.end(), {"--checkpoint-dir", checkpoint_dir});
  words.insert(words.end(), {"--resume", checkpoint});
  std::string out = world().size() > 1 ? fmt::format("mpirun -np {}", world().size()) : "";
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + shell_quoted(w);
  return out;
}

// train.init's match with the model, unless the run resumes (its checkpoint holds the weights).
std::optional<InitPlan> plan_start(const Config& c, const Graph& model, const RunRequest& r) {
  if (c.train.init.empty() || !r.resume.empty()) return std::nullopt;
  std::string text;  // to tell a checkpoint of this very config
  try {
    text = read_whole_file(c.file, kMaxConfigBytes, [](const std::string&) {});
  } catch (const Error&) {
  }
  return plan_init(c, model, text);
}

// What the runs of one command share: the request, its config, devices and data, the process
// group, and the outputs written across the runs.
struct TrainCommand {
  explicit TrainCommand(const RunRequest& request)
      : r(request),
        config(load_config_with_overrides(r)),
        devices(parse_devices(r)),
        model(config),  // checks the model before any data is read
        init(plan_start(config, model, r)),
        data(load_data(config.data, config.input, static_cast<int>(model.classes()))),
        val(hold_out(data.train, config.data.val_split, config.train.seed)),
        normalise(apply_normalize_auto(config.data, data.train)),
        comm(world()),
        many(devices.size() > 1),
        lead(comm.rank() == 0) {
    check_training_batches(config, model, data.train.size());
    if (many && !r.resume.empty())
      throw UsageError("--resume continues one run, on one device", "pass a single --device");
  }
  BackendOptions backend_options_of(const DeviceSpec& device) const {
    BackendOptions o = backend_options(config, device);
    o.batch_size = config.train.batch_size;  // bench's rows differ: it names none
    return o;
  }
  const RunRequest& r;
  Config config;
  const std::vector<DeviceSpec> devices;
  Graph model;
  std::optional<InitPlan> init;  // train.init, checked before any data is read
  DataSplits data;
  const Dataset val;
  const std::string normalise;
  Communicator& comm;
  const bool many;
  const bool lead;    // the process that writes files (and prints)
  StopOnSignal stop;  // armed when training starts: from then on Ctrl-C saves a checkpoint
  std::shared_ptr<TrainingPlot> plot;
  std::shared_ptr<MetricsWriter> metrics;
};

// The start-up summary: the model, the data, the run's settings.
void print_start(const TrainCommand& t) {
  std::string names;
  for (const DeviceSpec& d : t.devices) names += (names.empty() ? "" : ", ") + d.label;
  fmt::print("tandem {} - {} ({}) on {}\n\n", TANDEM_VERSION, t.config.name, t.config.file, names);
  fmt::print("Model {}\n{}{}{}\n", t.config.name, model_table(t.model), parameter_line(t.model),
             t.init ? init_report(*t.init) : "");
  fmt::print("Data   {}: {} train / {} test samples of {}, {} classes\n", t.config.data.format,
             format_count(t.data.train.size()), format_count(t.data.test.size()),
             t.data.train.sample_shape.str(), t.model.classes());
  fmt::print("{}", cache_report(t.data));
  if (t.config.data.augment.any())
    fmt::print("       augmented (train): {}{}\n",
               t.config.data.augment.crop_padding
                   ? fmt::format("random crop, padding {}", t.config.data.augment.crop_padding)
                   : "",
               t.config.data.augment.flip
                   ? (t.config.data.augment.crop_padding ? ", horizontal flip" : "horizontal flip")
                   : "");
  if (t.config.data.test_split > 0)
    fmt::print(
        "Test   {} images held out of {}, a share of each class (data.test_split {:g}, "
        "drawn from data.seed {})\n",
        format_count(t.data.test.size()), t.config.data.train_path, t.config.data.test_split,
        t.config.data.seed);
  if (t.val.size() > 0)
    fmt::print("Validation: {} of {} train samples held out (data.val_split {:g})\n",
               format_count(t.val.size()), format_count(t.val.size() + t.data.train.size()),
               t.config.data.val_split);
  fmt::print("{}{}", t.normalise, class_mapping(t.data.train));
  // Broken between its parts on a terminal narrower than it.
  fmt::print("{}", wrap_to_terminal(
                       fmt::format("Run    {} epoch{}", format_count(t.config.train.epochs),
                                   t.config.train.epochs == 1 ? "" : "s"),
                       {"batch " + format_count(t.config.train.batch_size),
                        optimizer_text(t.config.train.optimizer),
                        "schedule " + schedule_text(t.config.train.schedule),
                        "loss " + t.config.loss +
                            (t.config.label_smoothing > 0
                                 ? fmt::format(" (label smoothing {:g})", t.config.label_smoothing)
                                 : ""),
                        fmt::format("seed {}", t.config.train.seed),
                        "precision " + (t.r.precisions.size() > 1
                                            ? fmt::format("{}", fmt::join(t.r.precisions, ", "))
                                            : precision_text(t.config.precision))},
                       ", ", 7));
  fmt::print("{}", controls_text(t.config.train));
  if (t.config.train.batch_size > t.data.train.size())
    fmt::print(
        "       note: batch {} is more than the {} train samples: each epoch is one step "
        "of {}\n",
        t.config.train.batch_size, format_count(t.data.train.size()),
        format_count(t.data.train.size()));
  if (t.comm.size() > 1)
    fmt::print(
        "       data-parallel over {} processes ({}, {} on this host): batch {} each, {} "
        "samples a step, gradients averaged before every update\n",
        t.comm.size(), t.comm.library(), t.comm.local_size(), t.config.train.batch_size,
        t.config.train.batch_size * t.comm.size());
  if (const int share = host_cores() / t.comm.local_size();
      t.comm.size() > 1 && allowed_cores() < share)
    fmt::print(
        "       note: mpirun bound each process to {} of the {} cores it could use; "
        "--bind-to none (or --map-by slot:PE={}) gives each its share\n",
        allowed_cores(), share, share);
  std::fflush(stdout);
}

// "Input  batches cut ahead by 1 background thread (data.workers: auto, ...)".
void print_input(const Config& c, int workers) {
  fmt::print(
      "{}",
      wrap_to_terminal(
          fmt::format("Input  batches cut {}", workers
                                                   ? fmt::format("ahead by {} background thread{}",
                                                                 workers, workers == 1 ? "" : "s")
                                                   : "in the training thread"),
          {fmt::format("(data.workers: {})",
                       c.data.workers < 0 ? "auto, the cores the device leaves free" : "set")},
          " ", 7));
}

// A run stopped by a signal: where, and the command that continues it. Returns the exit status.
int report_stop(TrainCommand& t, size_t k, const DeviceRun& run, uint64_t start_step,
                const RunCheckpoints& checkpoints) {
  // In a data-parallel run the signal may have reached another process only (mpirun passes a
  // SIGTERM on to each); the run stopped all the same.
  const bool here = t.stop.requested();
  fmt::print("{}stopped by {} at step {}; continue with: {}\n",
             t.many ? "the " + run.device.label + " run: " : "",
             here ? t.stop.name() : "a signal to another process of the run",
             format_count(static_cast<double>(run.result.step_losses.size() +
                                              run.result.skipped_steps + start_step)),
             continue_command(t.r, t.config, run.device, checkpoints.last_path(),
                              t.many ? checkpoints.dir() : ""));
  if (k + 1 < t.devices.size()) {
    std::vector<std::string> rest;
    for (size_t j = k + 1; j < t.devices.size(); ++j) rest.push_back(t.devices[j].label);
    fmt::print("not run: {} (stopped before {})\n", fmt::join(rest, ", "),
               rest.size() == 1 ? "it" : "them");
  }
  if (t.plot) plot_training(*t.plot);
  return here ? t.stop.exit_status() : 128 + SIGTERM;
}

// A finished run's line: its test figures, time and speed, and a note where it learnt nothing.
void report_result(const TrainCommand& t, const DeviceRun& run, double lr) {
  const EpochStats& last = run.result.epochs.back();
  const size_t width = output_width();
  fmt::print("{}", fill_words(fmt::format("{}: test accuracy {} (loss {}) after {} epoch{}, {} "
                                          "training, {} img/s",
                                          run.device.label, format_accuracy(last.test_accuracy),
                                          format_loss(last.test_loss), last.epoch,
                                          last.epoch == 1 ? "" : "s",
                                          format_duration(training_seconds(run.result)),
                                          format_count(images_per_second(run.result))),
                              0, 2, width));
  // A run that ends where guessing would is a run to hear about, not a success.
  const double chance = 1.0 / static_cast<double>(std::max<int64_t>(2, t.model.classes()));
  if (t.data.test.size() == 0 || last.test_accuracy >= 1.2 * chance + 0.01) return;
  // Which way the rate is off, where it is far from the usual 1e-5 to 1.
  const std::string rate = lr < 1e-5 ? fmt::format("a learning rate too low (this run's: {:g})", lr)
                           : lr > 1.0
                               ? fmt::format("a learning rate too high (this run's: {:g})", lr)
                               : fmt::format(
                                     "a learning rate too high (this run's: {:g}) "
                                     "or too low",
                                     lr);
  fmt::print("  {}", fill_words(fmt::format("note: {:.2f}% is about chance for {} classes "
                                            "({:.0f}%): the model has not learnt; the usual "
                                            "causes are {}, too few epochs, or labels that "
                                            "do not match their images",
                                            100 * last.test_accuracy, t.model.classes(),
                                            100 * chance, rate),
                                2, 4, width));
}

// Device k's run of the list on `backend`, with the outputs the flags ask for. Returns the exit
// status where a signal stopped it (the command ends there).
std::optional<int> train_on(TrainCommand& t, size_t k, DeviceRun& run,
                            std::unique_ptr<Backend> backend) {
  const RunRequest& r = t.r;
  Config c = t.config;
  if (!run.device.precision.empty()) c.precision = run.device.precision;
  if (!r.quiet)
    fmt::print("\n{}\n", format_pairs("Device", run_device_rows(*backend, c.precision)));
  std::fflush(stdout);
  Graph graph(c);
  std::unique_ptr<Loss> loss = make_loss(c.loss, c.label_smoothing);
  // No batch holds more samples than the largest split: a batch beyond it takes no memory.
  const int64_t largest = std::max({t.data.train.size(), t.data.test.size(), t.val.size()});
  graph.allocate(*backend, std::min(c.train.batch_size, std::max<int64_t>(1, largest)),
                 c.train.seed);
  if (t.init) load_init(*t.init, graph);
  Batcher train_src(t.data.train, c.train.batch_size, c.train.shuffle, c.train.seed, c.data.mean,
                    c.data.std, c.train.drop_last);
  train_src.set_augment(c.data.augment);
  Batcher test_src(t.data.test, c.train.batch_size, false, c.train.seed, c.data.mean, c.data.std);
  Batcher val_src(t.val, c.train.batch_size, false, c.train.seed, c.data.mean, c.data.std);
  TrainOptions options;
  options.val = &val_src;
  options.device_label = run.device.label;
  options.progress = !r.quiet;
  options.verbose = r.verbose;
  options.data_workers = data_workers(c, run.device);
  options.comm = &t.comm;
  options.log_every = r.log_every;
  // The devices after this one train as many epochs: the run's ETA counts them at this pace.
  options.later_epochs = static_cast<int64_t>(t.devices.size() - k - 1) * c.train.epochs;
  if (!r.quiet) print_input(c, options.data_workers);
  auto checkpoints = std::make_shared<RunCheckpoints>(c, run.device.label, t.many, r.quiet,
                                                      t.data.train.class_names, t.lead);
  if (r.resume.empty() && t.lead) checkpoints->warn_if_folder_in_use();
  std::shared_ptr<TensorBoardWriter> board;
  if (!r.tensorboard.empty() && t.lead)
    board = std::make_shared<TensorBoardWriter>(r.tensorboard, run.device.label);
  if (!r.resume.empty()) {
    const int64_t batches =
        ShardedSource(train_src, t.comm.rank(), t.comm.size()).batches_per_epoch();
    const CheckpointMeta meta = resume_from(r.resume, c, options, r.quiet, batches);
    checkpoints->resumed(meta, find_checkpoint(r.resume));
    options.earlier = checkpoints->history();
    if (t.metrics) t.metrics->continue_after(options.earlier);
    // A stop inside an epoch resumes part of the way into it.
    if (t.plot)
      t.plot->resumed(
          options.earlier,
          batches > 0 ? static_cast<double>(meta.batch) / static_cast<double>(batches) : 0.0);
  }
  const std::shared_ptr<Callback> outputs[] = {t.metrics, board, checkpoints, t.plot};
  for (const std::shared_ptr<Callback>& output : outputs)
    if (output) options.callbacks.push_back(output);
  options.stop = [&] { return t.stop.requested(); };
  if (r.log_placement)
    options.on_placement = [&](const std::vector<LayerProfile>& rows) {
      print_placement(rows, *backend, run.device.label);
    };
  t.stop.arm();
  try {
    run.result = train(c, graph, *loss, *backend, train_src, &test_src, options);
  } catch (const NumericsError& e) {
    if (checkpoints->last_path().empty()) throw;
    throw NumericsError(e.cause(), e.hint() + "; the last good checkpoint is " +
                                       checkpoints->last_path() + " (--resume it with that --lr)");
  }
  if (run.result.stopped) return report_stop(t, k, run, options.start.step, *checkpoints);
  if (run.result.early_stopped) fmt::print("{}\n", checkpoints->early_stop_note());
  report_result(t, run, c.train.optimizer.lr);
  return std::nullopt;
}

}  // namespace

int run_train(const RunRequest& r) {
  // The command line's own mistakes before the config, the data and the banner.
  if (!r.plot_path.empty()) check_plot_path(r.plot_path);
  TrainCommand t(r);
  if (!r.quiet) print_start(t);
  // Devices side by side are timed against each other, as bench's are.
  if (t.many)
    for (const std::string& w :
         machine_warnings(t.config, t.devices, load_average(), allowed_cores()))
      spdlog::warn("{}", w);
  if (r.log_every > 0 && r.metrics_path.empty() && r.plot_path.empty() && r.tensorboard.empty())
    spdlog::warn(
        "--log-every {} has nowhere to write: its figures go to the metrics file, the plot and "
        "TensorBoard; add --metrics FILE, --plot FILE.png or --tensorboard DIR",
        r.log_every);
  fmt::print("{}", skipped_report(t.data));
  // The outputs of every run of the list (each run's own are made in its turn). The plot checks
  // its path before the runs, not after them.
  if (!r.plot_path.empty()) t.plot = std::make_shared<TrainingPlot>(r.plot_path, t.config.name);
  if (!t.lead) t.plot.reset();
  if (!r.metrics_path.empty() && t.lead)
    t.metrics = std::make_shared<MetricsWriter>(r.metrics_path, t.val.size() > 0);
  // In a data-parallel run a device that fails in one process ends them all (below).
  auto options_of = [&](const DeviceSpec& d) { return t.backend_options_of(d); };
  std::vector<Started> started = t.comm.size() > 1
                                     ? std::vector<Started>(t.devices.size())
                                     : start_gpus(t.devices, options_of, t.config.precision);
  std::vector<DeviceRun> runs;
  for (size_t k = 0; k < t.devices.size(); ++k) {
    DeviceRun run{t.devices[k], started[k].reason, {}};
    if (run.device.precision.empty()) run.device.precision = t.config.precision;
    if (t.plot) t.plot->start_run(run.device.label);
    if (run.ran()) {
      if (t.many)
        fmt::print("\n=== {} ({} of {}) ===\n", run.device.label, k + 1, t.devices.size());
      try {
        std::unique_ptr<Backend> backend =
            started[k].backend ? std::move(started[k].backend)
                               : create_backend(run.device.backend, options_of(run.device));
        if (std::optional<int> stopped = train_on(t, k, run, std::move(backend))) return *stopped;
      } catch (const Error& e) {
        // In a list, an unusable device (or a run that blew up) gets its row; the others still
        // run. In a data-parallel run a device that failed in one process ends them all: the
        // others could not tell which run to go on with.
        const bool per_device = e.code() == ExitCode::kDevice || e.code() == ExitCode::kNumerics;
        if (!t.many || !per_device || t.comm.size() > 1) throw;
        std::fflush(stdout);
        fmt::print(stderr, "error: {}\n", user_message(e.cause()));
        if (!e.hint().empty()) fmt::print(stderr, "hint: {}\n", e.hint());
        run.reason = reason_of(e);
      }
    }
    runs.push_back(std::move(run));
  }
  size_t ran = 0;
  for (const DeviceRun& run : runs) ran += run.ran();
  if (t.many) print_side_by_side(runs);
  if (t.plot) plot_training(*t.plot);
  return exit_status(ran, runs.size());
}

}  // namespace tandem
