// Bad command lines and output paths as a user types them: each one an error with a hint, a
// non-zero exit, and nothing lost or half-written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/cli_util.h"

namespace {

namespace fs = std::filesystem;
using Result = tandem::test::CliResult;

Result trainer(const std::string& args) { return tandem::test::run_trainer(args); }

using tandem::test::one_epoch_config;

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(BadInput, HelpDescribesEachCommandUnderIt) {
  Result r = trainer("--help");
  ASSERT_EQ(r.status, 0);
  const size_t export_images = r.out.find("trainer export-images");
  const size_t description = r.out.find("write the data set as PNG image folders");
  const size_t eval = r.out.find("trainer eval");
  ASSERT_NE(description, std::string::npos) << r.out;
  EXPECT_LT(export_images, description);
  EXPECT_LT(description, eval);
}

TEST(BadInput, BatchSizeBeyondAnIntIsRefusedNotWrapped) {
  // 4294967297 cast to int is 1: the run would train with batch size 1.
  Result r = trainer("--config " + one_epoch_config("wrap") + " --batch-size 4294967297 --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --batch-size 4294967297 is out of range"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: "), std::string::npos) << r.out;
}

TEST(BadInput, NonNumericBatchSizeNamesTheFlagWithAHint) {
  Result r = trainer("--config " + one_epoch_config("nonnum") + " --batch-size abc --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --batch-size expects an integer, got 'abc'"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: give a whole number after --batch-size"), std::string::npos) << r.out;
}

// Not hexadecimal ("0x10" is not read as 16), and a number past a double says so.
TEST(BadInput, ALearningRateIsADecimalNumberInRange) {
  for (const std::string lr : {"0x10", "abc", "1e-3x"}) {
    Result r = trainer("--config " + one_epoch_config("lr_form") + " --lr " + lr + " --quiet");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("error: --lr expects a number, got '" + lr +
                         "'\nhint: give a number "
                         "after --lr, e.g. --lr 0.01"),
              std::string::npos)
        << r.out;
  }
  Result r = trainer("--config " + one_epoch_config("lr_range") + " --lr 1e400 --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --lr 1e400 is out of range of a double"), std::string::npos)
      << r.out;
}

TEST(BadInput, ZeroEpochsIsRefusedWithAHint) {
  Result r = trainer("--config " + one_epoch_config("zero") + " --epochs 0 --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --epochs must be at least 1\nhint: e.g. --epochs 5"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, NegativeSeedIsRefused) {
  Result r = trainer("--config " + one_epoch_config("seed") + " --seed -1 --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --seed expects a non-negative integer, got '-1'"), std::string::npos)
      << r.out;
}

TEST(BadInput, SeedsAboveAnIntAreTaken) {
  Result r = trainer("--config " + one_epoch_config("bigseed") + " --seed 4294967297 --quiet");
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST(BadInput, NegativeOrInfiniteLearningRateIsRefused) {
  for (const char* lr : {"-0.1", "inf", "nan"}) {
    Result r = trainer("--config " + one_epoch_config("lr") + " --lr " + lr + " --quiet");
    EXPECT_EQ(r.status, 2) << lr << ": " << r.out;
    EXPECT_NE(r.out.find("error: --lr must be a positive finite number"), std::string::npos)
        << r.out;
  }
}

TEST(BadInput, FlagFollowedByAnotherFlagNeedsAValue) {
  Result r = trainer("--config " + one_epoch_config("noval") + " --epochs --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --epochs needs a value"), std::string::npos) << r.out;
}

TEST(BadInput, FlagGivenTwiceIsRefusedNamingBothValues) {
  // Checked while the flags are read: neither the config nor the devices are looked at.
  Result r = trainer("--config missing.yaml --device cpu --device gpu");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --device is given twice ('cpu', then 'gpu')\nhint: give it once"),
            std::string::npos)
      << r.out;
  r = trainer("--config missing.yaml --epochs 1 --quiet --epochs 3");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --epochs is given twice ('1', then '3')"), std::string::npos)
      << r.out;
}

TEST(BadInput, ShortAndLongConfigFlagCountAsOneFlag) {
  Result r = trainer("-c a.yaml --config b.yaml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --config is given twice ('a.yaml', then 'b.yaml')"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, RepeatedBatchSizesAddUpToOneList) {
  Result r = trainer("bench --config " + one_epoch_config("sizes") +
                     " --batch-sizes 8,16 --batch-sizes 32 --steps 1 --warmup 0 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* batch : {"\"batch_size\": 8,", "\"batch_size\": 16,", "\"batch_size\": 32,"})
    EXPECT_NE(r.out.find(batch), std::string::npos) << batch << ": " << r.out;
}

TEST(BadInput, EmptyDeviceSaysSoAndListsTheAcceptedForms) {
  Result r = trainer("--config missing.yaml --device ''");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --device is empty\nhint: give cpu, cpu:N (N threads), gpu, gpu:N "
                       "(GPU number N), auto, all, or a comma list of them such as cpu,gpu"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("unknown device"), std::string::npos) << r.out;
}

TEST(BadInput, EmptyEntryOfADeviceListIsNamed) {
  Result r = trainer("--config missing.yaml --device cpu,,gpu");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --device 'cpu,,gpu' has an empty entry\nhint: give cpu, cpu:N"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, MetricsAndPlotFoldersAreCreated) {
  const std::string dir = ::testing::TempDir() + "bad_input_new_folder";
  fs::remove_all(dir);
  Result r = trainer("--config " + one_epoch_config("newdir") + " --quiet --metrics " + dir +
                     "/runs/m.jsonl --plot " + dir + "/plots/p.png");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/runs/m.jsonl"));
#ifdef TANDEM_WITH_PLPLOT
  EXPECT_GT(fs::file_size(dir + "/plots/p.png"), 0u);
#endif
}

#ifdef TANDEM_WITH_PLPLOT
TEST(BadInput, UnwritablePlotPathFailsBeforeTraining) {
  // /proc takes no new file, even from root.
  Result r = trainer("--config " + one_epoch_config("noplot") + " --plot /proc/tandem.png");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --plot /proc/tandem.png: cannot create files in /proc"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PLPLOT"), std::string::npos) << r.out;
}

TEST(BadInput, PlotPathThatIsAFolderIsRefusedAndKept) {
  const std::string dir = ::testing::TempDir() + "bad_input_folder.png";
  fs::create_directories(dir);
  Result r = trainer("--config " + one_epoch_config("plotdir") + " --quiet --plot " + dir);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is a folder"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_directory(dir));
}
#endif

TEST(BadInput, UnwritableMetricsPathFailsBeforeTraining) {
  Result r = trainer("--config " + one_epoch_config("nometrics") + " --metrics /proc/tandem.jsonl");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --metrics /proc/tandem.jsonl: cannot create files in /proc"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Epoch 1"), std::string::npos) << r.out;
}

TEST(BadInput, MetricsPathThatIsAFolderIsRefused) {
  const std::string dir = ::testing::TempDir() + "bad_input_metrics_folder";
  fs::create_directories(dir);
  Result r = trainer("--config " + one_epoch_config("metricsdir") + " --quiet --metrics " + dir);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --metrics " + dir + " is a folder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: give a file name, e.g. --metrics " + dir + "/metrics.jsonl"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, RunThatFailsBeforeItsFirstEpochKeepsTheOldMetricsFile) {
  const std::string metrics = ::testing::TempDir() + "bad_input_old.jsonl";
  std::ofstream(metrics) << "{\"epoch\": 1}\n";
  Result r = trainer("--config " + one_epoch_config("keep") + " --quiet --metrics " + metrics +
                     " --resume " + ::testing::TempDir() + "no_such.safetensors");
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_EQ(text_of(metrics), "{\"epoch\": 1}\n");
}

// The small model, and one of another width, trained for an epoch into a checkpoint folder.
std::string checkpoint_of(const std::string& name, int units_first_dense) {
  const std::string dir = ::testing::TempDir() + "bad_input_ckpt_" + name;
  fs::remove_all(dir);
  std::string yaml = tandem::test::small_model_yaml(name);
  yaml.replace(yaml.find("filters: 4"), 10, "filters: " + std::to_string(units_first_dense));
  const std::string config = tandem::test::write_temp_file(
      name + ".yaml",
      yaml + "train: {epochs: 1, batch_size: 64, checkpoint: {dir: " + dir + "}}\n");
  Result r = trainer("--config " + config + " --quiet");
  EXPECT_EQ(r.status, 0) << r.out;
  return dir;
}

TEST(BadInput, ResumingAnotherModelNamesTheModelBeforeTheBatchSize) {
  // The checkpoint's batch size (64) differs from this run's (32) too: the model is what to fix.
  const std::string dir = checkpoint_of("other_model", 6);
  Result r =
      trainer("--config " + one_epoch_config("this_model") + " --epochs 2 --quiet --resume " + dir);
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("holds another model: its layer 1 is conv2d_1 [6, 10, 10] (60 parameters), "
                       "this config's is conv2d_1 [4, 10, 10] (40 parameters)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: resume with the config it was trained with (--config "),
            std::string::npos)
      << r.out;
}

TEST(BadInput, EvalWithAnotherModelsConfigSaysToLeaveItOut) {
  const std::string dir = checkpoint_of("eval_model", 6);
  Result r = trainer("eval --checkpoint " + dir + " --config " + one_epoch_config("eval_other"));
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("holds another model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: leave out --config"), std::string::npos) << r.out;
}

TEST(BadInput, AConfigGivenAsTheCheckpointIsNamedNotASafetensorsFile) {
  Result r = trainer("eval --checkpoint " + one_epoch_config("not_a_checkpoint"));
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("is unusable: it is not a .safetensors file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--resume"), std::string::npos) << "eval has no --resume: " << r.out;
}

TEST(BadInput, AnotherCommandsFlagSaysWhoseItIs) {
  Result r = trainer("bench --config " + one_epoch_config("bench_flag") + " --resume x");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --resume is not a flag of bench\nhint: it belongs to training"),
            std::string::npos)
      << r.out;
}

// They were ignored: the command ran (exit 0) and the user took them for used.
TEST(BadInput, BenchRefusesTrainingFlags) {
  Result r = trainer("bench --config " + one_epoch_config("bench_metrics") +
                     " --metrics x.jsonl --epochs 3");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --metrics is not a flag of bench\nhint: it belongs to training; "
                       "see trainer bench --help"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, PredictRefusesFlagsOfOtherCommands) {
  for (const std::string flag : {"--plot a.png", "--batch-size 3", "--data x", "--quiet"}) {
    Result r = trainer("predict --checkpoint x " + flag + " digit.png");
    EXPECT_EQ(r.status, 2) << flag << ": " << r.out;
    EXPECT_NE(r.out.find("error: " + flag.substr(0, flag.find(' ')) + " is not a flag of predict"),
              std::string::npos)
        << r.out;
  }
}

TEST(BadInput, DevicesRefusesFlagsOfOtherCommands) {
  Result r = trainer("devices --epochs 2");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --epochs is not a flag of devices"), std::string::npos) << r.out;
  EXPECT_EQ(trainer("devices --log-level warn").status, 0);
}

TEST(BadInput, AMisspeltFlagGetsTheNearest) {
  Result r = trainer("--config " + one_epoch_config("flag_typo") + " --batchsize 3");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("unknown argument '--batchsize'; did you mean '--batch-size'?"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, ExportImagesToAnUnwritablePlaceIsAUsageError) {
  // It was an internal error (exit 70) with the filesystem's exception text.
  Result r =
      trainer("export-images --config " + one_epoch_config("export_proc") + " --out /proc/x");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --out /proc/x: cannot create a folder in /proc"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
}

TEST(BadInput, ExportImagesLeavesOnlyTheFolderAsked) {
  const fs::path parent = fs::path(::testing::TempDir()) / "bad_input_export";
  fs::remove_all(parent);
  fs::create_directories(parent / "out");  // an empty folder is taken, and a trailing '/' too
  Result r = trainer("export-images --config " + one_epoch_config("export_ok") + " --out " +
                     (parent / "out").string() + "/ --limit-per-class 2");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(parent)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"out"});
  EXPECT_TRUE(fs::is_directory(parent / "out" / "train"));
  EXPECT_TRUE(fs::is_directory(parent / "out" / "test"));
}

// A batch beyond the train split: with drop_last an epoch would train nothing, which is refused;
// without it the one short batch is the epoch, and the run's header says so.
TEST(BadInput, ABatchBeyondTheTrainSplitIsOneStepAnEpochOrWithDropLastRefused) {
  auto config = [](const std::string& drop_last) {
    return tandem::test::write_dense_config(
        "big_batch_" + drop_last, {.classes = 4,
                                   .data = "train_size: 40, test_size: 16, seed: 3",
                                   .train = "epochs: 1, batch_size: 64, drop_last: " + drop_last});
  };
  Result r = trainer("--config " + config("true"));
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("train.batch_size 64 is more than the 40 train samples, and "
                       "train.drop_last: true drops that one short batch: no epoch would train\n"
                       "hint: use --batch-size 40 or less, or train.drop_last: false"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch 1/1"), std::string::npos) << "training started: " << r.out;

  r = trainer("--config " + config("true") + " --batch-size 40");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("note: batch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1/1 ["), std::string::npos) << r.out;

  r = trainer("--config " + config("false"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("note: batch 64 is more than the 40 train samples: each epoch is one step "
                       "of 40"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1/1 ["), std::string::npos) << r.out;
  // The batch beyond the split takes no memory: the run holds what a batch of 40 does.
  auto peak = [](const std::string& out) {
    std::smatch m;
    return std::regex_search(out, m, std::regex("peak mem [0-9.]+ [KMG]?i?B")) ? m.str() : "none";
  };
  const Result exact = trainer("--config " + config("false") + " --batch-size 40");
  EXPECT_EQ(peak(r.out), peak(exact.out)) << r.out << exact.out;
  EXPECT_NE(peak(r.out), "none") << r.out;
}

// A batch whose tensors the host cannot hold: the size asked for, what is available, and the
// batch to try. Through bench, whose batches are random data: a training run allocates no
// more than its data's largest split. The input batch is 512 TB, past the address space, so the
// allocation fails
// whatever the machine's memory and overcommit settings. (The sanitizers' allocator is told to
// fail as malloc does, not to abort.)
// Samples of 256x256 floats (256 KiB each) in tiny splits: bench's --batch-size alone makes the
// input batch as large as a test needs.
std::string wide_sample_config(const std::string& name) {
  return tandem::test::write_dense_config(name, {.side = 256,
                                                 .classes = 4,
                                                 .data = "train_size: 8, test_size: 4, seed: 3",
                                                 .train = "epochs: 1, batch_size: 4"});
}

TEST(BadInput, OutOfHostMemoryNamesTheSizeAndTheBatchToTry) {
  const std::string config = wide_sample_config("huge_batch");
  Result r = tandem::test::run_trainer_with(
      "ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0",
      "bench --config " + config + " --device cpu --batch-size 2000000000 --steps 1 --quiet");
  EXPECT_EQ(r.status, 5) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(error: out of host memory: asked for [0-9.]+ GiB, [0-9.]+ [GMK]iB available)")))
      << r.out;
  // The hint's batch is the largest power of two at which that tensor takes at most half of what
  // is available.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(
          R"(asked for ([0-9.]+) GiB, ([0-9.]+) ([GMK])iB available\nhint: try --batch-size ([0-9]+) or less \(this run's is 2000000000\), or a smaller model)")))
      << r.out;
  const double gib = 1024.0 * 1024 * 1024;
  const double per_sample = std::stod(m[1]) * gib / 2e9;
  const double available = std::stod(m[2]) * (m[3] == "G" ? gib : m[3] == "M" ? gib / 1024 : 1024);
  const double hinted = std::stod(m[4]) * per_sample;
  EXPECT_LE(hinted, available / 2 * 1.01) << r.out;
  EXPECT_GT(hinted, available / 4 * 0.99) << r.out;
}

// Refused by a limit on the process (ulimit -v) while the machine has the memory free: the
// message says so, rather than leave "asked for 2 GiB, 20 GiB available" unexplained.
TEST(BadInput, OutOfHostMemoryUnderAProcessLimitSaysSo) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the address sanitizer reserves more address space than the limit allows";
#endif
  const std::string config = wide_sample_config("limited");
  // 8192 samples of 256x256 floats: a 2 GiB input batch, under a 1.5 GiB address-space limit.
  Result r = tandem::test::run_trainer_with(
      "ulimit -v 1500000;",
      "bench --config " + config + " --device cpu --batch-size 8192 --steps 1 --quiet");
  EXPECT_EQ(r.status, 5) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(error: out of host memory: asked for 2.0 GiB, ([0-9.]+) ([GMK])iB)")))
      << r.out;
  if (m[2] != "G" || std::stod(m[1]) <= 2.0)
    GTEST_SKIP() << "this machine has no 2 GiB free, so the limit is not what refused: " << r.out;
  EXPECT_NE(r.out.find(" available to the machine, but this process is held to less (ulimit -v)"),
            std::string::npos)
      << r.out;
}

TEST(BadInput, CheckpointFolderThatCannotBeMadeFailsBeforeTraining) {
  Result r =
      trainer("--config " + one_epoch_config("ckpt_proc") + " --checkpoint-dir /proc/tandem");
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("error: cannot create checkpoint folder '/proc/tandem'"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch 1"), std::string::npos) << "trained before failing: " << r.out;
  // A folder that exists but takes no files (/proc/self, even for root) fails as soon.
  r = trainer("--config " + one_epoch_config("ckpt_proc_self") + " --checkpoint-dir /proc/self");
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("error: cannot write in checkpoint folder '/proc/self': "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch 1"), std::string::npos) << "trained before failing: " << r.out;
}

}  // namespace

namespace {

// A model with batch normalization of a flat input, 257 train samples: batches of 32 leave 1.
std::string batchnorm_config(const std::string& name, const std::string& train) {
  return tandem::test::write_temp_file(name + ".yaml", "name: " + name + R"(
input: {shape: [1, 12, 12]}
layers:
  - conv2d: {filters: 4, kernel: 3}
  - batchnorm
  - relu
  - flatten
  - dense: {units: 8}
  - batchnorm
  - relu
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 257, test_size: 64, seed: 3}
)" + train);
}

TEST(BadInput, ALastBatchOfOneSampleBeforeFlatBatchNormStopsBeforeTraining) {
  Result r =
      trainer("--config " + batchnorm_config("bn_last", "train: {epochs: 1, batch_size: 32}\n"));
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("the last batch of each epoch would hold 1 sample (257 train samples in "
                       "batches of 32)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: set train.drop_last: true"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Epoch 1/1"), std::string::npos) << "training started: " << r.out;

  Result dropped =
      trainer("--config " +
              batchnorm_config("bn_drop", "train: {epochs: 1, batch_size: 32, drop_last: true}\n") +
              " --quiet");
  EXPECT_EQ(dropped.status, 0) << dropped.out;
  Result one =
      trainer("--config " + batchnorm_config("bn_one", "train: {epochs: 1, batch_size: 32}\n") +
              " --batch-size 1 --quiet");
  EXPECT_EQ(one.status, 3) << one.out;
  EXPECT_NE(one.out.find("needs at least 2 samples a batch"), std::string::npos) << one.out;
}

TEST(BadInput, ADeviceNumberBeyondAnIntIsAUsageErrorNotAnInternalOne) {
  for (const char* device : {"cpu:99999999999", "gpu:99999999999"}) {
    Result r = trainer("--config " + one_epoch_config("device_range") + " --device " + device +
                       " --quiet");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(
        r.out.find(std::string("error: bad device '") + device + "': 99999999999 is out of range"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("hint: give the "), std::string::npos) << r.out;
  }
}

TEST(BadInput, ANonFiniteInputBatchPointsAtDataNormalizeNotTheLearningRate) {
  // A std of 1e-40 is positive, and divides the pixels to infinity: no learning rate helps.
  std::string yaml = tandem::test::small_model_yaml("tiny_std");
  const std::string seed = "seed: 3}";
  yaml.replace(yaml.find(seed), seed.size(), "seed: 3, normalize: {mean: [0], std: [1e-40]}}");
  const std::string config =
      tandem::test::write_temp_file("tiny_std.yaml", yaml + "train: {epochs: 1, batch_size: 32}\n");
  Result r = trainer("--config " + config + " --quiet");
  EXPECT_EQ(r.status, 6) << r.out;
  EXPECT_NE(r.out.find("the input batch holds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: give data.normalize a finite mean and a std well above 0"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("lower the learning rate"), std::string::npos) << r.out;
}

}  // namespace
