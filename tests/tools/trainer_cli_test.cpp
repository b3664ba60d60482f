// The trainer executable as a user meets it: flags, exit codes, messages, metrics files.
#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend_registry.h"
#include "tests/tools/cli_util.h"

namespace {

using Result = tandem::test::CliResult;

Result trainer(const std::string& args) { return tandem::test::run_trainer(args); }
std::string source(const std::string& rel) { return tandem::test::source_path(rel); }
std::string write_temp(const std::string& name, const std::string& text) {
  return tandem::test::write_temp_file(name, text);
}

TEST(TrainerCli, HelpListsTheFlagsAndExitsZero) {
  Result r = trainer("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag :
       {"--config", "--device", "--epochs", "--batch-size", "--lr", "--seed", "--threads",
        "--metrics", "--quiet", "bench", "devices", "--checkpoint-dir", "--resume"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(r.out.find("130 stopped by SIGINT, 143 by SIGTERM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("7 checkpoint unreadable or mismatched"), std::string::npos) << r.out;
}

TEST(TrainerCli, VersionPrintsTheVersion) {
  Result r = trainer("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("tandem 0."), std::string::npos);
}

TEST(TrainerCli, HelpAndVersionAreAlsoCommands) {
  Result all = trainer("help"), bench = trainer("help bench"), version = trainer("version");
  EXPECT_EQ(all.status, 0) << all.out;
  EXPECT_EQ(all.out, trainer("--help").out);
  EXPECT_EQ(bench.status, 0) << bench.out;
  EXPECT_EQ(bench.out, trainer("bench --help").out);
  EXPECT_EQ(version.out, trainer("--version").out);
  Result other = trainer("help bnech");
  EXPECT_EQ(other.status, 2) << other.out;
  EXPECT_NE(other.out.find("error: trainer help takes one command name, got 'bnech'"),
            std::string::npos)
      << other.out;
}

TEST(TrainerCli, AMisspeltCommandGetsTheNearest) {
  Result r = trainer("bnech --config x.yaml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: unknown command 'bnech'; did you mean 'bench'?"), std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("hint: the commands are train, bench, devices, export-images, eval, predict"),
      std::string::npos)
      << r.out;
}

// --flag=value is --flag value; a flag that takes no value refuses one.
TEST(TrainerCli, FlagsTakeTheirValueAfterAnEqualsSignToo) {
  const std::string config = tandem::test::write_dense_config(
      "equals", {.classes = 3,
                 .data = "train_size: 32, test_size: 8",
                 .train = "epochs: 3, batch_size: 8, optimizer: {type: sgd, lr: 0.1}"});
  Result r = trainer("--config=" + config + " --epochs=1 --lr=0.05 --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("after 1 epoch,"), std::string::npos) << r.out;
  Result twice = trainer("--config " + config + " --epochs=1 --epochs 2");
  EXPECT_EQ(twice.status, 2) << twice.out;
  EXPECT_NE(twice.out.find("--epochs is given twice ('1', then '2')"), std::string::npos)
      << twice.out;
  Result flag = trainer("--config " + config + " --quiet=1");
  EXPECT_EQ(flag.status, 2) << flag.out;
  EXPECT_NE(flag.out.find("error: --quiet takes no value, got '--quiet=1'"), std::string::npos)
      << flag.out;
}

// An empty value (an unset shell variable: --checkpoint-dir "$DIR") is refused, not ignored.
TEST(TrainerCli, AnEmptyFlagValueIsRefused) {
  for (const std::string flag : {"--checkpoint-dir", "--config"}) {
    Result r = trainer(flag + " '' --epochs 1");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("error: " + flag +
                         " is given an empty value\nhint: give it a value, or "
                         "leave " +
                         flag + " out"),
              std::string::npos)
        << r.out;
  }
}

TEST(TrainerCli, BenchRefusesABatchSizeBesideBatchSizes) {
  Result r = trainer("bench --config " + source("configs/lenet.yaml") +
                     " --batch-sizes 16,64 --batch-size 32");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --batch-size 32 and --batch-sizes 16,64 are both given"),
            std::string::npos)
      << r.out;
}

// A run that ends where guessing would says so, with the learning rate it had.
TEST(TrainerCli, ARunThatEndsAtChanceSaysSo) {
  const std::string config = tandem::test::write_dense_config(
      "chance", {.classes = 4,
                 .data = "train_size: 32, test_size: 400",
                 .train = "epochs: 1, batch_size: 8, optimizer: {type: sgd, lr: 1.0e-9}"});
  Result r = trainer("--config " + config + " --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(test accuracy ([0-9.]+)%)"))) << r.out;
  if (std::stod(m[1]) >= 31) GTEST_SKIP() << "this seed's untrained model beat chance: " << r.out;
  // Filled to 80 columns: compared with its lines joined.
  const std::string joined = std::regex_replace(r.out, std::regex("\\s+"), " ");
  EXPECT_NE(joined.find("is about chance for 4 classes (25%): the model has not learnt; the usual "
                        "causes are a learning rate too low (this run's: 1e-09), too few epochs"),
            std::string::npos)
      << r.out;
  Result learnt = trainer("--config " + source("configs/mlp.yaml") + " --epochs 1 --quiet");
  ASSERT_EQ(learnt.status, 0) << learnt.out;
  EXPECT_EQ(learnt.out.find("about chance"), std::string::npos) << learnt.out;
}

TEST(TrainerCli, AConfigFileGivenAloneNamesTheConfigFlag) {
  Result r = trainer("configs/lenet.yaml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("a config file is given with --config"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: trainer --config configs/lenet.yaml"), std::string::npos) << r.out;
  r = trainer("bench configs/lenet.yaml");
  EXPECT_NE(r.out.find("hint: trainer bench --config configs/lenet.yaml"), std::string::npos)
      << r.out;
}

// The command line's mistakes come before the banner, and a flag with nowhere to write says so.
TEST(TrainerCli, APlotPathOfAnotherKindIsRefusedBeforeTheBanner) {
  Result r = trainer("--config " + source("configs/mlp.yaml") + " --plot curves.jpg");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out.find("tandem "), std::string::npos) << "the banner came first: " << r.out;
}

TEST(TrainerCli, LogEveryWithNowhereToWriteSaysSo) {
  const std::string config = tandem::test::write_dense_config(
      "log_every", {.data = "train_size: 32, test_size: 8", .train = "epochs: 1, batch_size: 8"});
  Result r = trainer("--config " + config + " --quiet --log-every 2");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("warning: --log-every 2 has nowhere to write"), std::string::npos) << r.out;
  r = trainer("--config " + config + " --quiet --log-every 2 --metrics " + ::testing::TempDir() +
              "log_every.jsonl");
  EXPECT_EQ(r.out.find("nowhere to write"), std::string::npos) << r.out;
}

TEST(TrainerCli, UnknownFlagIsAUsageError) {
  Result r = trainer("--config x.yaml --epoch 3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown argument '--epoch'"), std::string::npos) << r.out;
}

TEST(TrainerCli, BadConfigExitsThreeWithFileAndLine) {
  std::string path = write_temp(
      "bad_layer.yaml", "input: {shape: [1, 8, 8]}\nlayers:\n  - flatten\n  - dense: {unit: 10}\n");
  Result r = trainer("--config " + path + " --quiet");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.out.find("bad_layer.yaml:4:12: layer 2 (dense): missing required key 'units'"),
            std::string::npos)
      << r.out;
}

TEST(TrainerCli, MissingDataFolderExitsFourNamingItAndTheFlagItCameFrom) {
  Result r =
      trainer("--config " + source("configs/lenet.yaml") + " --data /nonexistent/mnist --quiet");
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(
      r.out.find("error: --data '/nonexistent/mnist' is no folder here: looked in "
                 "/nonexistent/mnist (as given)\nhint: give the folder that holds MNIST's IDX "
                 "files: train-images-idx3-ubyte and train-labels-idx1-ubyte, with t10k-* or "
                 "test-* for the test split"),
      std::string::npos)
      << r.out;
}

// A model for 28x28 MNIST digits with the given data section.
std::string mnist_config(const std::string& name, const std::string& data) {
  return write_temp(name + ".yaml",
                    "input: {shape: [1, 28, 28]}\nlayers:\n  - flatten\n  - dense: {units: 10}\n"
                    "data: " +
                        data + "\n");
}

TEST(TrainerCli, MissingDataFolderFromTheConfigNamesTheKeyAndTheFile) {
  const std::string config = mnist_config("missing_path", "{format: mnist, path: /nonexistent/m}");
  Result r = trainer("--config " + config + " --quiet");
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(
      r.out.find("error: data.path (" + config +
                 ":5:29) '/nonexistent/m' is no folder "
                 "here: looked in /nonexistent/m (as given)\nhint: give the folder that holds "
                 "MNIST's IDX files"),
      std::string::npos)
      << r.out;
}

TEST(TrainerCli, MissingTestFolderNamesDataTest) {
  const std::string config =
      mnist_config("missing_test", "{format: mnist, train: " + source("datasets/mnist-sample") +
                                       ", test: /nonexistent/t}");
  Result r = trainer("--config " + config + " --quiet");
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.out.find("error: the MNIST test data folder '/nonexistent/t', given by data.test "
                       "in " +
                       config + ", does not exist"),
            std::string::npos)
      << r.out;
}

TEST(TrainerCli, UnknownDeviceListsTheKnownOnes) {
  Result r = trainer("--config " + source("configs/lenet.yaml") + " --device tpu --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown device 'tpu'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: give cpu, cpu:N (N threads), gpu, gpu:N (GPU number N), auto, all, "
                       "or a comma list of them such as cpu,gpu"),
            std::string::npos)
      << r.out;
}

TEST(TrainerCli, MistypedDeviceGetsTheNearestAndEveryAcceptedForm) {
  const std::vector<std::pair<std::string, std::string>> typed = {
      {"cuda", "gpu"}, {"Cpu", "cpu"}, {"GPU", "gpu"}, {"al", "all"}, {"CUDA:1", "gpu:1"}};
  for (const auto& [device, meant] : typed) {
    Result r = trainer("--config " + source("configs/lenet.yaml") + " --device cpu," + device);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("error: unknown device '" + device + "'; did you mean '" + meant +
                         "'?\nhint: give cpu, cpu:N (N threads), gpu, gpu:N (GPU number N), "
                         "auto, all, or a comma list of them such as cpu,gpu"),
              std::string::npos)
        << r.out;
  }
}

TEST(TrainerCli, DeviceAutoTakesTheGpuWhenItCanRunElseTheCpuAndSaysWhy) {
  const std::string config = tandem::test::one_epoch_config("auto");
  const std::string metrics = ::testing::TempDir() + "auto.jsonl";
  Result r = trainer("--config " + config + " --device auto --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  std::string why;
  const bool gpu = tandem::gpu_usable(&why);
  std::ifstream in(metrics);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << r.out;
  if (gpu) {
    EXPECT_NE(r.out.find("--device auto: the GPU is usable, running on gpu"), std::string::npos)
        << r.out;
    EXPECT_NE(line.find("\"device\": \"gpu\""), std::string::npos) << line;
    return;
  }
  // Here: one line with the cause this build or machine gives, and the run goes on on the CPU.
  EXPECT_EQ(r.out.find("warning: --device auto: running on the CPU, because " + why + "\n"), 0u)
      << r.out;
  if (tandem::build_has_cuda())
    EXPECT_TRUE(why.find("no NVIDIA driver found") != std::string::npos ||
                why.find("no NVIDIA GPU found") != std::string::npos)
        << why;
  else
    EXPECT_NE(why.find("this build has no GPU backend"), std::string::npos) << why;
  EXPECT_NE(line.find("\"device\": \"cpu\""), std::string::npos) << line;
}

// --device all: the CPU, then every GPU that can run here, side by side; here without a GPU, the
// CPU alone and the line that says why.
TEST(TrainerCli, DeviceAllTrainsOnTheCpuThenEveryUsableGpuElseSaysWhyNot) {
  const std::string config = tandem::test::one_epoch_config("all");
  const std::string metrics = ::testing::TempDir() + "all.jsonl";
  Result r = trainer("--config " + config + " --device all --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  std::string why;
  const int gpus = tandem::gpu_usable(&why) ? tandem::gpu_count() : 0;
  std::vector<std::string> devices;
  std::ifstream in(metrics);
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, std::regex(R"re("device": "([^"]+)")re")))
      devices.push_back(m[1]);
  std::vector<std::string> want{"cpu"};
  for (int i = 0; i < gpus; ++i) want.push_back(gpus == 1 ? "gpu" : "gpu:" + std::to_string(i));
  EXPECT_EQ(devices, want) << r.out;
  if (gpus > 0) {
    EXPECT_NE(r.out.find("speedup"), std::string::npos) << r.out;  // the side-by-side table
    return;
  }
  EXPECT_NE(r.out.find("--device all: the CPU only, because " + why), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("speedup"), std::string::npos) << r.out;
}

// eval and predict run on one device: "all" or a list is refused, saying so, before the
// checkpoint is looked for.
TEST(TrainerCli, EvalAndPredictRefuseAListOfDevices) {
  Result r = trainer("predict --checkpoint nowhere.safetensors --device all x.png");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--device all is a list of devices, and this command runs on one"),
            std::string::npos)
      << r.out;
  r = trainer("eval --checkpoint nowhere.safetensors --device cpu,gpu");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("eval runs on one device, and --device gives 2"), std::string::npos)
      << r.out;
}

TEST(TrainerCli, MetricsFileHasOneJsonLinePerEpoch) {
  std::string config = tandem::test::write_dense_config(
      "synthetic",
      {.hidden = {16},
       .classes = 4,
       .data = "train_size: 64, test_size: 32, seed: 1",
       .train = "epochs: 2, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 1"});
  std::string metrics = ::testing::TempDir() + "metrics.jsonl";
  Result r = trainer("--config " + config + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Epoch 2/2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("img/s"), std::string::npos);
  std::ifstream in(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
    for (const char* key :
         {"\"device\": \"cpu\"", "\"epoch\": ", "\"train_loss\": ", "\"train_accuracy\": ",
          "\"test_loss\": ", "\"test_accuracy\": ", "\"seconds\": ", "\"images_per_second\": "})
      EXPECT_NE(line.find(key), std::string::npos) << key << " in " << line;
  }
  EXPECT_EQ(lines, 2);
}

TEST(TrainerCli, BenchJsonHasTheDocumentedKeys) {
  Result r = trainer("bench --config " + source("configs/lenet.yaml") +
                     " --device cpu --batch-size 8 --steps 2 --warmup 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* key : {"\"device\": \"cpu\"", "\"config\": \"lenet\"", "\"batch_size\": 8",
                          "\"train_images_per_second\": ", "\"infer_images_per_second\": ",
                          "\"train_ms_per_step\": ", "\"train_gflops\": ", "\"peak_gflops\": ",
                          "\"percent_of_peak\": ", "\"peak_how\": \"measured: ",
                          // LeNet's 5x5 convolutions: no Winograd or FFT algorithm on a CPU
                          "\"transformed_convolutions\": false"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
}

TEST(TrainerCli, BenchJsonNamesTheThreadsUsedNotZeroForEveryCore) {
  const std::string args = "bench --config " + source("configs/mlp.yaml") +
                           " --batch-size 8 --steps 1 --warmup 0 --json --device ";
  Result every = trainer(args + "cpu");
  ASSERT_EQ(every.status, 0) << every.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(every.out, m, std::regex("\"threads\": (\\d+)"))) << every.out;
  // Every core this process may run on (what the CPU backend's threads: 0 takes).
  cpu_set_t cores;
  ASSERT_EQ(sched_getaffinity(0, sizeof cores, &cores), 0);
  EXPECT_EQ(std::stoi(m[1]), CPU_COUNT(&cores)) << every.out;
  Result two = trainer(args + "cpu:2");
  ASSERT_EQ(two.status, 0) << two.out;
  EXPECT_NE(two.out.find("\"threads\": 2,"), std::string::npos) << two.out;
}

}  // namespace
