// The table of an epoch's figures (epoch_figures.h).
#include "engine/epoch_figures.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/progress.h"

namespace tandem {

const std::vector<EpochFigure>& epoch_figures() {
  using F = EpochFigure;
  constexpr unsigned kFiles = kMetricsFile | kHistory;
  constexpr unsigned kAll = kMetricsFile | kHistory | kTensorBoard;
  static const std::vector<EpochFigure> figures = {
      {"epoch", nullptr, &EpochStats::epoch, nullptr, "", kFiles},
      {"train_loss", &EpochStats::train_loss},
      {"train_accuracy", &EpochStats::train_accuracy},
      {"test_loss", &EpochStats::test_loss, nullptr, nullptr, "{:.6g}", kAll, F::kWithTest,
       "test_loss", Shown::kLoss, 3},
      {"test_accuracy", &EpochStats::test_accuracy, nullptr, nullptr, "{:.6g}", kAll, F::kWithTest,
       "test_acc", Shown::kAccuracy, 4},
      {"seconds", &EpochStats::seconds, nullptr, nullptr, "{:.4f}", kFiles},
      {"images_per_second", &EpochStats::images_per_second, nullptr, nullptr, "{:.1f}"},
      {"learning_rate", &EpochStats::learning_rate},
      // The history writes it second, after the device (its format since version 1).
      {"peak_memory_bytes", nullptr, nullptr, &EpochStats::peak_memory_bytes, "", kMetricsFile,
       F::kAlways, "peak mem", Shown::kBytes, 5},
      {"skipped_steps", nullptr, &EpochStats::skipped_steps, nullptr, "", kFiles},
      {"val_loss", &EpochStats::val_loss, nullptr, nullptr, "{:.6g}", kAll, F::kWithValidation,
       "val_loss", Shown::kLoss, 1},
      {"val_accuracy", &EpochStats::val_accuracy, nullptr, nullptr, "{:.6g}", kAll,
       F::kWithValidation, "val_acc", Shown::kAccuracy, 2},
      {"loss_scale", &EpochStats::loss_scale, nullptr, nullptr, "{:g}", kTensorBoard,
       F::kWithLossScaling, "loss scale", Shown::kLossScale, 6},
  };
  return figures;
}

bool has_figure(const EpochStats& e, const EpochFigure& f) {
  switch (f.when) {
    case EpochFigure::kWithTest:
      return e.has_test;
    case EpochFigure::kWithValidation:
      return e.has_val;
    case EpochFigure::kWithLossScaling:
      return e.loss_scale > 0;
    default:
      return true;
  }
}

double figure_value(const EpochStats& e, const EpochFigure& f) {
  if (f.real) return e.*f.real;
  if (f.count) return static_cast<double>(e.*f.count);
  return static_cast<double>(e.*f.bytes);
}

std::vector<std::string> progress_fields(const EpochStats& e) {
  std::vector<const EpochFigure*> shown;
  for (const EpochFigure& f : epoch_figures())
    if (f.shown_at > 0 && has_figure(e, f)) shown.push_back(&f);
  std::sort(shown.begin(), shown.end(),
            [](const EpochFigure* a, const EpochFigure* b) { return a->shown_at < b->shown_at; });
  std::vector<std::string> fields;
  for (const EpochFigure* f : shown) {
    const double v = figure_value(e, *f);
    std::string text;
    switch (f->shown) {
      case Shown::kLoss:
        text = format_loss(v);
        break;
      case Shown::kAccuracy:
        text = format_accuracy(v);
        break;
      case Shown::kBytes:
        text = format_bytes(e.*f->bytes);
        break;
      case Shown::kLossScale:
        text = format_loss_scale(v);
        if (e.overflow_steps)
          text += fmt::format(" ({} overflowed step{} skipped)", e.overflow_steps,
                              e.overflow_steps == 1 ? "" : "s");
        break;
    }
    fields.push_back(std::string(f->label) + " " + text);
  }
  return fields;
}

}  // namespace tandem
