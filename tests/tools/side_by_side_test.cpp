// Side-by-side runs over a device list, their table, parity verdict, metrics, exit status and
// plots.
#include <gtest/gtest.h>
#include <stb/stb_image.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/parity.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"
#include "tools/plot.h"
#include "tools/runner.h"
#include "tools/training_plot.h"

namespace tandem {
namespace {

using test::run_trainer;

// A model small enough to train twice in well under a second.
std::string small_config() {
  return test::write_temp_file("side_by_side.yaml", test::small_model_yaml("small") + R"(train:
  {epochs: 2, batch_size: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}, seed: 5}
)");
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Output with its filled lines joined again: every run of spaces and line breaks one space.
std::string unfilled(const std::string& out) {
  return std::regex_replace(out, std::regex("\\s+"), " ");
}

// What a run prints to a file or a pipe fits 80 columns: the tables, the notes, the result lines
// (warnings, on stderr, are a line each: a busy machine's may come first).
void expect_fits_80_columns(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.starts_with("warning: ")) EXPECT_LE(line.size(), 80u) << line;
}

bool gpu_usable() {
  register_everything();
  return tandem::gpu_usable(nullptr);
}

TEST(SideBySide, TwoCpuThreadCountsGiveOneTableThatAgrees) {
  const std::string metrics = ::testing::TempDir() + "side_by_side.jsonl";
  auto r = run_trainer("--config " + small_config() + " --device cpu:1,cpu:2 --quiet --metrics " +
                       metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_NE(r.out.find("Side by side (speedup and parity against cpu:1)"), std::string::npos)
      << r.out;
  for (const char* column : {"s/epoch", "images/s", "test acc", "peak mem", "speedup", "parity"})
    EXPECT_NE(r.out.find(column), std::string::npos) << column;
  EXPECT_NE(r.out.find("reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu:2 vs cpu:1: agree"), std::string::npos) << r.out;
  expect_fits_80_columns(r.out);
  EXPECT_TRUE(
      std::regex_search(unfilled(r.out), std::regex("images/s and speedup leave out each device's "
                                                    "first step \\(cpu:1 [0-9]+ ms, cpu:2 [0-9]+ "
                                                    "ms: primitive creation")))
      << r.out;
  std::vector<std::string> lines = lines_of(metrics);
  ASSERT_EQ(lines.size(), 4u);  // two epochs on each device, in run order
  EXPECT_NE(lines[0].find("\"device\": \"cpu:1\", \"epoch\": 1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"device\": \"cpu:1\", \"epoch\": 2"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("\"device\": \"cpu:2\", \"epoch\": 1"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("\"device\": \"cpu:2\", \"epoch\": 2"), std::string::npos) << lines[3];
}

// Devices timed side by side on a loaded machine: warned before, and the table's notes say the
// figures are unreliable (the load is given here; the trainer reads the system's).
TEST(SideBySide, UnderLoadTheRunWarnsAndTheTableSaysItsFiguresAreUnreliable) {
  const Config config = parse_config(test::small_model_yaml("load"), "load.yaml");
  const std::vector<DeviceSpec> devices = {parse_device("cpu:1"), parse_device("cpu:2")};
  const std::vector<std::string> loaded = machine_warnings(config, devices, 3.6, 2);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_NE(loaded[0].find("the load average is 3.60 on 2 cores"), std::string::npos) << loaded[0];
  EXPECT_TRUE(machine_warnings(config, devices, 0.2, 2).empty());
  EXPECT_EQ(machine_warnings(config, {parse_device("cpu:4")}, 0.2, 2).size(), 1u);  // 4 threads
  EXPECT_NE(load_note(3.6, 2).find("the load average was 3.60 on 2 cores as the devices trained"),
            std::string::npos);
  EXPECT_NE(load_note(3.6, 2).find("unreliable"), std::string::npos);
  EXPECT_EQ(load_note(0.2, 2), "");
}

TEST(SideBySide, AValidationSplitAddsItsColumnsToTheTableAndTheCsv) {
  const std::string config = test::write_temp_file("side_by_side_val.yaml", R"(name: small
input: {shape: [1, 8, 8]}
layers:
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 64, test_size: 16, seed: 1, val_split: 0.25}
train: {epochs: 2, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 1}
)");
  const std::string metrics = ::testing::TempDir() + "side_by_side_val.csv";
  auto r = run_trainer("--config " + config + " --device cpu:1,cpu:2 --quiet --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  const size_t table = r.out.find("Side by side");
  ASSERT_NE(table, std::string::npos) << r.out;
  const size_t results = r.out.find("device  epochs", table);
  const std::string header = r.out.substr(results, r.out.find('\n', results) - results);
  EXPECT_NE(header.find("test acc  val loss  val acc"), std::string::npos) << r.out;
  expect_fits_80_columns(r.out);
  std::vector<std::string> lines = lines_of(metrics);
  ASSERT_EQ(lines.size(), 5u);  // the header, then two epochs on each device
  EXPECT_NE(lines[0].find(",peak_memory_bytes,skipped_steps,val_loss,val_accuracy"),
            std::string::npos)
      << lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(std::count(lines[i].begin(), lines[i].end(), ','), 12) << lines[i];
    EXPECT_EQ(lines[i].find(",,"), std::string::npos) << "a validation cell is empty: " << lines[i];
  }
}

TEST(SideBySide, WithoutAValidationSplitTheTableHasNoValColumns) {
  auto r = run_trainer("--config " + small_config() + " --device cpu:1,cpu:2 --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("test loss  test acc\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("val loss"), std::string::npos) << r.out;
}

TEST(SideBySide, AnUnusableGpuGetsItsRowAndThePartialExitStatus) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here, so no device of cpu,gpu fails";
  auto r = run_trainer("--config " + small_config() + " --device cpu,gpu --quiet");
  EXPECT_EQ(r.status, 8) << r.out;
  EXPECT_NE(r.out.find("cpu: test accuracy"), std::string::npos) << r.out;  // the CPU still ran
  EXPECT_NE(r.out.find("not run"), std::string::npos) << r.out;
  // The row's note carries the reason: no driver here, or no GPU backend in a CPU-only build.
  const bool reason =
      r.out.find("gpu: not run: no NVIDIA") != std::string::npos ||
      r.out.find("gpu: not run: this build has no GPU backend") != std::string::npos;
  EXPECT_TRUE(reason) << r.out;
  EXPECT_NE(unfilled(run_trainer("--help").out).find("8 a device of a list could not run"),
            std::string::npos);
  // Told before the CPU trains, not after it.
  const size_t told = r.out.find("error: gpu cannot run: ");
  EXPECT_NE(told, std::string::npos) << r.out;
  EXPECT_LT(told, r.out.find("cpu: test accuracy")) << r.out;
  EXPECT_NE(r.out.find("the other devices run; its row says not run"), std::string::npos) << r.out;
}

// A bench whose first device cannot run takes the next one as the speedups' reference, as
// training's side-by-side table does.
TEST(SideBySide, BenchWithAnUnusableFirstDeviceComparesWithTheNext) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here, so no device of gpu,cpu fails";
  auto r = run_trainer("bench --config " + small_config() +
                       " --device gpu,cpu:1 --batch-size 8 --steps 2 --warmup 1");
  EXPECT_EQ(r.status, 8) << r.out;
  EXPECT_NE(r.out.find("(speedups against cpu:1 at the same batch size"), std::string::npos)
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(cpu:1 +8 .* 1\.00x +1\.00x)"))) << r.out;
}

TEST(SideBySide, ASingleUnusableDeviceIsStillAnError) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here";
  auto r = run_trainer("--config " + small_config() + " --device gpu --quiet");
  EXPECT_EQ(r.status, 5) << r.out;
  EXPECT_NE(r.out.find("error: "), std::string::npos) << r.out;
}

TEST(SideBySide, BenchTableHasEveryDeviceAndBatchWithSpeedups) {
  auto r = run_trainer("bench --config " + small_config() +
                       " --device cpu:1,cpu:2 --batch-sizes 8,32 --steps 2 --warmup 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream in(r.out);
  std::vector<std::string> lines;  // stdout's: the warnings of a busy machine are on stderr
  for (std::string l; std::getline(in, l);)
    if (!l.starts_with("warning: ")) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  const char* expect[] = {"\"device\": \"cpu:1\", \"config\": \"small\", \"batch_size\": 8",
                          "\"device\": \"cpu:1\", \"config\": \"small\", \"batch_size\": 32",
                          "\"device\": \"cpu:2\", \"config\": \"small\", \"batch_size\": 8",
                          "\"device\": \"cpu:2\", \"config\": \"small\", \"batch_size\": 32"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NE(lines[i].find(expect[i]), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find("\"train_speedup\": "), std::string::npos) << lines[i];
  }
  EXPECT_NE(lines[0].find("\"train_speedup\": 1.000"), std::string::npos) << lines[0];
}

TEST(SideBySide, BenchPerLayerAndPlacementNameEveryLayer) {
  auto r =
      run_trainer("bench --config " + small_config() +
                  " --device cpu --batch-size 8 --steps 2 --warmup 1 --per-layer --log-placement");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Per layer on cpu, batch 8"), std::string::npos) << r.out;
  for (const char* layer : {"conv2d_1", "relu_1", "maxpool_1", "flatten_1", "dense_1"})
    EXPECT_NE(r.out.find(layer), std::string::npos) << layer;
  // oneDNN names its implementation (jit:..., gemm:..., ref:...) for the convolution's passes.
  EXPECT_NE(r.out.find("conv2d_forward"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("conv2d_backward_filter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gemm 8x4x100 B^T a1 b0 -> matmul"), std::string::npos) << r.out;
}

TEST(SideBySide, BenchReportsTheInputPipelineOnItsOwn) {
  auto r = run_trainer("bench --config " + small_config() +
                       " --device cpu --batch-size 8 --steps 2 --warmup 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Input pipeline (synthetic): 256 train samples decoded in"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("images/s over both splits); batches of 8 cut and normalised at"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the fastest training row"), std::string::npos) << r.out;
}

#ifdef TANDEM_WITH_PLPLOT
// Decodes a PNG and checks its size, that it is not blank, and that the colours of `series`
// curves appear in each of its `panels` (equal columns, left to right).
void expect_plot(const std::string& path, int series, int width, int panels) {
  int w = 0, h = 0, c = 0;
  unsigned char* px = stbi_load(path.c_str(), &w, &h, &c, 3);
  ASSERT_NE(px, nullptr) << path << ": " << stbi_failure_reason();
  EXPECT_EQ(w, width);
  EXPECT_EQ(h, 500);
  int64_t ink = 0;
  std::vector<std::set<int>> colours(static_cast<size_t>(panels));
  for (int64_t i = 0; i < static_cast<int64_t>(w) * h; ++i) {
    const unsigned char* p = px + 3 * i;
    if (p[0] < 250 || p[1] < 250 || p[2] < 250) ++ink;
    // Saturated pixels: the curves (axes and text are grey to black).
    if (std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}) > 100)
      colours[static_cast<size_t>((i % w) * panels / w)].insert((p[0] / 32) * 64 + (p[1] / 32) * 8 +
                                                                p[2] / 32);
  }
  stbi_image_free(px);
  const double share = static_cast<double>(ink) / (static_cast<double>(w) * h);
  EXPECT_GT(share, 0.01) << "almost blank";
  EXPECT_LT(share, 0.5) << "mostly ink";
  for (int k = 0; k < panels; ++k)
    EXPECT_GE(static_cast<int>(colours[static_cast<size_t>(k)].size()), series)
        << "the curves' colours are missing from panel " << k + 1;
}

// Three panels: loss, accuracy and training throughput per epoch.
TEST(SideBySide, TrainingPlotIsAPngWithACurvePerDeviceInEachPanel) {
  const std::string png = ::testing::TempDir() + "train_plot.png";
  auto r =
      run_trainer("--config " + small_config() + " --device cpu:1,cpu:2 --quiet --plot " + png);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("plot written to " + png), std::string::npos) << r.out;
  expect_plot(png, 2, 1800, 3);
}

// A run resumed from its checkpoint plots the epochs before the resume too: its loss and accuracy
// panels are those of the same run uninterrupted (the losses are equal bit for bit; the
// throughput panel is not compared, it is timing), but for the mark of the resume: a grey
// vertical line with its label at its right.
TEST(SideBySide, AResumedRunPlotsTheEpochsBeforeTheResume) {
  const std::string dir = test::fresh_dir("plot_resume");
  const std::string config = small_config();
  ASSERT_EQ(run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir).status, 0);
  auto resumed = run_trainer("--config " + config + " --quiet --epochs 3 --resume " + dir +
                             " --plot " + dir + "/resumed.png");
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  auto whole =
      run_trainer("--config " + config + " --quiet --epochs 3 --plot " + dir + "/whole.png");
  ASSERT_EQ(whole.status, 0) << whole.out;
  expect_plot(dir + "/resumed.png", 1, 1800, 3);
  int w = 0, h = 0, c = 0, w2 = 0, h2 = 0;
  unsigned char* a = stbi_load((dir + "/resumed.png").c_str(), &w, &h, &c, 3);
  unsigned char* b = stbi_load((dir + "/whole.png").c_str(), &w2, &h2, &c, 3);
  ASSERT_TRUE(a && b && w == w2 && h == h2);
  auto px = [&](const unsigned char* img, int x, int y) {
    return img + 3 * (static_cast<int64_t>(y) * w + x);
  };
  auto differs = [&](int x, int y) { return std::memcmp(px(a, x, y), px(b, x, y), 3) != 0; };
  for (int panel = 0; panel < 2; ++panel) {  // the loss and accuracy panels
    const int left = panel * w / 3, right = (panel + 1) * w / 3;
    // The mark: the column of the panel where the most pixels differ (its dashed line).
    int mark = -1, most = 0;
    for (int x = left; x < right; ++x) {
      int n = 0;
      for (int y = 0; y < h; ++y) n += differs(x, y);
      if (n > most) most = n, mark = x;
    }
    EXPECT_GT(most, h / 8) << "no resume mark in panel " << panel + 1;
    // Beside the line, only its label near the top of the box may differ.
    int64_t elsewhere = 0;
    for (int y = 0; y < h; ++y)
      for (int x = left; x < right; ++x)
        if (differs(x, y) && std::abs(x - mark) > 4 && (std::abs(x - mark) > 100 || y > 3 * h / 10))
          ++elsewhere;
    EXPECT_EQ(elsewhere, 0) << "pixels of panel " << panel + 1 << " differ away from the mark";
  }
  stbi_image_free(a);
  stbi_image_free(b);
}

TEST(SideBySide, BenchPlotIsAPng) {
  const std::string png = ::testing::TempDir() + "bench_plot.png";
  auto r = run_trainer(
      "bench --config " + small_config() +
      " --device cpu:1,cpu:2 --batch-sizes 8,16,32 --steps 2 --warmup 1 --quiet --plot " + png);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_plot(png, 2, 1200, 2);
}

// Train, test and validation points of one run have glyphs of their own (filled, hollow, half
// filled), and each run its shape.
TEST(TrainingPlot, TrainTestAndValidationPointsHaveGlyphsOfTheirOwn) {
  std::set<std::string> seen;
  for (int run = 0; run < 4; ++run) {
    PlotSeries train{"train", {}, {}, 0, false, run}, test = train, val = train;
    test.dashed = true;
    val.dotted = true;
    for (const PlotSeries* s : {&train, &test, &val})
      EXPECT_TRUE(seen.insert(point_glyph(*s)).second) << "run " << run << ": " << point_glyph(*s);
  }
}

// A resume is marked where it took over: between two epochs' points, or inside the epoch a stop
// cut short (here a quarter into the first, which no epoch completed before).
TEST(TrainingPlot, AResumeInsideAnEpochIsMarkedWhereItResumed) {
  PlotRun inside{"cpu", {}, 0.25, {}, true};
  for (const PlotPanel& p : training_panels("m", {inside})) {
    ASSERT_EQ(p.marks.size(), 1u) << p.title;
    EXPECT_DOUBLE_EQ(p.marks[0].x, 0.25) << p.title;
  }
  PlotRun between{"cpu", {}, 2, {}, true};
  EXPECT_DOUBLE_EQ(training_panels("m", {between})[0].marks.at(0).x, 2.5);
  PlotRun fresh{"cpu", {}, -1, {}, true};
  EXPECT_TRUE(training_panels("m", {fresh})[0].marks.empty());
}

// The rows (top to bottom) where two plots of one size differ.
std::pair<int, int> rows_that_differ(const std::string& a_path, const std::string& b_path) {
  int w = 0, h = 0, c = 0, w2 = 0, h2 = 0;
  unsigned char* a = stbi_load(a_path.c_str(), &w, &h, &c, 3);
  unsigned char* b = stbi_load(b_path.c_str(), &w2, &h2, &c, 3);
  std::pair<int, int> rows{h, -1};
  if (a && b && w == w2 && h == h2)
    for (int y = 0; y < h; ++y)
      if (std::memcmp(a + 3 * static_cast<int64_t>(y) * w, b + 3 * static_cast<int64_t>(y) * w,
                      3 * static_cast<size_t>(w)) != 0)
        rows = {std::min(rows.first, y), std::max(rows.second, y)};
  stbi_image_free(a);
  stbi_image_free(b);
  return rows;
}

// One epoch: each curve is one point. Recolouring a series changes its legend entry and, unless
// something covers it, its point: the changed rows then reach from the point to the legend (a
// legend inside the box hid the train loss point of one-epoch runs).
TEST(SideBySide, AOneEpochPlotShowsEachPointBesideItsLegendEntry) {
  const std::string dir = test::fresh_dir("plot_one_epoch");
  std::filesystem::create_directories(dir);
  PlotPanel loss{"Loss per epoch", "epoch", "loss", {}, false};
  loss.series = {{"cpu train", {1}, {0.557}, 0, false}, {"cpu test", {1}, {0.150}, 0, true}};
  write_plot(dir + "/plot.png", {loss}, 600, 500);
  for (size_t s = 0; s < loss.series.size(); ++s) {
    PlotPanel recoloured = loss;
    recoloured.series[s].color = 1;
    write_plot(dir + "/recoloured.png", {recoloured}, 600, 500);
    const auto [first, last] = rows_that_differ(dir + "/plot.png", dir + "/recoloured.png");
    EXPECT_GT(last - first, 40) << loss.series[s].label << ": only its legend entry changed (rows "
                                << first << " to " << last << ")";
  }
}

TEST(SideBySide, PlotNameEndingInUpperCasePngIsAPlot) {
  const std::string dir = test::fresh_dir("plot_upper_case");
  auto r = run_trainer("--config " + small_config() + " --epochs 1 --quiet --plot " + dir +
                       "/CURVES.PNG");
  ASSERT_EQ(r.status, 0) << r.out;
  expect_plot(dir + "/CURVES.PNG", 1, 1800, 3);
}
#endif

TEST(SideBySide, PlotPathIsCheckedBeforeTraining) {
  // /proc takes no new folder or file, even from root.
  auto r = run_trainer("--config " + small_config() + " --quiet --plot /proc/tandem/p.png");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out.find("Epoch 1"), std::string::npos) << "trained before failing";
  auto bad = run_trainer("--config " + small_config() + " --quiet --plot curves.jpg");
  EXPECT_EQ(bad.status, 2) << bad.out;
}

// --- the parity verdict on its own ---

TEST(Parity, IdenticalCurvesAgree) {
  std::vector<double> a{2.3, 2.1, 1.9, 1.5};
  Parity p = compare_runs(a, a, 0.9, 0.9);
  EXPECT_TRUE(p.agree);
  EXPECT_EQ(p.first_divergent_step, 0);
  EXPECT_EQ(p.max_relative, 0);
  EXPECT_EQ(p.verdict().rfind("agree", 0), 0u) << p.verdict();
}

TEST(Parity, AnEarlyDivergenceIsReportedWithItsStep) {
  std::vector<double> a{2.0, 2.0, 2.0, 2.0, 2.0}, b = a;
  b[2] = 2.01;  // step 3, 5e-3 relative
  Parity p = compare_runs(a, b, 0.9, 0.9);
  EXPECT_FALSE(p.agree);
  EXPECT_EQ(p.first_divergent_step, 3);
  EXPECT_NEAR(p.divergence, 5e-3, 1e-9);
  EXPECT_NE(p.verdict().find("DIFFER from step 3"), std::string::npos) << p.verdict();
}

TEST(Parity, DriftAfterTheCheckedStepsIsReportedButAgrees) {
  std::vector<double> a(40, 1.0), b = a;
  for (size_t i = 30; i < 40; ++i) b[i] = 1.1;
  Parity p = compare_runs(a, b, 0.95, 0.949, 1e-3, 20);
  EXPECT_TRUE(p.agree);
  EXPECT_EQ(p.first_divergent_step, 31);
  EXPECT_NE(p.verdict().find("drift apart from step 31"), std::string::npos) << p.verdict();
}

TEST(Parity, FinalAccuracyMoreThanAPointApartDiffers) {
  std::vector<double> a{1.0, 0.9};
  Parity p = compare_runs(a, a, 0.95, 0.93);
  EXPECT_FALSE(p.agree);
  EXPECT_NE(p.verdict().find("2.00 points apart"), std::string::npos) << p.verdict();
}

TEST(Parity, NanLossNeverAgrees) {
  std::vector<double> a{1.0, 0.9}, b{1.0, std::nan("")};
  EXPECT_FALSE(compare_runs(a, b, 0.9, 0.9).agree);
}

// fp16's overflowed steps applied no update (the loss scale was too high): they are left out of
// the step-by-step comparison, and the verdict says how many. The checked steps are counted
// among those compared.
TEST(Parity, OverflowedStepsAreLeftOutAndCounted) {
  std::vector<double> a(30, 1.0), b = a;
  b[0] = 1.5;  // an overflowed step's loss, far off
  b[4] = 1.5;
  Parity p = compare_runs(a, b, 0.9, 0.9, 1e-2, 20, {0, 4});
  EXPECT_TRUE(p.agree) << p.verdict();
  EXPECT_EQ(p.left_out, 2);
  EXPECT_EQ(p.compared, 28);
  EXPECT_EQ(p.checked, 20);
  EXPECT_NE(p.verdict().find("2 overflowed fp16 steps left out"), std::string::npos) << p.verdict();
  EXPECT_FALSE(compare_runs(a, b, 0.9, 0.9, 1e-2, 20).agree);  // counted, they differ
}

// A divergence past the checked steps, once the left-out steps shift the count, is drift.
TEST(Parity, TheCheckedStepsAreTheFirstOnesCompared) {
  std::vector<double> a(30, 1.0), b = a;
  b[21] = 1.5;  // the 21st step compared when step 0 is left out: past the checked 20
  Parity p = compare_runs(a, b, 0.9, 0.9, 1e-2, 20, {0});
  EXPECT_TRUE(p.agree) << p.verdict();
  EXPECT_EQ(p.first_divergent_step, 22);
  b[20] = 1.5;  // the 20th compared: checked
  EXPECT_FALSE(compare_runs(a, b, 0.9, 0.9, 1e-2, 20, {0}).agree);
}

}  // namespace
}  // namespace tandem
