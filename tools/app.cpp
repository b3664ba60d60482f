// The trainer's commands: load the config and data, build the graph on a backend, run, report.
#include "tools/app.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "datasets/dataset.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/progress.h"
#include "engine/report.h"
#include "engine/trainer.h"

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
  DeviceSpec d;
  d.label = text;
  auto colon = text.find(':');
  d.backend = text.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string n = text.substr(colon + 1);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("bad device '" + text + "'",
                       "write cpu, cpu:THREADS, gpu or gpu:INDEX (e.g. --device cpu:2)");
    d.index = std::stoi(n);
    if (d.backend == "cpu" && d.index < 1)
      throw UsageError("bad device '" + text + "': a CPU needs at least 1 thread", "e.g. cpu:2");
  }
  return d;
}

Config load_config_with_overrides(const RunRequest& r) {
  if (r.config_path.empty())
    throw UsageError("no model config given", "pass --config FILE, e.g. --config configs/lenet.yaml");
  Config c = load_config(r.config_path);
  if (r.epochs) {
    if (*r.epochs < 1) throw UsageError("--epochs must be at least 1");
    c.train.epochs = *r.epochs;
  }
  if (r.batch_size) {
    if (*r.batch_size < 1) throw UsageError("--batch-size must be at least 1");
    c.train.batch_size = *r.batch_size;
  }
  if (r.lr) {
    if (!(*r.lr > 0)) throw UsageError("--lr must be positive");
    c.train.optimizer.lr = *r.lr;
  }
  if (r.seed) c.train.seed = *r.seed;
  if (r.threads) {
    if (*r.threads < 1) throw UsageError("--threads must be at least 1");
    c.train.threads = *r.threads;
  }
  if (r.data) c.data.train_path = c.data.test_path = *r.data;
  return c;
}

BackendOptions backend_options(const Config& c, const DeviceSpec& d) {
  BackendOptions o;
  o.threads = c.train.threads;
  if (d.backend == "cpu" && d.index > 0) o.threads = d.index;
  if (d.backend == "gpu" && d.index >= 0) o.device_index = d.index;
  o.deterministic = c.deterministic;
  o.tf32 = c.precision == "tf32";
  o.workspace_bytes = static_cast<size_t>(c.gpu_workspace_mb) << 20;
  return o;
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
  for (const SummaryRow& r : g.summary())
    rows.push_back({std::to_string(r.index), r.name, r.output.str(), format_count(r.params), si(r.flops)});
  rows.push_back({"", "total", "", format_count(g.parameter_count()), si(g.forward_flops())});
  return format_table({"#", "layer", "output", "params", "FLOPs/sample"}, rows);
}

std::string optimizer_text(const OptimizerConfig& o) {
  std::string s = fmt::format("{} lr {:g}", o.type, o.lr);
  if (o.type == "sgd" && o.momentum > 0) s += fmt::format(" momentum {:g}{}", o.momentum, o.nesterov ? " (nesterov)" : "");
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
  if (s.warmup_epochs) t += fmt::format(", {} warm-up epochs", s.warmup_epochs);
  return t;
}

}  // namespace

int run_train(const RunRequest& r) {
  Config config = load_config_with_overrides(r);
  Graph graph(config);  // checks the model before any data is read
  DataSplits data = load_data(config.data, config.input, static_cast<int>(graph.classes()));
  const DeviceSpec device = parse_device(r.devices.at(0));
  std::unique_ptr<Backend> backend = create_backend(device.backend, backend_options(config, device));
  std::unique_ptr<Loss> loss = make_loss(config.loss);

  if (!r.quiet) {
    fmt::print("tandem {} - {} ({}) on {}\n\n", TANDEM_VERSION, config.name, config.file, device.label);
    fmt::print("{}\n", format_pairs("Device", backend->info()));
    fmt::print("Model {}\n{}\n", config.name, model_table(graph));
    fmt::print("Data   {}: {} train / {} test samples of {}, {} classes\n", config.data.format,
               format_count(data.train.size()), format_count(data.test.size()),
               data.train.sample_shape.str(), graph.classes());
    fmt::print("Run    {} epoch{}, batch {}, {}, schedule {}, loss {}, seed {}\n\n",
               config.train.epochs, config.train.epochs == 1 ? "" : "s", config.train.batch_size, optimizer_text(config.train.optimizer),
               schedule_text(config.train.schedule), config.loss, config.train.seed);
    std::fflush(stdout);
  }

  graph.allocate(*backend, config.train.batch_size, config.train.seed);
  Batcher train_src(data.train, config.train.batch_size, config.train.shuffle, config.train.seed,
                    config.data.mean, config.data.std, config.train.drop_last);
  Batcher test_src(data.test, config.train.batch_size, false, config.train.seed, config.data.mean,
                   config.data.std);
  std::unique_ptr<MetricsWriter> metrics;
  if (!r.metrics_path.empty()) metrics = std::make_unique<MetricsWriter>(r.metrics_path);
  TrainOptions options;
  options.device_label = device.label;
  options.progress = !r.quiet;
  options.on_epoch = [&](const EpochStats& e) {
    if (metrics) metrics->write(e);
  };
  TrainResult result = train(config, graph, *loss, *backend, train_src, &test_src, options);
  const EpochStats& last = result.epochs.back();
  double seconds = 0;
  for (const auto& e : result.epochs) seconds += e.seconds;
  fmt::print("{}: test accuracy {:.2f}% (loss {:.4f}) after {} epoch{}, {} training, {} img/s\n",
             device.label, 100 * last.test_accuracy, last.test_loss, last.epoch, last.epoch == 1 ? "" : "s",
             format_duration(seconds), format_count(last.images_per_second));
  return 0;
}

int run_bench(const RunRequest& r) {
  Config config = load_config_with_overrides(r);
  Graph graph(config);
  const DeviceSpec device = parse_device(r.devices.at(0));
  std::unique_ptr<Backend> backend = create_backend(device.backend, backend_options(config, device));
  std::unique_ptr<Loss> loss = make_loss(config.loss);
  if (r.steps < 1 || r.warmup < 0) throw UsageError("--steps must be at least 1 and --warmup at least 0");
  const int64_t batch = config.train.batch_size;
  graph.allocate(*backend, batch, config.train.seed);
  BenchResult b = bench(graph, *loss, *backend, config.train.optimizer, batch, r.steps, r.warmup,
                        config.train.seed);
  if (r.json) {
    fmt::print(
        "{{\"device\": {}, \"config\": {}, \"batch_size\": {}, \"train_images_per_second\": {:.1f}, "
        "\"infer_images_per_second\": {:.1f}, \"train_ms_per_step\": {:.4f}, \"infer_ms_per_step\": "
        "{:.4f}, \"steps\": {}, \"warmup\": {}, \"threads\": {}}}\n",
        json_string(device.label), json_string(config.name), batch, b.train_images_per_second,
        b.infer_images_per_second, b.train_ms, b.infer_ms, b.steps, b.warmup,
        backend_options(config, device).threads);
    return 0;
  }
  if (!r.quiet) fmt::print("{}\n", format_pairs("Device", backend->info()));
  fmt::print("{} on {}, batch {}: median of {} steps after {} warm-up steps (not counted)\n",
             config.name, device.label, batch, b.steps, b.warmup);
  const double gflop = static_cast<double>(graph.forward_flops()) * static_cast<double>(batch) / 1e9;
  fmt::print("{}", format_table({"pass", "ms/step", "images/s", "GFLOP/s"},
                                {{"train", fmt::format("{:.2f}", b.train_ms), format_count(b.train_images_per_second),
                                  fmt::format("{:.1f}", 3 * gflop / (b.train_ms / 1e3))},
                                 {"infer", fmt::format("{:.2f}", b.infer_ms), format_count(b.infer_images_per_second),
                                  fmt::format("{:.1f}", gflop / (b.infer_ms / 1e3))}}));
  fmt::print("(training FLOPs counted as 3x forward)\n");
  return 0;
}

int run_devices(const RunRequest&) {
  std::unique_ptr<Backend> cpu = create_backend("cpu", BackendOptions{});
  fmt::print("{}\n", format_pairs("CPU", cpu->info()));
  std::fflush(stdout);
  print_gpu_devices(std::cout);
  std::cout.flush();
  return 0;
}

}  // namespace tandem
