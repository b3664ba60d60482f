// PLplot's cairo PNG driver draws the axes, ticks, labels and legends; we only lay out panels.
#include "tools/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#ifdef TANDEM_WITH_PLPLOT
#include <plplot.h>
#endif

#include "engine/error.h"
#include "engine/report.h"

namespace tandem {

#ifdef TANDEM_WITH_PLPLOT
namespace {

// cmap0: 0 the white background, 1 black for axes and text, then the device colours.
constexpr int kFirstSeriesColor = 2;
const PLINT kRed[] = {255, 0, 31, 255, 44, 214, 148, 140, 227};
const PLINT kGreen[] = {255, 0, 119, 127, 160, 39, 103, 86, 119};
const PLINT kBlue[] = {255, 0, 180, 14, 44, 40, 189, 75, 194};
constexpr int kColors = sizeof(kRed) / sizeof(kRed[0]);

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

void draw_panel(const PlotPanel& p) {
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
  if (x1 - x0 < 1e-9) x0 -= 0.5, x1 += 0.5;
  const double ypad = std::max((y1 - y0) * 0.08, std::max(std::fabs(y1), 1e-6) * 0.02);
  y0 = p.y_from_zero && y0 >= 0 ? 0 : y0 - ypad;
  y1 += ypad;
  const double xpad = (x1 - x0) * 0.04;

  pladv(0);
  plvsta();
  plwind(x0 - xpad, x1 + xpad, y0, y1);
  plcol0(1);
  pllsty(1);
  // Whole-number x values (epochs, log2 of batch sizes) get whole-number ticks; a log2 axis is
  // labelled with the batch sizes themselves.
  bool whole = true;
  for (const PlotSeries& s : p.series)
    for (double x : s.x) whole = whole && tx(x) == std::floor(tx(x));
  const double xtick = whole ? std::max(1.0, std::ceil((x1 - x0) / 10)) : 0.0;
  plbox(p.log2_x ? "bcst" : "bcnst", xtick, whole ? 1 : 0, "bcnstv", 0, 0);
  if (p.log2_x)
    for (double t = std::ceil(x0); t <= x1 + 1e-9; t += 1)
      plmtex("b", 1.5, (t - (x0 - xpad)) / (x1 - x0 + 2 * xpad), 0.5,
             std::to_string(static_cast<long long>(std::llround(std::exp2(t)))).c_str());
  pllab(p.x_label.c_str(), p.y_label.c_str(), p.title.c_str());
  if (!drawn) plmtex("t", -12.0, 0.5, 0.5, "nothing to show: no device ran here");

  std::vector<PLINT> opts, colors, styles;
  std::vector<PLFLT> widths;
  std::vector<const char*> texts;
  int corner_points[4] = {0, 0, 0, 0};  // top right, top left, bottom right, bottom left
  for (const PlotSeries& s : p.series) {
    std::vector<PLFLT> xs, ys;  // the points that have a value
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i])) xs.push_back(tx(s.x[i])), ys.push_back(s.y[i]);
    const size_t n = xs.size();
    // Where the curve runs, sampled along each segment, for placing the legend.
    for (size_t i = 0; i < n; ++i)
      for (int k = 0; k < (i + 1 < n ? 16 : 1); ++k) {
        const double f = k / 16.0;
        const double x = i + 1 < n ? xs[i] + f * (xs[i + 1] - xs[i]) : xs[i];
        const double y = i + 1 < n ? ys[i] + f * (ys[i + 1] - ys[i]) : ys[i];
        ++corner_points[(y > (y0 + y1) / 2 ? 0 : 2) + (x > (x0 + x1) / 2 ? 0 : 1)];
      }
    const int color = series_color(s.color);
    plcol0(color);
    plwidth(2.0);
    pllsty(s.dashed ? 2 : 1);
    if (n > 1) plline(static_cast<PLINT>(n), xs.data(), ys.data());
    plpoin(static_cast<PLINT>(n), xs.data(), ys.data(), s.dashed ? 4 : 17);  // circle / dot
    opts.push_back(PL_LEGEND_LINE);
    colors.push_back(color);
    styles.push_back(s.dashed ? 2 : 1);
    widths.push_back(2.0);
    texts.push_back(s.label.c_str());
  }
  plwidth(1.0);
  pllsty(1);
  if (p.series.empty()) return;
  std::vector<PLINT> text_colors(p.series.size(), 1);
  // The legend goes into the corner with the fewest points.
  const int corner = static_cast<int>(std::min_element(corner_points, corner_points + 4) - corner_points);
  const PLINT position = PL_POSITION_INSIDE | (corner < 2 ? PL_POSITION_TOP : PL_POSITION_BOTTOM) |
                         (corner % 2 == 0 ? PL_POSITION_RIGHT : PL_POSITION_LEFT);
  PLFLT legend_w = 0, legend_h = 0;
  pllegend(&legend_w, &legend_h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, position, 0.02,
           0.02, 0.08, 0, 1, 1, 0, 0, static_cast<PLINT>(p.series.size()), opts.data(), 1.0, 0.8,
           2.0, 0.0, text_colors.data(), texts.data(), nullptr, nullptr, nullptr, nullptr,
           colors.data(), styles.data(), widths.data(), nullptr, nullptr, nullptr, nullptr);
}

}  // namespace

void check_plot_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::path(path).extension() != ".png")
    throw UsageError("--plot " + path + ": plots are PNG files", "give a name ending in .png");
  prepare_output_file(path, "--plot", "plot.png");
}

void write_plot(const std::string& path, const std::vector<PlotPanel>& panels, int width,
                int height) {
  namespace fs = std::filesystem;
  check_plot_path(path);
  std::error_code ec;
  // Drawn under a temporary name and renamed, so that the path holds a whole plot or none.
  const fs::path out(path);
  const fs::path tmp = out.parent_path() / fmt::format(".{}.tmp", out.filename().string());
  plot_in_progress = path;
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
  plschr(0, 0.9);
  for (const PlotPanel& p : panels) draw_panel(p);
  plend1();
  plsstrm(previous);
  if (fs::file_size(tmp, ec) == 0 || ec) {
    fs::remove(tmp, ec);
    throw UsageError("could not write the plot " + path,
                     "check that the folder is writable (PLplot's pngcairo driver draws it)");
  }
  fs::rename(tmp, out, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw UsageError("could not write the plot " + path + ": " + ec.message(),
                     "check that the folder is writable");
  }
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
