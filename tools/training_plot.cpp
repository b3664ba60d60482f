// The training plot: one colour per run, train solid, test dashed, validation dotted, logged
// steps as thin lines; each run its glyph and line width, so that runs that agree stay visible.
#include "tools/training_plot.h"

#include <algorithm>
#include <cmath>

#include "tools/plot.h"

namespace tandem {

std::vector<PlotPanel> training_panels(const std::string& config_name,
                                       const std::vector<PlotRun>& runs) {
  PlotPanel loss{config_name + ": loss", "epoch", "loss", {}, false};
  PlotPanel acc{config_name + ": accuracy", "epoch", "accuracy (%)", {}, false};
  PlotPanel speed{config_name + ": training throughput", "epoch", "images/s", {}, false, true};
  bool any_val = false;
  for (const PlotRun& r : runs) {
    for (const EpochStats& e : r.epochs) any_val = any_val || e.has_val;
  }
  for (size_t k = 0; k < runs.size(); ++k) {
    const PlotRun& r = runs[k];
    const int color = static_cast<int>(k), run = static_cast<int>(k);
    if (!r.ran) {  // its legend entry says so
      PlotSeries none{r.label + " (not run)", {}, {}, color, false, run};
      loss.series.push_back(none), acc.series.push_back(none), speed.series.push_back(none);
      continue;
    }
    PlotSeries train{r.label + " train", {}, {}, color, false, run};
    PlotSeries test = train, val = train;
    test.label = r.label + " test";
    test.dashed = true;
    val.label = r.label + " val";
    val.dotted = true;
    PlotSeries train_acc = train, test_acc = test, val_acc = val, ips = train;
    ips.label = r.label;
    for (const EpochStats& e : r.epochs) {
      const double x = static_cast<double>(e.epoch);
      for (PlotSeries* s : {&train, &test, &train_acc, &test_acc, &ips}) s->x.push_back(x);
      train.y.push_back(e.train_loss), test.y.push_back(e.test_loss);
      train_acc.y.push_back(100 * e.train_accuracy), test_acc.y.push_back(100 * e.test_accuracy);
      ips.y.push_back(e.images_per_second);
      if (e.has_val) {
        val.x.push_back(x), val_acc.x.push_back(x);
        val.y.push_back(e.val_loss), val_acc.y.push_back(100 * e.val_accuracy);
      }
    }
    loss.series.push_back(train), loss.series.push_back(test);
    acc.series.push_back(train_acc), acc.series.push_back(test_acc);
    if (any_val) loss.series.push_back(val), acc.series.push_back(val_acc);
    speed.series.push_back(ips);
    if (!r.steps.empty()) {
      PlotSeries step_loss{r.label + " steps", {}, {}, color, false, run};
      step_loss.points = false;
      PlotSeries step_acc = step_loss, step_ips = step_loss;
      for (const LoggedStep& s : r.steps) {
        for (PlotSeries* p : {&step_loss, &step_acc, &step_ips}) p->x.push_back(s.epoch);
        step_loss.y.push_back(s.loss);
        step_acc.y.push_back(100 * s.accuracy);
        step_ips.y.push_back(s.images_per_second);
      }
      loss.series.push_back(step_loss), acc.series.push_back(step_acc);
      speed.series.push_back(step_ips);
    }
    // Between two epochs' points, or inside the epoch it resumed.
    if (r.resumed_at >= 0)
      for (PlotPanel* p : {&loss, &acc, &speed})
        p->marks.push_back(
            {r.resumed_at == std::floor(r.resumed_at) ? r.resumed_at + 0.5 : r.resumed_at,
             runs.size() > 1 ? r.label + " resumed" : "resumed"});
  }
  return {loss, acc, speed};
}

void draw_training_plot(const std::string& path, const std::string& config_name,
                        const std::vector<PlotRun>& runs) {
  const std::vector<PlotPanel> panels = training_panels(config_name, runs);
  // Each legend row takes room from the panels: the picture grows with them.
  size_t most = 0;
  for (const PlotPanel& p : panels) most = std::max(most, p.series.size());
  const int rows = static_cast<int>((most + 1) / 2);
  write_plot(path, panels, 1800, 500 + 30 * std::max(0, rows - 2));
}

TrainingPlot::TrainingPlot(std::string path, std::string config_name)
    : path_(std::move(path)), config_name_(std::move(config_name)) {
  check_plot_path(path_);
}

void TrainingPlot::start_run(const std::string& label) {
  PlotRun r;
  r.label = label;
  r.ran = false;  // until its first epoch
  runs_.push_back(std::move(r));
}

void TrainingPlot::resumed(std::vector<EpochStats> earlier, double into_epoch) {
  if (runs_.empty()) return;
  runs_.back().resumed_at = static_cast<double>(earlier.size()) + into_epoch;
  runs_.back().epochs = std::move(earlier);
}

void TrainingPlot::epoch_end(const EpochEnd& e) {
  if (runs_.empty()) return;
  runs_.back().epochs.push_back(e.stats);
  runs_.back().ran = true;
  draw();
}

void TrainingPlot::logged(const LoggedStep& s) {
  if (!runs_.empty()) runs_.back().steps.push_back(s);
}

void TrainingPlot::draw() const { draw_training_plot(path_, config_name_, runs_); }

}  // namespace tandem
