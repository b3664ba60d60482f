// The table of an epoch's figures (epoch_figures.h).
#include "engine/epoch_figures.h"

namespace tandem {

const std::vector<EpochFigure>& epoch_figures() {
  using F = EpochFigure;
  constexpr unsigned kFiles = kMetricsFile | kHistory;
  static const std::vector<EpochFigure> figures = {
      {"epoch", nullptr, &EpochStats::epoch, nullptr, "", kFiles},
      {"train_loss", &EpochStats::train_loss},
      {"train_accuracy", &EpochStats::train_accuracy},
      {"test_loss", &EpochStats::test_loss},
      {"test_accuracy", &EpochStats::test_accuracy},
      {"seconds", &EpochStats::seconds, nullptr, nullptr, "{:.4f}", kFiles},
      {"images_per_second", &EpochStats::images_per_second, nullptr, nullptr, "{:.1f}"},
      {"learning_rate", &EpochStats::learning_rate},
      // The history writes it second, after the device (its format since version 1).
      {"peak_memory_bytes", nullptr, nullptr, &EpochStats::peak_memory_bytes, "", kMetricsFile},
      {"skipped_steps", nullptr, &EpochStats::skipped_steps, nullptr, "", kFiles},
      {"val_loss", &EpochStats::val_loss, nullptr, nullptr, "{:.6g}",
       kMetricsFile | kHistory | kTensorBoard, F::kWithValidation},
      {"val_accuracy", &EpochStats::val_accuracy, nullptr, nullptr, "{:.6g}",
       kMetricsFile | kHistory | kTensorBoard, F::kWithValidation},
      {"loss_scale", &EpochStats::loss_scale, nullptr, nullptr, "{:g}", kTensorBoard,
       F::kWithLossScaling},
  };
  return figures;
}

bool has_figure(const EpochStats& e, const EpochFigure& f) {
  switch (f.when) {
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

}  // namespace tandem
