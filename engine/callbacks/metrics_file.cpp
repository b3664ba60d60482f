// The metrics file: its header, one line per epoch, and the step lines (engine/epoch_figures.h).
#include "engine/callbacks/metrics_file.h"

#include <fmt/format.h>

#include "engine/atomic_file.h"
#include "engine/epoch_figures.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/json_text.h"
#include "engine/report.h"

namespace tandem {

MetricsWriter::MetricsWriter(const std::string& path, bool val) : val_(val), path_(path) {
  csv_ = path.size() > 4 && path.substr(path.size() - 4) == ".csv";
  prepare_output_file(path, "--metrics", csv_ ? "metrics.csv" : "metrics.jsonl");
}

void MetricsWriter::open() {
  // Again at the first write: the path may have been replaced since the run started.
  if (const std::string why = output_problem(path_); !why.empty())
    throw UsageError("--metrics " + path_ + " " + why, "give a file name, e.g. metrics.csv");
  // The header and a resumed run's earlier epochs replace an old file whole (replace_file); the
  // epochs of this run are appended to it as they end.
  std::string start;
  if (csv_) {
    start = "device";
    for (const EpochFigure& f : epoch_figures())
      if ((f.outputs & kMetricsFile) && (f.when != EpochFigure::kWithValidation || val_))
        start += fmt::format(",{}", f.name);
    start += "\n";
  }
  for (const EpochStats& e : earlier_) start += line_text(e);
  const std::string failed = replace_file_with(path_, start);
  if (!failed.empty())
    throw UsageError("cannot write the metrics file '" + path_ + "': " + failed,
                     "check that its folder exists and is writable");
  out_.open(path_, std::ios::app);
  if (!out_)
    throw UsageError("cannot write the metrics file '" + path_ + "'",
                     "check that its folder exists and is writable");
}

void MetricsWriter::write(const EpochStats& e) {
  if (!out_.is_open()) open();
  line(e);
  out_.flush();
  if (!out_)
    throw UsageError("writing the metrics file '" + path_ + "' failed", "check the disk space");
}

void MetricsWriter::write_step(const LoggedStep& f) {
  if (!out_.is_open()) open();
  std::ofstream& out = csv_ ? steps_out_ : out_;
  if (csv_ && !steps_out_.is_open()) {
    const std::string path = path_.substr(0, path_.size() - 4) + ".steps.csv";
    const std::string header =
        "device,step,epoch,loss,accuracy,learning_rate,images_per_second,grad_norm\n";
    const std::string failed = replace_file_with(path, header);
    if (failed.empty()) steps_out_.open(path, std::ios::app);
    if (!failed.empty() || !steps_out_)
      throw UsageError(
          "cannot write the metrics file '" + path + "'" + (failed.empty() ? "" : ": " + failed),
          "check that its folder is writable");
  }
  if (csv_)
    out << fmt::format("{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.1f},{}\n", f.device, f.step, f.epoch,
                       f.loss, f.accuracy, f.learning_rate, f.images_per_second,
                       f.grad_norm >= 0 ? fmt::format("{:.6g}", f.grad_norm) : "");
  else
    // A window of only skipped steps has no mean loss or accuracy: null, not nan (not JSON).
    out << fmt::format(
        "{{\"device\": {}, \"step\": {}, \"epoch\": {}, \"loss\": {}, \"accuracy\": {}, "
        "\"learning_rate\": {}, \"images_per_second\": {}{}{}}}\n",
        json_string(f.device), f.step, json_number(f.epoch), json_number(f.loss),
        json_number(f.accuracy), json_number(f.learning_rate),
        json_number(f.images_per_second, "{:.1f}"),
        f.grad_norm >= 0 ? ", \"grad_norm\": " + json_number(f.grad_norm) : "",
        f.loss_scale > 0 ? ", \"loss_scale\": " + json_number(f.loss_scale, "{:g}") : "");
  out.flush();
  if (!out)
    throw UsageError("writing the metrics file '" + path_ + "' failed", "check the disk space");
}

std::string MetricsWriter::line_text(const EpochStats& e) const {
  // The figures of the table (engine/epoch_figures.h), in its order. CSV: a cell each, empty
  // where the epoch has no such figure (no validation pass that epoch); JSON: a key each where
  // it has one.
  std::string out = csv_ ? e.device : "{\"device\": " + json_string(e.device);
  for (const EpochFigure& f : epoch_figures()) {
    if (!(f.outputs & kMetricsFile)) continue;
    if (f.when == EpochFigure::kWithValidation && !val_ && csv_) continue;
    const bool has = has_figure(e, f);
    if (!csv_ && !has) continue;
    std::string value;
    if (has && f.real)
      value =
          csv_ ? fmt::format(fmt::runtime(f.format), e.*f.real) : json_number(e.*f.real, f.format);
    else if (has)
      value = f.count ? std::to_string(e.*f.count) : std::to_string(e.*f.bytes);
    out += csv_ ? "," + value : fmt::format(", \"{}\": {}", f.name, value);
  }
  return out + (csv_ ? "\n" : "}\n");
}

void MetricsWriter::line(const EpochStats& e) { out_ << line_text(e); }

}  // namespace tandem
