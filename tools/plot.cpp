// PLplot's cairo PNG driver draws the axes, ticks, labels and legends; we only lay out panels.
#include "tools/plot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#ifdef TANDEM_WITH_PLPLOT
#include <plplot.h>
#endif

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "engine/report.h"
#include "engine/text.h"

namespace tandem {

#ifdef TANDEM_WITH_PLPLOT
namespace {

// cmap0: 0 the white background, 1 black for axes and text, 2 grey for marks, then the run
// colours (matplotlib's tab10: blue, orange, green, red, purple, brown, pink, olive, cyan).
constexpr int kMarkColor = 2, kFirstSeriesColor = 3;
const PLINT kRed[] = {255, 0, 140, 31, 255, 44, 214, 148, 140, 227, 188, 23};
const PLINT kGreen[] = {255, 0, 140, 119, 127, 160, 39, 103, 86, 119, 189, 190};
const PLINT kBlue[] = {255, 0, 140, 180, 14, 44, 40, 189, 75, 194, 34, 207};
constexpr int kColors = sizeof(kRed) / sizeof(kRed[0]);

// Text height, relative to PLplot's default, and the points' glyphs relative to the text.
constexpr double kTextScale = 0.9, kPointScale = 0.6;

int series_color(int device) { return kFirstSeriesColor + device % (kColors - kFirstSeriesColor); }

// PLplot calls this on a fatal error, then exit() with what it returns; tandem's checks before
// drawing should leave it nothing to find, so this says what failed and exits non-zero.
std::string plot_in_progress;
int plot_failed(const char* message) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "\nerror: drawing the plot %s failed: %s\nhint: check that its folder is "
               "writable and has free space\n",
               plot_in_progress.c_str(), message);
  return static_cast<int>(ExitCode::kUsage);
}

// Tick labels of the y axis, written here rather than by PLplot: PLplot moves a common power of
// ten into a "(x10^4)" label at the top of the axis, where it runs into the panel's title.
struct TickFormat {
  double step = 1, unit = 1;  // unit 1e3 or 1e6 with suffix "k" or "M"
  const char* suffix = "";
  int decimals = 0;
};

void format_tick(PLINT, PLFLT value, char* label, PLINT length, PLPointer data) {
  const TickFormat& f = *static_cast<const TickFormat*>(data);
  if (std::fabs(value) < f.step / 2)  // "0.0", not "-0.0"; "0", not "0k"
    std::snprintf(label, static_cast<size_t>(length), "%.*f", f.decimals, 0.0);
  else
    std::snprintf(label, static_cast<size_t>(length), "%.*f%s", f.decimals, value / f.unit,
                  f.suffix);
}

// A tick step of 1, 2 or 5 times a power of ten, at most 7.5 steps over `span` (as PLplot's).
double tick_step(double span) {
  const double base = std::pow(10.0, std::floor(std::log10(span / 7)));
  for (double m : {1.0, 2.0, 5.0})
    if (span / (m * base) <= 7.5) return m * base;
  return 10 * base;
}

// Each later run a narrower line, drawn over the earlier ones: the earlier colour shows at both
// edges of a later curve that lies on it.
double line_width(const PlotSeries& s) {
  if (!s.points) return std::max(0.6, 1.6 - 0.8 * (s.run % 2));  // per-step curves: thin
  return std::max(0.8, 3.0 - 0.9 * (s.run % 3));
}

// The legend's line samples, in fractions of the panel's width: long enough to show two or three
// of the long dashes of a validation curve beside the short ones of a test curve.
constexpr double kLegendSample = 0.16;

// PLplot's line styles: 1 solid, 2 short dashes, 3 long dashes (validation).
PLINT line_style(const PlotSeries& s) { return s.dotted ? 3 : s.dashed ? 2 : 1; }

// The legend has two columns, or one where a label is too long for two to fit in a panel of 600
// pixels; every panel of a plot leaves room for as many rows as the fullest.
int legend_columns(const PlotPanel& p) {
  size_t longest = 0;
  for (const PlotSeries& s : p.series) longest = std::max(longest, s.label.size());
  return p.series.size() > 1 && longest <= 16 ? 2 : 1;
}
int legend_rows(const PlotPanel& p) {
  const int columns = legend_columns(p);
  return (static_cast<int>(p.series.size()) + columns - 1) / columns;
}

void draw_panel(const PlotPanel& p, int rows) {
  auto tx = [&](double x) { return p.log2_x ? std::log2(x) : x; };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  // The x range of every point, drawn or not (a device that did not run keeps the batch axis).
  bool drawn = false;
  for (const PlotSeries& s : p.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      x0 = std::min(x0, tx(s.x[i])), x1 = std::max(x1, tx(s.x[i]));
      if (!std::isfinite(s.y[i])) continue;
      y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
      drawn = true;
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (!drawn) y0 = 0, y1 = 1;
  if (p.y_from_zero) y0 = std::min(y0, 0.0);
  if (x1 - x0 < 1e-9) x0 -= 0.5, x1 += 0.5;  // one epoch: in the middle
  const double ypad = std::max((y1 - y0) * 0.08, std::max(std::fabs(y1), 1e-6) * 0.02);
  y0 = p.y_from_zero && y0 >= 0 ? 0 : y0 - ypad;
  y1 += ypad;
  const double xpad = (x1 - x0) * 0.06;  // the points at either end clear the box

  pladv(0);
  // The box within the panel (millimetres): the y tick labels and label at its left, the title
  // above, and below it the x tick labels, the x label and the legend (outside the box, it hides
  // no point).
  PLFLT default_height = 0, ch = 0, sx0 = 0, sx1 = 0, sy0 = 0, sy1 = 0;
  plgchr(&default_height, &ch);
  plgspa(&sx0, &sx1, &sy0, &sy1);
  const double box_bottom = (5.3 + 1.6 * rows) * ch, box_top = (sy1 - sy0) - 4.5 * ch;
  plsvpa(8 * ch, (sx1 - sx0) - 3 * ch, box_bottom, box_top);  // 11 ch narrower than the panel
  plwind(x0 - xpad, x1 + xpad, y0, y1);
  plcol0(1);
  pllsty(1);
  // Whole-number x values (epochs, log2 of batch sizes) get whole-number ticks; a log2 axis is
  // labelled with the batch sizes themselves.
  bool whole = true;
  for (const PlotSeries& s : p.series)
    for (double x : s.x) whole = whole && tx(x) == std::floor(tx(x));
  const double xtick = whole ? std::max(1.0, std::ceil((x1 - x0) / 10)) : 0.0;
  TickFormat ticks;
  ticks.step = tick_step(y1 - y0);
  const double largest = std::max(std::fabs(y0), std::fabs(y1));
  if (largest >= 1e7)
    ticks.unit = 1e6, ticks.suffix = "M";
  else if (largest >= 1e4)
    ticks.unit = 1e3, ticks.suffix = "k";
  ticks.decimals =
      std::max(0, static_cast<int>(std::ceil(-std::log10(ticks.step / ticks.unit) - 1e-9)));
  plslabelfunc(format_tick, &ticks);
  plbox(p.log2_x ? "bcst" : "bcnst", xtick, whole ? 1 : 0, "bcnstvo", ticks.step, 0);
  plslabelfunc(nullptr, nullptr);
  if (p.log2_x)
    for (double t = std::ceil(x0); t <= x1 + 1e-9; t += 1)
      plmtex("b", 1.5, (t - (x0 - xpad)) / (x1 - x0 + 2 * xpad), 0.5,
             std::to_string(static_cast<long long>(std::llround(std::exp2(t)))).c_str());
  pllab(p.x_label.c_str(), p.y_label.c_str(), p.title.c_str());
  if (!drawn) plmtex("t", -12.0, 0.5, 0.5, "nothing to show: no device ran here");

  std::vector<PLINT> opts, colors, styles, symbol_numbers;
  std::vector<PLFLT> widths, symbol_scales;
  std::vector<const char*> texts, symbols;
  for (const PlotSeries& s : p.series) {
    std::vector<PLFLT> xs, ys;  // the points that have a value
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i])) xs.push_back(tx(s.x[i])), ys.push_back(s.y[i]);
    const PLINT n = static_cast<PLINT>(xs.size());
    const int color = series_color(s.color);
    plcol0(color);
    plwidth(line_width(s));
    pllsty(line_style(s));
    if (n > 1) plline(n, xs.data(), ys.data());
    // Every point gets its glyph: one epoch has no line to see.
    plschr(0, kPointScale * kTextScale);
    if (n > 0 && (s.points || n == 1)) plstring(n, xs.data(), ys.data(), point_glyph(s));
    plschr(0, kTextScale);
    opts.push_back(n > 0 && s.points ? PL_LEGEND_LINE | PL_LEGEND_SYMBOL : PL_LEGEND_LINE);
    colors.push_back(color);
    styles.push_back(line_style(s));
    widths.push_back(line_width(s));
    symbols.push_back(point_glyph(s));
    symbol_scales.push_back(kPointScale);
    symbol_numbers.push_back(2);
    texts.push_back(s.label.c_str());
  }
  plwidth(1.0);
  // Marks: a grey dashed vertical line, its label above the box.
  for (const PlotMark& m : p.marks) {
    const double x = tx(m.x);
    plcol0(kMarkColor);
    pllsty(3);
    const PLFLT mx[2] = {x, x}, my[2] = {y0, y1};
    plline(2, mx, my);
    plcol0(1);
    // Above the box, over the line: off the curves.
    plschr(0, 0.8 * kTextScale);
    plmtex("t", 0.6, (x - (x0 - xpad)) / (x1 - x0 + 2 * xpad), 0.5, m.label.c_str());
    plschr(0, kTextScale);
  }
  pllsty(1);
  if (p.series.empty()) return;
  std::vector<PLINT> text_colors(p.series.size(), 1);
  // Below the x label, centred in the panel (the box is off-centre: its y labels take more room
  // than the right margin); offsets are in fractions of the box's width and height.
  const double box_width = (sx1 - sx0) - 11 * ch;
  const double left = -2.5 * ch / box_width, below = 3.9 * ch / (box_top - box_bottom);
  PLFLT legend_w = 0, legend_h = 0;
  pllegend(&legend_w, &legend_h, PL_LEGEND_ROW_MAJOR, PL_POSITION_OUTSIDE | PL_POSITION_BOTTOM,
           left, below, kLegendSample, 0, 1, 1, legend_rows(p), legend_columns(p),
           static_cast<PLINT>(p.series.size()), opts.data(), 1.0, 0.8, 2.0, 0.0, text_colors.data(),
           texts.data(), nullptr, nullptr, nullptr, nullptr, colors.data(), styles.data(),
           widths.data(), colors.data(), symbol_scales.data(), symbol_numbers.data(),
           symbols.data());
}

}  // namespace

const char* point_glyph(const PlotSeries& s) {
  static const char* const filled[] = {"●", "■", "▲", "◆"};
  static const char* const hollow[] = {"○", "□", "△", "◇"};
  static const char* const half[] = {"◐", "◧", "◭", "◈"};
  const int k = s.run % 4;
  return s.dotted ? half[k] : s.dashed ? hollow[k] : filled[k];
}

void check_plot_path(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext != ".png")
    throw UsageError("--plot " + path + ": plots are PNG files", "give a name ending in .png");
  prepare_output_file(path, "--plot", "plot.png");
}

void write_plot(const std::string& path, const std::vector<PlotPanel>& panels, int width,
                int height) {
  check_plot_path(path);
  plot_in_progress = path;
  // Drawn under a temporary name of this process's own and renamed (replace_file_by_name), so
  // that the path holds a whole plot or none, and two runs drawing one plot each rename a whole
  // file into place.
  const std::string failed = replace_file_by_name(path, [&](const std::string& tmp) {
    // A fresh stream per plot: PLplot keeps global state per stream.
    PLINT previous = 0, stream = 0;
    plgstrm(&previous);
    plmkstrm(&stream);
    plsexit(plot_failed);
    plsdev("pngcairo");
    plsfnam(tmp.c_str());
    plspage(0, 0, width, height, 0, 0);
    plscmap0(kRed, kGreen, kBlue, kColors);
    plssub(static_cast<PLINT>(std::max<size_t>(panels.size(), 1)), 1);
    plinit();
    plschr(0, kTextScale);
    int rows = 0;
    for (const PlotPanel& p : panels) rows = std::max(rows, legend_rows(p));
    for (const PlotPanel& p : panels) draw_panel(p, rows);
    plend1();
    plsstrm(previous);
    return true;  // an empty file counts as a failure
  });
  if (!failed.empty())
    throw UsageError("could not write the plot " + path + ": " + failed,
                     "check that the folder is writable (PLplot's pngcairo driver draws it)");
}

#else

void check_plot_path(const std::string& path) {
  throw UsageError("cannot draw " + path + ": this build has no plotting (PLplot was not found)",
                   "install libplplot-dev and plplot-driver-cairo (bash tools/setup.sh does), "
                   "then rebuild; or use --metrics FILE for the numbers");
}

void write_plot(const std::string& path, const std::vector<PlotPanel>&, int, int) {
  check_plot_path(path);
}

#endif

}  // namespace tandem
