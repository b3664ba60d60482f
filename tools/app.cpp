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
#include "tools/runner.h"
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
  if (!r.init.empty()) c.train.init = r.init, c.train.init_from = "--init";
  if (r.precisions.size() == 1) c.precision = r.precisions[0];  // several: per run
  return c;
}

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
  o.cpu_winograd = c.cpu_conv_algo == "auto";
  return o;
}

int free_cores(int compute) {
  const int cores = cores_per_process();
  return std::clamp(compute > 0 ? cores - compute : 0, 0, 8);
}

int data_workers(const Config& c, const DeviceSpec& d) {
  if (c.data.workers >= 0) return c.data.workers;
  // The CPU backend computes on its threads (0: every core); a GPU needs one thread to drive it.
  return free_cores(d.backend == "cpu" ? backend_options(c, d).threads : 1);
}

std::string si(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u ? fmt::format("{:.1f}{}", v, units[u]) : fmt::format("{:.0f}", v);
}

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

std::vector<Started> start_gpus(const std::vector<DeviceSpec>& devices,
                                const std::function<BackendOptions(const DeviceSpec&)>& options,
                                const std::string& config_precision) {
  std::vector<Started> out(devices.size());
  if (devices.size() < 2) return out;  // a lone device's error is the command's
  auto cannot_run = [&](size_t k, const std::string& cause, const std::string& hint) {
    out[k].reason = hint.empty() ? user_message(cause) : user_message(cause) + "; " + hint;
    std::fflush(stdout);
    fmt::print(stderr, "error: {} cannot run: {}\n{}the other devices run; its row says not run\n",
               devices[k].label, user_message(cause), hint.empty() ? "" : "hint: " + hint + "\n");
  };
  for (size_t k = 0; k < devices.size(); ++k) {
    if (devices[k].backend != "gpu") continue;
    try {
      out[k].backend = create_backend("gpu", options(devices[k]));
    } catch (const Error& e) {
      if (e.code() != ExitCode::kDevice) throw;
      cannot_run(k, e.cause(), e.hint());
    }
  }
  // Each (device, precision) pair of the list is checked before any trains: a precision this
  // CPU has no kernels for is told now, not after the devices before it.
  for (size_t k = 0; k < devices.size(); ++k) {
    if (!out[k].reason.empty()) continue;
    const std::string& precision =
        devices[k].precision.empty() ? config_precision : devices[k].precision;
    std::unique_ptr<Backend> probe;
    if (!out[k].backend) probe = create_backend(devices[k].backend, options(devices[k]));
    const Backend& b = out[k].backend ? *out[k].backend : *probe;
    if (std::string why; !b.supports_dtype(activation_dtype(parse_precision(precision)), &why))
      cannot_run(k, "precision " + precision + " on " + b.name() + ": " + why,
                 "use --precision fp32 on it; trainer devices says which precisions each device "
                 "of this machine runs");
  }
  return out;
}

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

std::vector<std::string> machine_warnings(const Config& config,
                                          const std::vector<DeviceSpec>& devices, double load,
                                          int cores) {
  std::vector<std::string> out;
  if (load >= 0.5 * cores)
    out.push_back(
        fmt::format("the load average is {:.2f} on {} core{}: other work shares the "
                    "cores, so the figures will be lower and noisier than on a quiet "
                    "machine",
                    load, cores, cores == 1 ? "" : "s"));
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

std::string load_note(double load, int cores) {
  if (load < 0.5 * cores) return "";
  return fmt::format(
      "the load average was {:.2f} on {} core{} as the devices trained: other work shared the "
      "cores, so the times, images/s and speedups above are unreliable; compare on a quiet "
      "machine",
      load, cores, cores == 1 ? "" : "s");
}

InfoRows run_device_rows(const Backend& backend, const std::string& precision) {
  InfoRows rows = backend.info();
  if (precision != "bf16")
    std::erase_if(
        rows, [](const auto& row) { return row.first == "bf16" && row.second.starts_with("no"); });
  return rows;
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

int exit_status(size_t ran, size_t total) {
  if (ran == total) return 0;
  return static_cast<int>(ran ? ExitCode::kPartial : ExitCode::kDevice);
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
