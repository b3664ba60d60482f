// trainer bench: training and inference throughput per device and batch size, with the spread of
// the step times, the per-layer times and the input pipeline's rate.
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

namespace {

struct BenchRow {
  DeviceSpec device;
  int threads = 0;  // CPU threads of the run (a GPU's: the one that drives it)
  int64_t batch = 0;
  std::string reason;  // why it did not run; empty: it did
  BenchResult b;
  ArithmeticPeak peak;  // the backend's in the row's precision (gflops 0: not known)
  // A convolution of the run took a Winograd or FFT algorithm (fewer multiplications than the
  // direct sum the FLOP count assumes): its GFLOP/s and share of the peak can pass 100%.
  bool transformed = false;
  bool ran() const { return reason.empty(); }
};

// Whether a placement line names a Winograd or FFT convolution: oneDNN's jit_wino_* kernels,
// cuDNN's WINOGRAD, WINOGRAD_NONFUSED, FFT and FFT_TILING algorithms.
bool transformed_convolutions(const std::vector<std::string>& placement) {
  for (const std::string& line : placement)
    if (const std::string l = lower(line);
        l.find("wino") != std::string::npos || l.find("fft") != std::string::npos)
      return true;
  return false;
}

// A training step's arithmetic rate: 3x the forward FLOPs (forward, input and weight gradients).
double train_gflops(const BenchRow& row, int64_t forward_flops_per_sample) {
  return 3.0 * static_cast<double>(forward_flops_per_sample) * static_cast<double>(row.batch) /
         (row.b.train_ms * 1e6);
}

void print_layer_profile(const std::vector<LayerProfile>& rows, const std::string& device,
                         int64_t batch) {
  std::vector<Row> table;
  double fwd = 0, bwd = 0;
  auto gflops = [](double flops, double ms) {
    return ms > 0 && flops > 0 ? fmt::format("{:.1f}", flops / (ms * 1e6)) : std::string("-");
  };  // GFLOP/s, and GB/s of bytes
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerProfile& l = rows[i];
    fwd += l.forward_ms, bwd += l.backward_ms;
    const double f = static_cast<double>(l.flops);
    table.push_back({std::to_string(i + 1), l.name, fmt::format("{:.3f}", l.forward_ms),
                     fmt::format("{:.3f}", l.backward_ms), si(f), gflops(f, l.forward_ms),
                     gflops(2 * f, l.backward_ms),
                     gflops(static_cast<double>(l.bytes), l.forward_ms)});
  }
  table.push_back(
      {"", "total", fmt::format("{:.3f}", fwd), fmt::format("{:.3f}", bwd), "", "", "", ""});
  fmt::print(
      "\nPer layer on {}, batch {} (medians; synchronised around each layer, so the total "
      "exceeds a step's time):\n{}(backward FLOPs counted as 2x forward: input and weight "
      "gradients; fwd GB/s: the forward's input, output and weights moved once, over its time, "
      "the rate of a memory-bound layer such as a depthwise convolution)\n",
      device, batch,
      format_table(
          {"#", "layer", "fwd ms", "bwd ms", "FLOPs", "fwd GFLOP/s", "bwd GFLOP/s", "fwd GB/s"},
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

std::string bench_json(const BenchRow& row, const BenchRow* ref, const std::string& config,
                       int64_t forward_flops_per_sample) {
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
  const double gflops = train_gflops(row, forward_flops_per_sample);
  s += fmt::format(", \"train_gflops\": {:.2f}", gflops);
  if (row.peak.gflops > 0)
    s += fmt::format(", \"peak_gflops\": {:.1f}, \"percent_of_peak\": {:.1f}", row.peak.gflops,
                     100 * gflops / row.peak.gflops);
  s += ", \"peak_how\": " + json_string(row.peak.how);
  s += fmt::format(", \"transformed_convolutions\": {}", row.transformed);
  if (ref)
    s += fmt::format(", \"train_speedup\": {:.3f}, \"infer_speedup\": {:.3f}",
                     b.train_images_per_second / ref->b.train_images_per_second,
                     b.infer_images_per_second / ref->b.infer_images_per_second);
  return s + "}";
}

// The training step's GFLOP/s as a share of the backend's arithmetic peak: "78%", or "-".
std::string percent_of_peak(const BenchRow& row, int64_t forward_flops_per_sample) {
  if (!row.ran() || row.peak.gflops <= 0) return "-";
  return fmt::format("{:.0f}%",
                     100 * train_gflops(row, forward_flops_per_sample) / row.peak.gflops);
}

// Under the table: each device and precision's peak, and how it was found.
std::vector<std::string> peak_lines(const std::vector<BenchRow>& rows) {
  std::vector<std::string> out;
  for (const BenchRow& row : rows) {
    if (!row.ran()) continue;
    // "cpu fp32", whether or not the label already names the precision (a --precision list).
    const std::string& label = row.device.label;
    const std::string& precision = row.device.precision;
    const bool named =
        label.size() >= precision.size() &&
        label.compare(label.size() - precision.size(), precision.size(), precision) == 0;
    const std::string who = named ? label : label + " " + precision;
    const std::string line =
        row.peak.gflops > 0
            ? fmt::format("(of peak: the training GFLOP/s over {}'s peak of {:.1f} GFLOP/s, {})",
                          who, row.peak.gflops, row.peak.how)
            : fmt::format("(of peak: {}'s peak is {})", who, row.peak.how);
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
    const std::string transformed = fmt::format(
        "({}: convolutions ran Winograd or FFT algorithms (--log-placement names them), which "
        "do fewer multiplications than the direct sums counted here: its GFLOP/s and of peak "
        "can pass 100%)",
        who);
    if (row.transformed && std::find(out.begin(), out.end(), transformed) == out.end())
      out.push_back(transformed);
  }
  return out;
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
  for (const std::string& w : machine_warnings(config, devices, load_average(), allowed_cores()))
    spdlog::warn("{}", w);
  std::vector<Started> started = start_gpus(devices, options_of, config.precision);
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
        rows.push_back({device, threads_used(options, device), b, reason, {}, {}});
      continue;
    }
    if (text && !r.quiet)
      fmt::print("{}\n", format_pairs("Device", run_device_rows(*backend, device.precision.empty()
                                                                              ? config.precision
                                                                              : device.precision)));
    std::fflush(stdout);
    for (int64_t batch : batches) {
      BenchRow row{device, threads_used(options, device), batch, "", {}, {}};
      try {
        Config c = config;
        c.train.batch_size = batch;
        c.precision = device.precision;
        Graph graph(c);
        std::unique_ptr<Loss> loss = make_loss(c.loss, c.label_smoothing);
        graph.allocate(*backend, batch, c.train.seed);
        row.b = bench(graph, *loss, *backend, c.train.optimizer, batch, r.steps, r.warmup,
                      c.train.seed);
        row.peak = backend->arithmetic_peak(activation_dtype(parse_precision(c.precision)));
        row.transformed = transformed_convolutions(backend->placement_log());
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
      fmt::print("{}\n",
                 bench_json(row, reference_row(rows, row), config.name, model.forward_flops()));
    return exit_status(ran, rows.size());
  }

  std::vector<Row> table;
  std::vector<std::string> notes;
  for (const BenchRow& row : rows) {
    if (!row.ran()) {
      table.push_back({row.device.label, std::to_string(row.batch), "-", "-", "-", "-", "-", "-",
                       "-", "-", row.device.precision});
      const std::string note = row.device.label + ": not run: " + row.reason;
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
      continue;
    }
    const BenchResult& b = row.b;
    const BenchRow* ref = reference_row(rows, row);
    auto ratio = [&](double v, double base) {
      return ref ? fmt::format("{:.2f}x", v / base) : std::string("-");
    };
    table.push_back({row.device.label, std::to_string(row.batch), fmt::format("{:.2f}", b.train_ms),
                     fmt::format("{:.2f}-{:.2f}", b.train_spread.min, b.train_spread.max),
                     format_count(b.train_images_per_second),
                     format_count(b.infer_images_per_second),
                     fmt::format("{:.1f}", train_gflops(row, model.forward_flops())),
                     percent_of_peak(row, model.forward_flops()),
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
                                 "infer img/s", "train GFLOP/s", "of peak", "train speedup",
                                 "infer speedup", "precision"},
                                table));
  fmt::print("(speedups against {} at the same batch size; training FLOPs counted as 3x forward)\n",
             reference_device(rows));
  for (const std::string& line : peak_lines(rows)) fmt::print("{}\n", line);
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

}  // namespace tandem
