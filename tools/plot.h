// PNG plots (--plot FILE.png) through PLplot: curves per device, in one or more panels.
#pragma once

#include <string>
#include <vector>

namespace tandem {

struct PlotSeries {
  std::string label;  // in the legend (a series without points still gets its entry)
  std::vector<double> x, y;
  int color = 0;        // 0, 1, ...: one colour per device (or run label)
  bool dashed = false;  // e.g. test curves beside solid train curves
  // 0, 1, ...: the glyph of the points and the line's width (each later run a narrower line and
  // another glyph), so that the curves of runs that agree stay visible on top of each other.
  int run = 0;
  bool dotted = false;  // a third style, long dashes (validation curves)
  bool points = true;   // false: a line only (per-step curves, too many points for glyphs)
};

// A vertical line across a panel at x, labelled (a resumed run's first epoch).
struct PlotMark {
  double x = 0;
  std::string label;
};

struct PlotPanel {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
  bool log2_x = false;       // batch sizes 16, 64, 256 evenly spaced
  bool y_from_zero = false;  // throughput and speedup axes start at 0
  std::vector<PlotMark> marks = {};
};

// The glyph of a series' points, in the plot and in the legend: filled on solid curves (train),
// hollow on dashed ones (test), half filled on dotted ones (validation); each run its shape
// (circle, square, triangle, diamond), so that runs whose points coincide show both.
const char* point_glyph(const PlotSeries& s);

// Throws UsageError unless `path` can take a plot: a .png name in a writable folder (created when
// missing), and a build with plotting. Checked before a long run, so that it cannot fail at its
// end.
void check_plot_path(const std::string& path);

// Draws the panels side by side into a width x height PNG; throws UsageError when the file
// cannot be written.
void write_plot(const std::string& path, const std::vector<PlotPanel>& panels, int width = 1200,
                int height = 500);

}  // namespace tandem
