// The trainer's commands: load the config and data, build the graph on a backend, run, report.
#include "tools/app.h"

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
#include <thread>

#include "datasets/dataset.h"
#include "datasets/split.h"
#include "engine/batch_source.h"
#include "engine/communicator.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/json_text.h"
#include "engine/layer_registry.h"
#include "engine/parity.h"
#include "engine/precision.h"
#include "engine/progress.h"
#include "engine/report.h"
#include "engine/trainer.h"
#include "engine/user_message.h"
#include "tools/checkpoints.h"
#include "tools/plot.h"
#include "tools/stop_signal.h"
#include "tools/tensorboard.h"
#include "tools/training_plot.h"

namespace tandem {

void print_gpu_devices(std::ostream& out);  // tools/builtin_backends.cpp

void register_everything() {
  static bool done = false;
  if (done) return;
  done = true;
  register_builtin_backends();
  register_builtin_layers();
}

DeviceSpec parse_device(const std::string& text) {
  if (text == "auto") {
    // The GPU when it can run, else the CPU, and the one line that says which and why.
    std::string why;
    const bool gpu = gpu_usable(&why);
    if (gpu)
      spdlog::info("--device auto: the GPU is usable, running on gpu");
    else
      spdlog::warn("--device auto: running on the CPU, because {}", why);
    return parse_device(gpu ? "gpu" : "cpu");
  }
  if (text == "all")
    throw UsageError("--device all is a list of devices, and this command runs on one",
                     "give cpu, gpu, gpu:INDEX or auto");
  DeviceSpec d;
  d.label = text;
  auto colon = text.find(':');
  d.backend = text.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string n = text.substr(colon + 1);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("bad device '" + text + "'",
                       "write auto, all, cpu, cpu:THREADS, gpu or gpu:INDEX (e.g. --device cpu:2)");
    // More digits than an int holds is no thread count or GPU index either.
    if (n.size() > 9)
      throw UsageError("bad device '" + text + "': " + n + " is out of range",
                       d.backend == "cpu" ? "give the threads to use, e.g. cpu:2"
                                          : "give the GPU's index, e.g. gpu:0 (trainer devices "
                                            "lists them)");
    d.index = std::stoi(n);
    if (d.backend == "cpu" && d.index < 1)
      throw UsageError("bad device '" + text + "': a CPU needs at least 1 thread", "e.g. cpu:2");
  }
  return d;
}

Config load_config_with_overrides(const RunRequest& r) {
  if (r.config_path.empty())
    throw UsageError("no model config given",
                     "pass --config FILE, e.g. trainer --config configs/lenet.yaml; trainer help "
                     "lists every command and flag");
  Config c = load_config(r.config_path);
  if (r.epochs) {
    if (*r.epochs < 1) throw UsageError("--epochs must be at least 1", "e.g. --epochs 5");
    c.train.epochs = *r.epochs;
  }
  if (r.batch_size) {
    if (*r.batch_size < 1)
      throw UsageError("--batch-size must be at least 1", "e.g. --batch-size 64");
    c.train.batch_size = *r.batch_size;
  }
  if (r.lr) {
    if (!(*r.lr > 0) || !std::isfinite(*r.lr))
      throw UsageError("--lr must be a positive finite number", "e.g. --lr 0.01");
    c.train.optimizer.lr = *r.lr;
  }
  if (r.seed) c.train.seed = *r.seed;
  if (r.threads) {
    if (*r.threads < 1) throw UsageError("--threads must be at least 1", "e.g. --threads 2");
    c.train.threads = *r.threads;
  }
  if (r.data) set_data_path(c.data, *r.data, "--data");
  if (!r.checkpoint_dir.empty()) c.train.checkpoint.dir = r.checkpoint_dir;
  if (r.precisions.size() == 1) c.precision = r.precisions[0];  // several: per run
  return c;
}

namespace {

int host_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// The cores this process may run on (a launcher such as mpirun may bind it to fewer).
int allowed_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return host_cores();
  return std::max(1, CPU_COUNT(&set));
}

// The cores of this host over the run's processes on it (all of them for a single process), and
// no more than the process is bound to.
int cores_per_process() {
  return std::max(1, std::min(allowed_cores(), host_cores() / std::max(1, world().local_size())));
}

}  // namespace

BackendOptions backend_options(const Config& c, const DeviceSpec& d) {
  BackendOptions o;
  o.threads = c.train.threads;
  // Data-parallel processes on one host share its cores rather than each taking them all.
  if (o.threads == 0 && world().local_size() > 1) o.threads = cores_per_process();
  if (d.backend == "cpu" && d.index > 0) o.threads = d.index;
  // Each process of a data-parallel run on its own GPU of the host (in turn, where the host has
  // fewer GPUs than processes, or shows each process one), unless told one.
  if (d.backend == "gpu")
    o.device_index = d.index >= 0                ? d.index
                     : world().local_size() == 1 ? 0
                                                 : world().local_rank() % std::max(1, gpu_count());
  o.deterministic = c.deterministic;
  o.tf32 = (d.precision.empty() ? c.precision : d.precision) == "tf32";
  o.workspace_bytes = static_cast<size_t>(c.gpu_workspace_mb) << 20;
  o.find_conv_algorithms =
      c.gpu_conv_algo == "find" || (c.gpu_conv_algo == "auto" && !c.deterministic);
  return o;
}

namespace {

// data.workers: auto: the cores that `compute` threads leave free (0: they take every core), up
// to 8.
int free_cores(int compute) {
  const int cores = cores_per_process();
  return std::clamp(compute > 0 ? cores - compute : 0, 0, 8);
}

}  // namespace

int data_workers(const Config& c, const DeviceSpec& d) {
  if (c.data.workers >= 0) return c.data.workers;
  // The CPU backend computes on its threads (0: every core); a GPU needs one thread to drive it.
  return free_cores(d.backend == "cpu" ? backend_options(c, d).threads : 1);
}

namespace {

std::string si(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u ? fmt::format("{:.1f}{}", v, units[u]) : fmt::format("{:.0f}", v);
}

std::string model_table(const Graph& g) {
  std::vector<Row> rows;
  for (const SummaryRow& r : g.summary()) {
    rows.push_back({std::to_string(r.index), r.named ? r.name + " (" + r.type + ")" : r.name,
                    r.output.str(), format_count(r.params), si(r.flops)});
    if (g.branches()) rows.back().push_back(fmt::format("{}", fmt::join(r.inputs, ", ")));
  }
  rows.push_back({"", "total", "", format_count(g.parameter_count()), si(g.forward_flops())});
  if (!g.branches()) return format_table({"#", "layer", "output", "params", "FLOPs/sample"}, rows);
  rows.back().push_back("");
  return format_table({"#", "layer", "output", "params", "FLOPs/sample", "inputs"}, rows);
}

// "Params 431,080 trainable, 0 non-trainable; 1.64 MiB (fp32)", under the model table.
std::string parameter_line(const Graph& g) {
  int64_t trainable = 0, fixed = 0;
  for (const SummaryRow& r : g.summary()) trainable += r.params, fixed += r.buffers;
  const double mib = static_cast<double>(trainable + fixed) * sizeof(float) / (1 << 20);
  return fmt::format("Params {} trainable, {} non-trainable{}; {:.{}f} MiB (fp32)\n",
                     format_count(trainable), format_count(fixed),
                     fixed ? " (batch normalization's running statistics)" : "", mib,
                     mib < 0.1 ? 4 : 2);
}

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

}  // namespace

namespace {

// Pairs --precision's list with the devices: one precision is every run's (the config's, set by
// load_config_with_overrides); several run the one device in each, or pair with as many devices.
// In a list of several precisions each label names its run's ("cpu bf16").
std::vector<DeviceSpec> with_precisions(std::vector<DeviceSpec> devices,
                                        const std::vector<std::string>& precisions) {
  if (precisions.size() < 2) return devices;
  if (devices.size() == 1) devices.assign(precisions.size(), devices[0]);
  if (devices.size() != precisions.size())
    throw UsageError(fmt::format("--precision lists {} precisions for {} devices",
                                 precisions.size(), devices.size()),
                     "give one precision, one per device, or one device and several precisions "
                     "(--device cpu --precision fp32,bf16)");
  for (size_t k = 0; k < devices.size(); ++k) {
    devices[k].precision = precisions[k];
    devices[k].label += " " + precisions[k];
  }
  return devices;
}

// The --device list, then its precisions (with_precisions). "all" is the CPU, then each GPU when
// the GPU backend can run here (on GPU 0: "gpu" for a machine's only one), else the CPU alone and
// the one line that says why there is no GPU. A further GPU that cannot run this build gets its
// row with the reason, as in any list.
std::vector<DeviceSpec> parse_devices(const RunRequest& r) {
  if (r.devices.empty())
    throw UsageError("--device needs at least one device", "e.g. --device cpu,gpu");
  std::vector<DeviceSpec> out;
  for (const std::string& d : r.devices) {
    if (d != "all") {
      out.push_back(parse_device(d));
      continue;
    }
    out.push_back(parse_device("cpu"));
    std::string why;
    const int gpus = gpu_usable(&why) ? gpu_count() : 0;
    if (gpus == 0) spdlog::warn("--device all: the CPU only, because {}", why);
    for (int i = 0; i < gpus; ++i)
      out.push_back(parse_device(gpus == 1 ? "gpu" : "gpu:" + std::to_string(i)));
  }
  return with_precisions(out, r.precisions);
}

// The cause of a failure on one device of a list, with its hint, for the table's notes.
std::string reason_of(const Error& e) {
  const std::string cause = user_message(e.cause());
  return e.hint().empty() ? cause : cause + "; " + e.hint();
}

// A device list's GPUs start before any device runs, so that one that cannot run here is told at
// once rather than after the devices before it (a CPU run of many epochs). By list position: the
// started backend, or why it could not start; CPU entries stay empty (each starts in its turn).
struct Started {
  std::unique_ptr<Backend> backend;
  std::string reason;  // not empty: it cannot run
};
std::vector<Started> start_gpus(const std::vector<DeviceSpec>& devices,
                                const std::function<BackendOptions(const DeviceSpec&)>& options) {
  std::vector<Started> out(devices.size());
  if (devices.size() < 2) return out;  // a lone device's error is the command's
  for (size_t k = 0; k < devices.size(); ++k) {
    if (devices[k].backend != "gpu") continue;
    try {
      out[k].backend = create_backend("gpu", options(devices[k]));
    } catch (const Error& e) {
      if (e.code() != ExitCode::kDevice) throw;
      out[k].reason = reason_of(e);
      std::fflush(stdout);
      fmt::print(stderr,
                 "error: {} cannot run: {}\n{}the other devices run; its row says not run\n",
                 devices[k].label, user_message(e.cause()),
                 e.hint().empty() ? "" : "hint: " + e.hint() + "\n");
    }
  }
  return out;
}

void print_placement(const std::vector<LayerProfile>& rows, const Backend& backend,
                     const std::string& device) {
  const std::string own = backend.name() == "gpu" ? "tandem CUDA kernels" : "tandem OpenMP loops";
  std::vector<Row> table;
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerProfile& l = rows[i];
    for (int pass = 0; pass < 2; ++pass) {
      const std::vector<std::string>& ops = pass ? l.backward_ops : l.forward_ops;
      const std::string name = pass ? "backward" : "forward";
      std::string first = ops.empty() ? (l.type == "flatten" ? "view (no work)" : own) : ops[0];
      table.push_back({pass ? "" : std::to_string(i + 1), pass ? "" : l.name, name, first});
      for (size_t k = 1; k < ops.size(); ++k) table.push_back({"", "", "", ops[k]});
    }
  }
  fmt::print("Placement on {} (first training step; library primitives, else {}):\n{}\n", device,
             own, format_table({"#", "layer", "pass", "ran on"}, table));
  std::fflush(stdout);
}

struct DeviceRun {
  DeviceSpec device;
  std::string reason;               // why it did not run to the end; empty: it did
  std::vector<EpochStats> earlier;  // a resumed run's epochs before the resume (the plot's)
  TrainResult result;
  std::vector<LoggedStep> steps = {};  // --log-every's logged steps (the plot's)
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
  std::vector<Row> rows;
  std::vector<std::string> notes;
  for (const DeviceRun& r : runs) {
    if (!r.ran()) {
      rows.push_back({r.device.label, "-", "-", "-", "-", "-", "-", "-"});
      if (val) rows.back().insert(rows.back().end(), {"-", "-"});
      rows.back().insert(rows.back().end(), {"-", "-", "not run"});
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
    rows.push_back({r.device.label, std::to_string(last.epoch),
                    fmt::format("{:.2f}", mean_epoch_seconds(r.result)),
                    format_count(images_per_second(r.result)), format_loss(last.train_loss),
                    fmt::format("{:.2f}%", 100 * last.train_accuracy), format_loss(last.test_loss),
                    fmt::format("{:.2f}%", 100 * last.test_accuracy)});
    if (val)
      rows.back().insert(rows.back().end(),
                         {last.has_val ? format_loss(last.val_loss) : "-",
                          last.has_val ? fmt::format("{:.2f}%", 100 * last.val_accuracy) : "-"});
    rows.back().insert(rows.back().end(), {format_bytes(peak_memory(r.result)), speedup, parity});
  }
  Row header{"device",     "epochs",    "train s/epoch", "images/s",
             "train loss", "train acc", "test loss",     "test acc"};
  if (val) header.insert(header.end(), {"val loss", "val acc"});
  header.insert(header.end(), {"peak mem", "speedup", "parity"});
  fmt::print("\nSide by side (speedup and parity against {}):\n{}",
             ref ? ref->device.label : "the first device", format_table(header, rows));
  std::vector<std::string> first_steps;
  for (const DeviceRun& r : runs)
    if (r.ran() && r.result.first_step_samples)
      first_steps.push_back(
          fmt::format("{} {:.0f} ms", r.device.label, 1e3 * r.result.first_step_seconds));
  if (!first_steps.empty())
    notes.push_back(
        fmt::format("images/s and speedup leave out each device's first step ({}: "
                    "primitive creation, algorithm search); s/epoch includes it",
                    fmt::join(first_steps, ", ")));
  for (const std::string& n : notes) fmt::print("  {}\n", n);
}

// The runs as the plot draws them; `live`, when set, is the run in progress (its epochs so far).
std::vector<PlotRun> plot_runs(const std::vector<DeviceRun>& runs,
                               const DeviceRun* live = nullptr) {
  std::vector<const DeviceRun*> all;
  for (const DeviceRun& d : runs) all.push_back(&d);
  if (live) all.push_back(live);
  std::vector<PlotRun> out;
  for (const DeviceRun* r : all) {
    PlotRun p;
    p.label = r->device.label;
    p.ran = !r->result.epochs.empty();
    p.epochs = r->earlier;
    p.epochs.insert(p.epochs.end(), r->result.epochs.begin(), r->result.epochs.end());
    p.resumed_after = static_cast<int64_t>(r->earlier.size());
    p.steps = r->steps;
    out.push_back(std::move(p));
  }
  return out;
}

void plot_training(const std::string& path, const std::string& config_name,
                   const std::vector<DeviceRun>& runs) {
  draw_training_plot(path, config_name, plot_runs(runs));
  fmt::print("plot written to {}\n", path);
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

int exit_status(size_t ran, size_t total) {
  if (ran == total) return 0;
  return static_cast<int>(ran ? ExitCode::kPartial : ExitCode::kDevice);
}

}  // namespace

int run_train(const RunRequest& r) {
  Config config = load_config_with_overrides(r);
  const std::vector<DeviceSpec> devices = parse_devices(r);
  Graph model(config);  // checks the model before any data is read
  DataSplits data = load_data(config.data, config.input, static_cast<int>(model.classes()));
  const Dataset val = hold_out(data.train, config.data.val_split, config.train.seed);
  const std::string normalise = apply_normalize_auto(config.data, data.train);
  check_training_batches(config, model, data.train.size());
  const bool many = devices.size() > 1;
  Communicator& comm = world();
  const bool lead = comm.rank() == 0;  // the process that writes files (and prints)
  if (many && !r.resume.empty())
    throw UsageError("--resume continues one run, on one device", "pass a single --device");
  StopOnSignal stop;  // armed when training starts: from then on Ctrl-C saves a checkpoint

  if (!r.quiet) {
    std::string names;
    for (const DeviceSpec& d : devices) names += (names.empty() ? "" : ", ") + d.label;
    fmt::print("tandem {} - {} ({}) on {}\n\n", TANDEM_VERSION, config.name, config.file, names);
    fmt::print("Model {}\n{}{}\n", config.name, model_table(model), parameter_line(model));
    fmt::print("Data   {}: {} train / {} test samples of {}, {} classes\n", config.data.format,
               format_count(data.train.size()), format_count(data.test.size()),
               data.train.sample_shape.str(), model.classes());
    fmt::print("{}", cache_report(data));
    if (config.data.augment.any())
      fmt::print("       augmented (train): {}{}\n",
                 config.data.augment.crop_padding
                     ? fmt::format("random crop, padding {}", config.data.augment.crop_padding)
                     : "",
                 config.data.augment.flip
                     ? (config.data.augment.crop_padding ? ", horizontal flip" : "horizontal flip")
                     : "");
    if (config.data.test_split > 0)
      fmt::print(
          "Test   {} images held out of {}, a share of each class (data.test_split {:g}, "
          "drawn from data.seed {})\n",
          format_count(data.test.size()), config.data.train_path, config.data.test_split,
          config.data.seed);
    if (val.size() > 0)
      fmt::print("Validation: {} of {} train samples held out (data.val_split {:g})\n",
                 format_count(val.size()), format_count(val.size() + data.train.size()),
                 config.data.val_split);
    fmt::print("{}{}", normalise, class_mapping(data.train));
    // Broken between its parts on a terminal narrower than it.
    fmt::print("{}", wrap_to_terminal(
                         fmt::format("Run    {} epoch{}", format_count(config.train.epochs),
                                     config.train.epochs == 1 ? "" : "s"),
                         {"batch " + format_count(config.train.batch_size),
                          optimizer_text(config.train.optimizer),
                          "schedule " + schedule_text(config.train.schedule), "loss " + config.loss,
                          fmt::format("seed {}", config.train.seed),
                          "precision " + (r.precisions.size() > 1
                                              ? fmt::format("{}", fmt::join(r.precisions, ", "))
                                              : precision_text(config.precision))},
                         ", ", 7));
    fmt::print("{}", controls_text(config.train));
    if (config.train.batch_size > data.train.size())
      fmt::print(
          "       note: batch {} is more than the {} train samples: each epoch is one step "
          "of {}\n",
          config.train.batch_size, format_count(data.train.size()),
          format_count(data.train.size()));
    if (comm.size() > 1)
      fmt::print(
          "       data-parallel over {} processes ({}, {} on this host): batch {} each, {} "
          "samples a step, gradients averaged before every update\n",
          comm.size(), comm.library(), comm.local_size(), config.train.batch_size,
          config.train.batch_size * comm.size());
    if (const int share = host_cores() / comm.local_size();
        comm.size() > 1 && allowed_cores() < share)
      fmt::print(
          "       note: mpirun bound each process to {} of the {} cores it could use; "
          "--bind-to none (or --map-by slot:PE={}) gives each its share\n",
          allowed_cores(), share, share);
    std::fflush(stdout);
  }
  fmt::print("{}", skipped_report(data));
  if (!r.plot_path.empty()) check_plot_path(r.plot_path);  // before the runs, not after
  std::unique_ptr<MetricsWriter> metrics;
  if (!r.metrics_path.empty() && lead)
    metrics = std::make_unique<MetricsWriter>(r.metrics_path, val.size() > 0);

  auto options_of = [&](const DeviceSpec& device) {
    BackendOptions o = backend_options(config, device);
    o.batch_size = config.train.batch_size;  // bench's rows differ: it names none
    return o;
  };
  // In a data-parallel run a device that fails in one process ends them all (below).
  std::vector<Started> started =
      comm.size() > 1 ? std::vector<Started>(devices.size()) : start_gpus(devices, options_of);
  std::vector<DeviceRun> runs;
  for (size_t k = 0; k < devices.size(); ++k) {
    DeviceRun run{devices[k], started[k].reason, {}, {}};
    if (run.device.precision.empty()) run.device.precision = config.precision;
    if (!run.ran()) {
      runs.push_back(std::move(run));
      continue;
    }
    if (many) fmt::print("\n=== {} ({} of {}) ===\n", run.device.label, k + 1, devices.size());
    try {
      std::unique_ptr<Backend> backend =
          started[k].backend ? std::move(started[k].backend)
                             : create_backend(run.device.backend, options_of(run.device));
      if (!r.quiet) fmt::print("\n{}\n", format_pairs("Device", backend->info()));
      std::fflush(stdout);
      Config c = config;
      if (!run.device.precision.empty()) c.precision = run.device.precision;
      Graph graph(c);
      std::unique_ptr<Loss> loss = make_loss(c.loss);
      // No batch holds more samples than the largest split: a batch beyond it takes no memory.
      const int64_t largest = std::max({data.train.size(), data.test.size(), val.size()});
      graph.allocate(*backend, std::min(c.train.batch_size, std::max<int64_t>(1, largest)),
                     c.train.seed);
      Batcher train_src(data.train, c.train.batch_size, c.train.shuffle, c.train.seed, c.data.mean,
                        c.data.std, c.train.drop_last);
      train_src.set_augment(c.data.augment);
      Batcher test_src(data.test, c.train.batch_size, false, c.train.seed, c.data.mean, c.data.std);
      Batcher val_src(val, c.train.batch_size, false, c.train.seed, c.data.mean, c.data.std);
      TrainOptions options;
      options.val = &val_src;
      options.device_label = run.device.label;
      options.progress = !r.quiet;
      options.verbose = r.verbose;
      options.data_workers = data_workers(c, run.device);
      options.comm = &comm;
      if (!r.quiet)
        fmt::print(
            "{}",
            wrap_to_terminal(
                fmt::format("Input  batches cut {}",
                            options.data_workers ? fmt::format("ahead by {} background thread{}",
                                                               options.data_workers,
                                                               options.data_workers == 1 ? "" : "s")
                                                 : "in the training thread"),
                {fmt::format("(data.workers: {})", c.data.workers < 0
                                                       ? "auto, the cores the device leaves free"
                                                       : "set")},
                " ", 7));
      RunCheckpoints checkpoints(c, run.device.label, many, r.quiet, data.train.class_names);
      if (r.resume.empty() && lead) checkpoints.warn_if_folder_in_use();
      std::unique_ptr<TensorBoardWriter> board;
      if (!r.tensorboard.empty() && lead)
        board = std::make_unique<TensorBoardWriter>(r.tensorboard, run.device.label);
      options.log_every = r.log_every;
      options.on_log = [&](const LoggedStep& f) {
        run.steps.push_back(f);
        if (metrics) metrics->write_step(f);
        if (board) board->step(f);
      };
      options.on_epoch = [&](const EpochStats& e) {
        if (metrics) metrics->write(e);
        if (board) board->epoch(e);
        checkpoints.epoch_done(e);
        // Redrawn after every epoch: a long run can be watched, a stopped one keeps its picture.
        if (!r.plot_path.empty() && lead) {
          run.result.epochs.push_back(e);
          draw_training_plot(r.plot_path, config.name, plot_runs(runs, &run));
          run.result.epochs.pop_back();
        }
      };
      if (!r.resume.empty()) {
        checkpoints.resumed(
            resume_from(r.resume, c, options, r.quiet,
                        ShardedSource(train_src, comm.rank(), comm.size()).batches_per_epoch()));
        run.earlier = checkpoints.history();
        options.earlier = run.earlier;
        if (metrics) metrics->continue_after(run.earlier);
      }
      options.on_checkpoint = [&](TrainStep& s, const TrainPosition& at) {
        QuitDeferral writing;  // a second Ctrl-C now waits for the checkpoint to be whole
        if (lead) checkpoints.write(s, at, at.stopping);
      };
      options.stop = [&] { return stop.requested(); };
      if (r.log_placement)
        options.on_placement = [&](const std::vector<LayerProfile>& rows) {
          print_placement(rows, *backend, run.device.label);
        };
      stop.arm();
      try {
        run.result = train(c, graph, *loss, *backend, train_src, &test_src, options);
      } catch (const NumericsError& e) {
        if (checkpoints.last_path().empty()) throw;
        throw NumericsError(e.cause(), e.hint() + "; the last good checkpoint is " +
                                           checkpoints.last_path() +
                                           " (--resume it with that --lr)");
      }
      if (run.result.stopped) {
        // In a data-parallel run the signal may have reached another process only (mpirun
        // passes a SIGTERM on to each); the run stopped all the same.
        const bool here = stop.requested();
        fmt::print("{}stopped by {} at step {}; continue with: {}\n",
                   many ? "the " + run.device.label + " run: " : "",
                   here ? stop.name() : "a signal to another process of the run",
                   format_count(static_cast<double>(run.result.step_losses.size() +
                                                    run.result.skipped_steps + options.start.step)),
                   continue_command(r, config, run.device, checkpoints.last_path(),
                                    many ? checkpoints.dir() : ""));
        if (k + 1 < devices.size()) {
          std::vector<std::string> rest;
          for (size_t j = k + 1; j < devices.size(); ++j) rest.push_back(devices[j].label);
          fmt::print("not run: {} (stopped before {})\n", fmt::join(rest, ", "),
                     rest.size() == 1 ? "it" : "them");
        }
        if (!r.plot_path.empty() && lead) {
          runs.push_back(std::move(run));
          plot_training(r.plot_path, config.name, runs);
        }
        return here ? stop.exit_status() : 128 + SIGTERM;
      }
      if (run.result.early_stopped) fmt::print("{}\n", checkpoints.early_stop_note());
      const EpochStats& last = run.result.epochs.back();
      fmt::print("{}: test accuracy {} (loss {}) after {} epoch{}, {} training, {} img/s\n",
                 run.device.label, format_accuracy(last.test_accuracy), format_loss(last.test_loss),
                 last.epoch, last.epoch == 1 ? "" : "s",
                 format_duration(training_seconds(run.result)),
                 format_count(images_per_second(run.result)));
      // A run that ends where guessing would is a run to hear about, not a success.
      const double chance = 1.0 / static_cast<double>(std::max<int64_t>(2, model.classes()));
      if (data.test.size() > 0 && last.test_accuracy < 1.2 * chance + 0.01)
        fmt::print(
            "  note: {:.2f}% is about chance for {} classes ({:.0f}%): the model has not "
            "learnt; the usual causes are a learning rate too high (this run's: {:g}) or too "
            "low, too few epochs, or labels that do not match their images\n",
            100 * last.test_accuracy, model.classes(), 100 * chance, c.train.optimizer.lr);
    } catch (const Error& e) {
      // In a list, an unusable device (or a run that blew up) gets its row; the others still run.
      const bool per_device = e.code() == ExitCode::kDevice || e.code() == ExitCode::kNumerics;
      // In a data-parallel run a device that failed in one process ends them all: the others
      // could not tell which run to go on with.
      if (!many || !per_device || comm.size() > 1) throw;
      std::fflush(stdout);
      fmt::print(stderr, "error: {}\n", user_message(e.cause()));
      if (!e.hint().empty()) fmt::print(stderr, "hint: {}\n", e.hint());
      run.reason = reason_of(e);
    }
    runs.push_back(std::move(run));
  }
  size_t ran = 0;
  for (const DeviceRun& run : runs) ran += run.ran();
  if (many) print_side_by_side(runs);
  if (!r.plot_path.empty() && lead) plot_training(r.plot_path, config.name, runs);
  return exit_status(ran, runs.size());
}

namespace {

struct BenchRow {
  DeviceSpec device;
  int threads = 0;  // CPU threads of the run (a GPU's: the one that drives it)
  int64_t batch = 0;
  std::string reason;  // why it did not run; empty: it did
  BenchResult b;
  bool ran() const { return reason.empty(); }
};

void print_layer_profile(const std::vector<LayerProfile>& rows, const std::string& device,
                         int64_t batch) {
  std::vector<Row> table;
  double fwd = 0, bwd = 0;
  auto gflops = [](double flops, double ms) {
    return ms > 0 && flops > 0 ? fmt::format("{:.1f}", flops / (ms * 1e6)) : std::string("-");
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerProfile& l = rows[i];
    fwd += l.forward_ms, bwd += l.backward_ms;
    const double f = static_cast<double>(l.flops);
    table.push_back({std::to_string(i + 1), l.name, fmt::format("{:.3f}", l.forward_ms),
                     fmt::format("{:.3f}", l.backward_ms), si(f), gflops(f, l.forward_ms),
                     gflops(2 * f, l.backward_ms)});
  }
  table.push_back(
      {"", "total", fmt::format("{:.3f}", fwd), fmt::format("{:.3f}", bwd), "", "", ""});
  fmt::print(
      "\nPer layer on {}, batch {} (medians; synchronised around each layer, so the total "
      "exceeds a step's time):\n{}(backward FLOPs counted as 2x forward: input and weight "
      "gradients)\n",
      device, batch,
      format_table({"#", "layer", "fwd ms", "bwd ms", "FLOPs", "fwd GFLOP/s", "bwd GFLOP/s"},
                   table));
}

// The CPU threads a bench row runs on: those asked for, or the CPU backend's default of every
// core the process may use; one for a GPU, the thread that drives it.
int threads_used(const BackendOptions& options, const DeviceSpec& device) {
  if (device.backend != "cpu") return 1;
  return options.threads > 0 ? options.threads : allowed_cores();
}

// The device speedups are against: the first of the list that ran (one that could not start,
// such as a GPU here, leaves it to the next), as side-by-side training does; and its row at a
// batch size, if that ran.
std::string reference_device(const std::vector<BenchRow>& rows) {
  for (const BenchRow& r : rows)
    if (r.ran()) return r.device.label;
  return rows.front().device.label;
}

const BenchRow* reference_row(const std::vector<BenchRow>& rows, const BenchRow& row) {
  const std::string ref = reference_device(rows);
  for (const BenchRow& r : rows)
    if (r.device.label == ref && r.batch == row.batch) return r.ran() ? &r : nullptr;
  return nullptr;
}

std::string bench_json(const BenchRow& row, const BenchRow* ref, const std::string& config) {
  std::string s = fmt::format(
      "{{\"device\": {}, \"config\": {}, \"batch_size\": {}, \"threads\": {}, \"precision\": {}",
      json_string(row.device.label), json_string(config), row.batch, row.threads,
      json_string(row.device.precision));
  if (!row.ran()) return s + ", \"error\": " + json_string(row.reason) + "}";
  const BenchResult& b = row.b;
  s += fmt::format(
      ", \"train_images_per_second\": {:.1f}, \"infer_images_per_second\": {:.1f}, "
      "\"train_ms_per_step\": {:.4f}, \"infer_ms_per_step\": {:.4f}, \"steps\": {}, \"warmup\": {}",
      b.train_images_per_second, b.infer_images_per_second, b.train_ms, b.infer_ms, b.steps,
      b.warmup);
  for (const auto& [name, sp] :
       {std::pair{"train", b.train_spread}, std::pair{"infer", b.infer_spread}})
    s += fmt::format(
        ", \"{0}_ms_min\": {1:.4f}, \"{0}_ms_q1\": {2:.4f}, \"{0}_ms_q3\": {3:.4f}, "
        "\"{0}_ms_max\": {4:.4f}",
        name, sp.min, sp.q1, sp.q3, sp.max);
  if (ref)
    s += fmt::format(", \"train_speedup\": {:.3f}, \"infer_speedup\": {:.3f}",
                     b.train_images_per_second / ref->b.train_images_per_second,
                     b.infer_images_per_second / ref->b.infer_images_per_second);
  return s + "}";
}

// Rows whose timed steps varied widely: their medians are less to be trusted.
std::vector<std::string> bench_spread_warnings(const std::vector<BenchRow>& rows) {
  std::vector<std::string> out;
  for (const BenchRow& row : rows) {
    if (!row.ran()) continue;
    const StepSpread& t = row.b.train_spread;
    if (t.median <= 0 || (t.q3 - t.q1 <= 0.25 * t.median && t.max <= 2 * t.min)) continue;
    out.push_back(fmt::format(
        "{} at batch {}: the timed steps varied widely ({:.2f} to {:.2f} ms, quartiles {:.2f} and "
        "{:.2f}): other work on the machine, or clocks that changed, make its figures noisy; "
        "run it again with more --steps when the machine is quiet",
        row.device.label, row.batch, t.min, t.max, t.q1, t.q3));
  }
  return out;
}

// Before a benchmark: other work on the cores, and more threads than cores, make its figures low
// and noisy.
std::vector<std::string> bench_machine_warnings(const Config& config,
                                                const std::vector<DeviceSpec>& devices) {
  std::vector<std::string> out;
  const int cores = allowed_cores();
  double load[1] = {0};
  if (getloadavg(load, 1) == 1 && load[0] >= 0.5 * cores)
    out.push_back(
        fmt::format("the load average is {:.2f} on {} core{}: other work shares the "
                    "cores, so the figures will be lower and noisier than on a quiet "
                    "machine",
                    load[0], cores, cores == 1 ? "" : "s"));
  for (const DeviceSpec& d : devices) {
    const int threads = d.backend != "cpu" ? 0 : d.index > 0 ? d.index : config.train.threads;
    if (threads > cores)
      out.push_back(
          fmt::format("{} threads on {} core{}: the threads take turns on the cores, "
                      "which slows every step; give {} or fewer",
                      threads, cores, cores == 1 ? "" : "s", cores));
  }
  return out;
}

void plot_bench(const std::string& path, const std::vector<BenchRow>& rows,
                const std::string& config) {
  PlotPanel speed{config + ": training throughput", "batch size", "images/s", {}, true, true};
  PlotPanel ratio{"Training speedup against " + reference_device(rows),
                  "batch size",
                  "speedup (x)",
                  {},
                  true,
                  true};
  std::vector<std::string> labels;
  for (const BenchRow& r : rows)
    if (std::find(labels.begin(), labels.end(), r.device.label) == labels.end())
      labels.push_back(r.device.label);
  for (size_t d = 0; d < labels.size(); ++d) {
    PlotSeries ips{labels[d], {}, {}, static_cast<int>(d), false}, up = ips;
    for (const BenchRow& r : rows) {
      if (r.device.label != labels[d]) continue;
      if (!r.ran()) {  // no point, but the batch axis still spans it
        for (PlotSeries* s : {&ips, &up}) s->x.push_back(static_cast<double>(r.batch));
        for (PlotSeries* s : {&ips, &up}) s->y.push_back(NAN);
        continue;
      }
      ips.x.push_back(static_cast<double>(r.batch));
      ips.y.push_back(r.b.train_images_per_second);
      if (const BenchRow* ref = reference_row(rows, r)) {
        up.x.push_back(static_cast<double>(r.batch));
        up.y.push_back(r.b.train_images_per_second / ref->b.train_images_per_second);
      }
    }
    if (std::none_of(ips.y.begin(), ips.y.end(), [](double v) { return std::isfinite(v); }))
      ips.label = up.label = labels[d] + " (not run)";
    speed.series.push_back(ips);
    if (d > 0 || labels.size() == 1) ratio.series.push_back(up);
  }
  write_plot(path, {speed, ratio});
  fmt::print("plot written to {}\n", path);
}

// The input pipeline on its own: decoding the configured data set, then cutting normalised
// batches from it, so a user sees whether data or compute bounds training.
// Images/s that `workers` threads (0: this one) cut, normalise and augment into batches.
double pipeline_rate(BatchSource& src, int64_t sample, int64_t batch, int workers) {
  using Clock = std::chrono::steady_clock;
  BatchQueue queue(src, sample, batch, workers, aligned_host_memory);
  int64_t done = 0;
  const auto t = Clock::now();
  double seconds = 0;
  for (int64_t epoch = 0; done == 0 || seconds < 0.3; ++epoch) {
    queue.start_epoch(epoch);
    for (BatchQueue::Batch b = queue.next(); b.n; b = queue.next()) done += b.n;
    seconds = std::chrono::duration<double>(Clock::now() - t).count();
  }
  return static_cast<double>(done) / seconds;
}

void print_input_pipeline(const Config& config, int64_t classes, int64_t batch,
                          double fastest_train) {
  using Clock = std::chrono::steady_clock;
  try {
    auto t0 = Clock::now();
    DataSplits data = load_data(config.data, config.input, static_cast<int>(classes));
    const double decode = std::chrono::duration<double>(Clock::now() - t0).count();
    Batcher src(data.train, batch, config.train.shuffle, config.train.seed, config.data.mean,
                config.data.std, config.train.drop_last);
    src.set_augment(config.data.augment);
    const int64_t sample = config.input.numel();
    // Auto: as beside a GPU, so that the rate with background threads shows.
    const int workers =
        std::clamp(config.data.workers >= 0 ? config.data.workers : free_cores(1), 0, 8);
    const double serial = pipeline_rate(src, sample, batch, 0);
    const double ips = workers ? pipeline_rate(src, sample, batch, workers) : serial;
    const double ratio = ips / std::max(1.0, fastest_train);
    const double loaded = static_cast<double>(data.train.size() + data.test.size());
    fmt::print(
        "Input pipeline ({}): {} train samples {} in {} ({} images/s over both splits); "
        "batches of {} cut{} at {} images/s in the training thread{}, {}x the fastest "
        "training row: {}\n",
        config.data.format, format_count(data.train.size()),
        data.train.on_the_fly() ? "checked" : "decoded", format_duration(decode),
        format_count(loaded / std::max(1e-9, decode)), batch,
        std::string(data.train.on_the_fly() ? ", decoded on the fly" : "") +
            (config.data.augment.any() ? ", augmented and normalised" : " and normalised"),
        format_count(serial),
        workers ? fmt::format(", {} with {} background thread{}", format_count(ips), workers,
                              workers == 1 ? "" : "s")
                : "",
        ratio < 100 ? fmt::format("{:.1f}", ratio) : format_count(ratio),
        ips > fastest_train ? "compute bounds training, not data" : "data bounds training");
  } catch (const DataError& e) {
    fmt::print("Input pipeline: not measured: {}\n", e.cause());
  }
}

}  // namespace

int run_bench(const RunRequest& r) {
  Config config = load_config_with_overrides(r);
  std::vector<DeviceSpec> devices = parse_devices(r);
  for (DeviceSpec& d : devices)
    if (d.precision.empty()) d.precision = config.precision;
  if (r.steps < 1 || r.warmup < 0)
    throw UsageError("--steps must be at least 1 and --warmup at least 0",
                     "e.g. --steps 20 --warmup 5");
  if (r.batch_size && !r.batch_sizes.empty())
    throw UsageError(fmt::format("--batch-size {} and --batch-sizes {} are both given: bench would "
                                 "measure the list only",
                                 *r.batch_size, fmt::join(r.batch_sizes, ",")),
                     "give --batch-sizes for several, or --batch-size for one");
  std::vector<int64_t> batches = r.batch_sizes;
  if (batches.empty()) batches.push_back(config.train.batch_size);
  for (int64_t b : batches)
    if (b < 1) throw UsageError("batch sizes must be at least 1", "e.g. --batch-sizes 16,64,256");
  Graph model(config);  // checks the model before any device starts
  if (!r.plot_path.empty()) check_plot_path(r.plot_path);
  const bool text = !r.json;

  auto options_of = [&](const DeviceSpec& device) {
    BackendOptions o = backend_options(config, device);
    if (batches.size() == 1) o.batch_size = batches.front();  // for an out-of-memory hint
    return o;
  };
  for (const std::string& w : bench_machine_warnings(config, devices)) spdlog::warn("{}", w);
  std::vector<Started> started = start_gpus(devices, options_of);
  std::vector<BenchRow> rows;
  for (size_t k = 0; k < devices.size(); ++k) {
    const DeviceSpec& device = devices[k];
    const BackendOptions options = options_of(device);
    std::unique_ptr<Backend> backend = std::move(started[k].backend);
    std::string reason = started[k].reason;
    try {
      if (reason.empty() && !backend) backend = create_backend(device.backend, options);
    } catch (const DeviceError& e) {
      if (devices.size() == 1) throw;
      reason = reason_of(e);
    }
    if (!reason.empty()) {
      for (int64_t b : batches)
        rows.push_back({device, threads_used(options, device), b, reason, {}});
      continue;
    }
    if (text && !r.quiet) fmt::print("{}\n", format_pairs("Device", backend->info()));
    std::fflush(stdout);
    for (int64_t batch : batches) {
      BenchRow row{device, threads_used(options, device), batch, "", {}};
      try {
        Config c = config;
        c.train.batch_size = batch;
        c.precision = device.precision;
        Graph graph(c);
        std::unique_ptr<Loss> loss = make_loss(c.loss);
        graph.allocate(*backend, batch, c.train.seed);
        row.b = bench(graph, *loss, *backend, c.train.optimizer, batch, r.steps, r.warmup,
                      c.train.seed);
        if (text && (r.per_layer || r.log_placement)) {
          std::vector<LayerProfile> prof =
              profile_layers(graph, *loss, *backend, c.train.optimizer, batch,
                             std::max(1, r.steps / 2), std::min(r.warmup, 2), c.train.seed);
          if (r.log_placement) print_placement(prof, *backend, device.label);
          if (r.per_layer) print_layer_profile(prof, device.label, batch);
        }
      } catch (const DeviceError& e) {  // e.g. out of device memory at the largest batch
        if (devices.size() == 1 && batches.size() == 1) throw;
        row.reason = reason_of(e);
      }
      rows.push_back(row);
    }
  }

  size_t ran = 0;
  for (const BenchRow& row : rows) ran += row.ran();
  if (r.json) {
    for (const BenchRow& row : rows)
      fmt::print("{}\n", bench_json(row, reference_row(rows, row), config.name));
    return exit_status(ran, rows.size());
  }

  const double gflop = static_cast<double>(model.forward_flops()) / 1e9;  // per sample
  std::vector<Row> table;
  std::vector<std::string> notes;
  for (const BenchRow& row : rows) {
    if (!row.ran()) {
      table.push_back({row.device.label, std::to_string(row.batch), "-", "-", "-", "-", "-", "-",
                       "-", row.device.precision});
      const std::string note = row.device.label + ": not run: " + row.reason;
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
      continue;
    }
    const BenchResult& b = row.b;
    const BenchRow* ref = reference_row(rows, row);
    auto ratio = [&](double v, double base) {
      return ref ? fmt::format("{:.2f}x", v / base) : std::string("-");
    };
    table.push_back(
        {row.device.label, std::to_string(row.batch), fmt::format("{:.2f}", b.train_ms),
         fmt::format("{:.2f}-{:.2f}", b.train_spread.min, b.train_spread.max),
         format_count(b.train_images_per_second), format_count(b.infer_images_per_second),
         fmt::format("{:.1f}", 3 * gflop * static_cast<double>(row.batch) / (b.train_ms / 1e3)),
         ratio(b.train_images_per_second, ref ? ref->b.train_images_per_second : 1),
         ratio(b.infer_images_per_second, ref ? ref->b.infer_images_per_second : 1),
         row.device.precision});
    // Users' most common surprise: a small model or batch where the GPU barely beats the CPU.
    if (row.device.backend == "gpu" && ref && ref != &row && ref->device.backend == "cpu" &&
        b.train_images_per_second < 2 * ref->b.train_images_per_second)
      notes.push_back(fmt::format(
          "{} at batch {}: only {:.2f}x {}: a step takes {:.2f} ms, so kernel launches and "
          "synchronisation, not arithmetic, bound it; the model is too small for the GPU to pay "
          "at this batch size (larger batches or models raise the speedup)",
          row.device.label, row.batch, b.train_images_per_second / ref->b.train_images_per_second,
          ref->device.label, b.train_ms));
  }
  fmt::print(
      "\n{}: median of {} step{} per row, after {} warm-up step{} that {} not counted "
      "(primitive creation, cuDNN algorithm search, first allocations)\n",
      config.name, r.steps, r.steps == 1 ? "" : "s", r.warmup, r.warmup == 1 ? "" : "s",
      r.warmup == 1 ? "is" : "are");
  fmt::print("{}", format_table({"device", "batch", "train ms/step", "min-max ms", "train img/s",
                                 "infer img/s", "train GFLOP/s", "train speedup", "infer speedup",
                                 "precision"},
                                table));
  fmt::print("(speedups against {} at the same batch size; training FLOPs counted as 3x forward)\n",
             reference_device(rows));
  for (const std::string& n : notes) fmt::print("  note: {}\n", n);
  for (const std::string& w : bench_spread_warnings(rows)) spdlog::warn("{}", w);
  double fastest = 0;
  for (const BenchRow& row : rows)
    if (row.ran()) fastest = std::max(fastest, row.b.train_images_per_second);
  print_input_pipeline(config, model.classes(), *std::max_element(batches.begin(), batches.end()),
                       fastest);
  if (!r.plot_path.empty()) plot_bench(r.plot_path, rows, config.name);
  return exit_status(ran, rows.size());
}

int run_devices(const RunRequest&) {
  std::unique_ptr<Backend> cpu = create_backend("cpu", BackendOptions{});
  fmt::print("{}\n", format_pairs("CPU", cpu->info()));
  std::fflush(stdout);
  print_gpu_devices(std::cout);
  const std::string mpi = mpi_library();
  fmt::print("\nSeveral processes (data-parallel training)\n  MPI      {}\n",
             mpi.empty() ? "none in this build: install libopenmpi-dev and openmpi-bin, then "
                           "rebuild, to train one run over several processes or hosts"
                         : mpi +
                               ": mpirun -np N trainer --config FILE trains one run over N "
                               "processes");
  std::cout.flush();
  return 0;
}

}  // namespace tandem
