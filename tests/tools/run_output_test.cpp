// What a training run prints, as a user sees it: a progress line within an 80-column terminal,
// plain lines in a file, --verbose, warnings on stderr, and the model summary.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/tools/cli_util.h"

namespace tandem::test {
namespace {

// The rows a terminal shows: the text between carriage returns and newlines, without the
// erase-to-end-of-line sequence.
std::vector<std::string> terminal_rows(const std::string& out) {
  std::vector<std::string> rows;
  std::string row;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 3, "\033[K") == 0) {
      i += 2;
    } else if (out[i] == '\r' || out[i] == '\n') {
      rows.push_back(row);
      row.clear();
    } else {
      row += out[i];
    }
  }
  rows.push_back(row);
  return rows;
}

// The trainer on a pseudo-terminal of `columns` columns (script(1) gives it one; the terminal has
// no size of its own, so $COLUMNS says it).
CliResult run_on_terminal(int columns, const std::string& args) {
  return run_command("script -qec 'COLUMNS=" + std::to_string(columns) + " " +
                     std::string(TANDEM_TRAINER) + " " + args + "' /dev/null");
}

std::string two_epoch_config(const std::string& name, const std::string& extra = "") {
  return write_temp_file(name + ".yaml", small_model_yaml(name) +
                                             "train: {epochs: 2, batch_size: 16" + extra +
                                             ", optimizer: {type: adam, lr: 0.01}, seed: 1}\n");
}

TEST(RunOutput, TheProgressFitsAnEightyColumnTerminal) {
  const CliResult r = run_on_terminal(80, "--config " + two_epoch_config("tty80"));
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_NE(r.out.find('\r'), std::string::npos) << "no redraw: " << r.out;
  int progress_rows = 0;
  for (const std::string& row : terminal_rows(r.out)) {
    if (row.find(" - loss ") == std::string::npos && row.find("test_acc ") == std::string::npos)
      continue;
    ++progress_rows;
    EXPECT_LT(row.size(), 80u) << "'" << row << "'";
  }
  EXPECT_GE(progress_rows, 2) << r.out;
  // The closing line keeps every figure, on a second row where the first is full.
  for (const char* field : {"test_loss ", "test_acc ", "peak mem ", " train - loss "})
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " in " << r.out;
}

TEST(RunOutput, ANarrowTerminalStillGetsRowsWithinItsWidth) {
  const CliResult r = run_on_terminal(50, "--config " + two_epoch_config("tty50"));
  ASSERT_EQ(r.status, 0) << r.out;
  for (const std::string& row : terminal_rows(r.out)) {
    if (row.find(" - loss ") != std::string::npos || row.find("test_acc ") != std::string::npos) {
      EXPECT_LT(row.size(), 50u) << "'" << row << "'";
    }
  }
}

TEST(RunOutput, RedirectedOutputHasPlainLinesAndOneClosingLinePerEpoch) {
  const CliResult r = run_trainer("--config " + two_epoch_config("piped"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << r.out;
  const std::regex closing(
      R"(\n16/16 \[=+\] - [0-9.]+s train - loss [0-9]+\.[0-9]{4} - acc [0-9]+\.[0-9]{2}% - [0-9,]+ )"
      R"(img/s - test_loss [0-9]+\.[0-9]{4} - test_acc [0-9]+\.[0-9]{2}% - peak mem [0-9.]+ [KMG]?i?B\n)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), closing),
                          std::sregex_iterator()),
            2)
      << r.out;
  // The first epoch's bar gives the run's ETA beside its own.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"( - ETA [0-9.]+s \(run [0-9.]+s\) - )")))
      << r.out;
}

TEST(RunOutput, VerboseTwoPrintsOneLinePerEpochAndNoBar) {
  const CliResult r = run_trainer("--config " + two_epoch_config("verbose2") + " --verbose 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(std::regex_search(r.out, std::regex(R"(\n *[0-9]+/[0-9]+ \[)"))) << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(\nEpoch 1/2 - [0-9.]+s train - loss .* - )"
                                          R"(test_acc [0-9.]+% - peak mem [^\n]+\nEpoch 2/2 - )")))
      << r.out;
}

TEST(RunOutput, VerboseZeroIsQuietAndTheTwoMustAgree) {
  const CliResult zero = run_trainer("--config " + two_epoch_config("verbose0") + " --verbose 0");
  ASSERT_EQ(zero.status, 0) << zero.out;
  EXPECT_EQ(zero.out.find("Epoch"), std::string::npos) << zero.out;
  EXPECT_EQ(zero.out.find("Model "), std::string::npos) << zero.out;
  EXPECT_NE(zero.out.find("cpu: test accuracy "), std::string::npos) << zero.out;
  const CliResult both =
      run_trainer("--config " + two_epoch_config("verbose0") + " --quiet --verbose 2");
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_NE(both.out.find("error: --quiet and --verbose 2 disagree"), std::string::npos)
      << both.out;
  const CliResult bad = run_trainer("--config " + two_epoch_config("verbose0") + " --verbose 3");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --verbose 3: expected 0, 1 or 2"), std::string::npos) << bad.out;
}

TEST(RunOutput, WarningsGoToStderr) {
  // --device auto on a machine or build without a usable GPU warns; otherwise nothing to see.
  const std::string config = one_epoch_config("warn_stderr");
  const std::string run = std::string(TANDEM_TRAINER) + " --config " + config + " --device auto";
  const CliResult out_only = run_command("(" + run + " --quiet 2>/dev/null)");
  const CliResult err_only = run_command("(" + run + " --quiet 2>&1 >/dev/null)");
  ASSERT_EQ(out_only.status, 0) << out_only.out;
  if (err_only.out.find("--device auto: the GPU is usable") != std::string::npos ||
      out_only.out.find("on gpu") != std::string::npos)
    GTEST_SKIP() << "a GPU can run here: --device auto has nothing to warn about";
  EXPECT_EQ(out_only.out.find("warning:"), std::string::npos) << out_only.out;
  EXPECT_EQ(err_only.out.rfind("warning: --device auto: running on the CPU, because ", 0), 0u)
      << err_only.out;
}

TEST(RunOutput, TheModelSummaryNamesTypesAndCountsNonTrainableParameters) {
  const std::string config = write_temp_file("summary.yaml", R"(name: summary
input: {shape: [1, 8, 8]}
layers:
  - {conv2d: {filters: 4, kernel: 3, padding: 1}, name: stem}
  - {relu: {}, name: stem_act}
  - conv2d: {filters: 4, kernel: 3, padding: 1}
  - batchnorm
  - relu
  - flatten
  - dense: {units: 3}
data: {format: synthetic, classes: 3, train_size: 16, test_size: 8}
train: {epochs: 1, batch_size: 8}
)");
  const CliResult r = run_trainer("--config " + config);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("stem (conv2d) "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stem_act (relu) "), std::string::npos) << r.out;
  // The unnamed ones count among themselves: conv2d_1 and relu_1, not conv2d_2 and relu_2.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n3 +conv2d_1 )"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n5 +relu_1 )"))) << r.out;
  EXPECT_EQ(r.out.find("relu_2"), std::string::npos) << r.out;
  // 40 + 148 + 8 + 771 trained; the running mean and variance of 4 channels not.
  EXPECT_NE(r.out.find("Params 967 trainable, 8 non-trainable (batch normalization's running "
                       "statistics); 0.0037 MiB (fp32)"),
            std::string::npos)
      << r.out;
}

TEST(RunOutput, AFolderHoldingAnotherRunsCheckpointsIsNamedWithTheResumeThatContinuesIt) {
  const std::string dir = fresh_dir("used_ckpt");
  const std::string config = one_epoch_config("used_ckpt");
  const CliResult first = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_EQ(first.out.find("warning:"), std::string::npos) << first.out;
  const CliResult again = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("warning: the checkpoint folder " + dir +
                           " already holds 1 checkpoint of another run (epoch-1.safetensors): "
                           "this run writes its own there, replacing those of the same names; "
                           "to continue that run instead, add --resume " +
                           dir + "\n"),
            std::string::npos)
      << again.out;
}

}  // namespace
}  // namespace tandem::test
