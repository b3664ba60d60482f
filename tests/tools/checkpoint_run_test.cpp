// Checkpoints of training runs: written every few epochs and pruned, resumed bit for bit, and
// written on Ctrl-C.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "datasets/dataset.h"
#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string small_config(const std::string& extra_train = "") {
  return test::write_temp_file("checkpoint_run.yaml",
                               test::small_model_yaml("ckpt_small") + R"(train:
  epochs: 3
  batch_size: 32
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
  seed: 5
)" + extra_train);
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(CheckpointRun, EveryEpochIntoTheFolderKeepingTheNewest) {
  register_everything();
  const std::string dir = test::fresh_dir("ckpt_every");
  RunRequest r;
  r.config_path = small_config("  checkpoint: {dir: " + dir + ", every: 1, keep: 2}\n");
  r.quiet = true;
  ASSERT_EQ(run_train(r), 0);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"epoch-2.safetensors", "epoch-3.safetensors"}));
  CheckpointMeta m = read_checkpoint_meta(dir + "/epoch-3.safetensors");
  EXPECT_EQ(m.epoch, 3);
  EXPECT_EQ(m.step, 24u);  // 8 batches of 32 per epoch
  EXPECT_EQ(m.seed, 5u);
  EXPECT_EQ(m.device, "cpu");
  EXPECT_NE(m.config_text.find("name: ckpt_small"), std::string::npos);
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(m.batch_size, 32);
}

TEST(CheckpointRun, CheckpointDirFlagAndEveryTwoEpochs) {
  register_everything();
  const std::string dir = test::fresh_dir("ckpt_flag");
  RunRequest r;
  r.config_path = small_config("  checkpoint: {every: 2}\n");
  r.checkpoint_dir = dir;
  r.epochs = 4;
  r.quiet = true;
  ASSERT_EQ(run_train(r), 0);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"epoch-2.safetensors", "epoch-4.safetensors"}));
}

// One training run in-process, as the trainer does it, on `threads` CPU threads.
struct InProcessRun {
  Config config;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Loss> loss;
  DataSplits data;

  explicit InProcessRun(int threads) : config(load_config(small_config())) {
    register_everything();
    BackendOptions o;
    o.threads = threads;
    backend = create_backend("cpu", o);
    graph = std::make_unique<Graph>(config);
    loss = make_loss(config.loss);
    data = load_data(config.data, config.input, static_cast<int>(graph->classes()));
    graph->allocate(*backend, config.train.batch_size, config.train.seed);
  }
  TrainResult train(TrainOptions options) {
    options.progress = false;
    Batcher train_src(data.train, config.train.batch_size, true, config.train.seed, {}, {});
    return tandem::train(config, *graph, *loss, *backend, train_src, nullptr, options);
  }
};

// Stops after `steps` steps, writing the checkpoint there; returns its position.
TrainPosition stop_and_save(const std::string& path, uint64_t steps) {
  InProcessRun run(2);
  TrainPosition saved;
  TrainOptions options;
  uint64_t done = 0;
  options.stop = [&] { return ++done == steps; };
  options.callbacks.push_back(on_checkpoint([&](const Checkpoint& c) {
    TrainStep& step = c.step;
    const TrainPosition& at = c.at;
    if (done != steps) return;
    CheckpointMeta meta;
    meta.epoch = at.epoch;
    meta.batch = at.batch;
    meta.step = at.step;
    meta.seed = run.config.train.seed;
    save_checkpoint(path, step.graph(), step.optimizer(), meta);
    saved = at;
  }));
  TrainResult r = run.train(options);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.step_losses.size(), steps);
  return saved;
}

std::vector<double> resume(const std::string& path, const TrainPosition& at) {
  InProcessRun run(2);
  TrainOptions options;
  options.start = at;
  options.callbacks.push_back(on_run_start([&](const RunStart& e) {
    TrainStep& step = e.step;
    restore_checkpoint(path, step.graph(), step.optimizer());
  }));
  return run.train(options).step_losses;
}

TEST(Resume, AtAnEpochBoundaryEqualsAnUninterruptedRunBitForBit) {
  const std::vector<double> whole = InProcessRun(2).train({}).step_losses;
  ASSERT_EQ(whole.size(), 24u);
  const std::string path = ::testing::TempDir() + "resume_boundary.safetensors";
  const TrainPosition at = stop_and_save(path, 8);  // the last step of epoch 1
  EXPECT_EQ(at.epoch, 1);
  EXPECT_EQ(at.batch, 0);
  EXPECT_EQ(at.step, 8u);
  const std::vector<double> rest = resume(path, at);
  ASSERT_EQ(rest.size(), 16u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], whole[8 + i]) << "step " << 8 + i;
}

TEST(Resume, MidEpochEqualsAnUninterruptedRunBitForBit) {
  const std::vector<double> whole = InProcessRun(2).train({}).step_losses;
  const std::string path = ::testing::TempDir() + "resume_mid.safetensors";
  const TrainPosition at = stop_and_save(path, 11);
  EXPECT_EQ(at.epoch, 1);
  EXPECT_EQ(at.batch, 3);
  const std::vector<double> rest = resume(path, at);
  ASSERT_EQ(rest.size(), 13u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i], whole[11 + i]) << "step " << 11 + i;
}

TEST(Resume, WithoutTheOptimizerStateDiverges) {
  // The check above would pass vacuously if the state did not matter: with momentum it does.
  const std::vector<double> whole = InProcessRun(2).train({}).step_losses;
  const std::string path = ::testing::TempDir() + "resume_nostate.safetensors";
  const TrainPosition at = stop_and_save(path, 8);
  InProcessRun run(2);
  TrainOptions options;
  options.start = at;
  options.callbacks.push_back(on_run_start([&](const RunStart& e) {
    TrainStep& step = e.step;
    restore_checkpoint(path, step.graph(), step.optimizer());
    for (auto& [name, t] : step.optimizer().state()) run.backend->fill(t, 0.f);
  }));
  const std::vector<double> rest = run.train(options).step_losses;
  EXPECT_NE(rest[1], whole[9]);
}

// A quiet run of the small config checkpointing into `dir`, of `epochs` epochs (unset: the
// config's 3).
RunRequest checkpointing_run(const std::string& dir, std::optional<int64_t> epochs = {}) {
  register_everything();
  RunRequest r;
  r.config_path = small_config();
  r.checkpoint_dir = dir;
  r.epochs = epochs;
  r.quiet = true;
  return r;
}

// `first` again, resumed from the newest checkpoint in its folder, to `epochs` epochs in all.
RunRequest resumed(const RunRequest& first, int64_t epochs) {
  RunRequest again = first;
  again.resume = first.checkpoint_dir;
  again.epochs = epochs;
  return again;
}

TEST(Resume, FromTheNewestInAFolderContinuesToTheTotalEpochs) {
  const std::string metrics = ::testing::TempDir() + "ckpt_resume.jsonl";
  RunRequest first = checkpointing_run(test::fresh_dir("ckpt_resume"), 2);
  first.metrics_path = metrics;
  ASSERT_EQ(run_train(first), 0);
  // A line of a later epoch (an earlier, longer run into the same file) is not this run's.
  std::ofstream(metrics, std::ios::app) << "{\"device\": \"cpu\", \"epoch\": 7}\n";
  RunRequest again = resumed(first, 3);
  again.checkpoint_dir.clear();
  ASSERT_EQ(run_train(again), 0);
  std::ifstream in(metrics);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u) << "the first run's epochs 1 and 2, then the resumed epoch 3";
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_NE(lines[i].find("\"epoch\": " + std::to_string(i + 1) + ","), std::string::npos)
        << lines[i];
}

// The checkpoints carry the run's epochs, so a resumed run writes them into a metrics file of its
// own and passes them on in its own checkpoints.
TEST(Resume, TheMetricsAndCheckpointsOfAResumedRunHoldEveryEpoch) {
  const std::string dir = test::fresh_dir("ckpt_history");
  const RunRequest first = checkpointing_run(dir, 2);
  ASSERT_EQ(run_train(first), 0);
  const CheckpointMeta before = read_checkpoint_meta(dir + "/epoch-2.safetensors");
  ASSERT_EQ(before.history.size(), 2u);
  RunRequest again = resumed(first, 3);
  again.metrics_path = dir + "/after_resume.csv";
  ASSERT_EQ(run_train(again), 0);

  const CheckpointMeta after = read_checkpoint_meta(dir + "/epoch-3.safetensors");
  ASSERT_EQ(after.history.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(after.history[i].epoch, static_cast<int64_t>(i + 1));
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(after.history[i].train_loss, before.history[i].train_loss) << "epoch " << i + 1;
  std::ifstream in(again.metrics_path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << "a header, then epochs 1 and 2 from the checkpoint, then 3";
  for (size_t i = 0; i < 3; ++i) {
    const EpochStats& e = after.history[i];
    EXPECT_EQ(lines[i + 1].rfind(fmt::format("cpu,{},{:.6g},", e.epoch, e.train_loss), 0), 0u)
        << lines[i + 1];
  }
}

TEST(Resume, RefusesADoneRunAnotherSeedAndAnotherModel) {
  const std::string dir = test::fresh_dir("ckpt_refuse");
  const RunRequest first = checkpointing_run(dir);
  ASSERT_EQ(run_train(first), 0);
  auto error_of = [](const RunRequest& r) -> std::string {
    try {
      run_train(r);
    } catch (const CheckpointError& e) {
      return e.cause() + " | " + e.hint();
    }
    return "";
  };
  RunRequest r = first;
  r.resume = dir + "/epoch-3.safetensors";
  EXPECT_NE(error_of(r).find("has already trained 3 epochs of the 3 asked"), std::string::npos);
  r.epochs = 4;
  r.devices = {"cpu:1", "cpu:2"};
  EXPECT_THROW(run_train(r), UsageError) << "one run resumes on one device";
  r.devices = {"cpu"};
  r.seed = 6;
  EXPECT_NE(error_of(r).find("trained with seed 5, this run has seed 6"), std::string::npos);
  r.seed.reset();
  r.batch_size = 16;
  const std::string batch = error_of(r);
  EXPECT_NE(batch.find("trained with batch size 32, this run has batch size 16"), std::string::npos)
      << batch;
  EXPECT_NE(batch.find("resume with --batch-size 32, or start a new run"), std::string::npos);
  r.batch_size.reset();
  r.config_path = test::write_temp_file("checkpoint_other.yaml", R"(name: other
input: {shape: [1, 12, 12]}
layers:
  - conv2d: {filters: 8, kernel: 3}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 256, test_size: 64, seed: 3}
train: {epochs: 4, batch_size: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}, seed: 5}
)");
  EXPECT_NE(error_of(r).find("holds another model: its layer 1 is conv2d_1 [4, 10, 10] (40 "
                             "parameters), this config's is conv2d_1 [8, 10, 10] (80 parameters)"),
            std::string::npos)
      << error_of(r);
}

TEST(CheckpointRun, WrittenOnTheCpuLoadsOnTheGpu) {
  register_everything();
  std::unique_ptr<Backend> gpu;
  try {
    gpu = create_backend("gpu", {});
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable GPU: " << e.cause();
  }
  std::unique_ptr<Backend> cpu = create_backend("cpu", {});
  std::vector<float> values(30);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 3.f;
  Tensor src(*cpu, Shape{5, 6});
  cpu->upload(src, values.data());
  const std::string path = ::testing::TempDir() + "cross_device.safetensors";
  write_checkpoint(path, {{"dense_1.weight", src}}, {});
  NamedTensors dst = {{"dense_1.weight", Tensor(*gpu, Shape{5, 6})}};
  gpu->fill(dst[0].second, 0.f);
  read_checkpoint(path, dst);
  std::vector<float> back(values.size());
  gpu->download(back.data(), dst[0].second);
  EXPECT_EQ(back, values);
}

// Starts the built trainer, waits for its device table (printed after the signal handlers are
// installed), lets it train about a second, sends `sig`; returns its exit status and output.
// `repeats` sends it that many times back to back, as GNU timeout does (to the process, then to
// its group).
test::CliResult interrupt_trainer(const std::string& args, int sig, const std::string& cwd = ".",
                                  int repeats = 1) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, "pipe failed"};
  const std::string cmd = "cd '" + cwd + "' && exec " + std::string(TANDEM_TRAINER) + " " + args;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  bool sent = false;
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) {
    out.append(buf, static_cast<size_t>(n));
    // A progress line: steps have run, so the checkpoint has something to hold.
    if (!sent && out.find(" img/s") != std::string::npos) {
      for (int k = 0; k < repeats; ++k) kill(pid, sig);
      sent = true;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Trains for a minute or so unless stopped.
std::string long_config() {
  return test::write_temp_file("checkpoint_long.yaml", R"(name: ckpt_long
input: {shape: [3, 32, 32]}
layers:
  - conv2d: {filters: 32, kernel: 5, padding: 2}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 2048, test_size: 64, seed: 3}
train: {epochs: 200, batch_size: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}, seed: 5}
)");
}

// The checkpoint the trainer said it wrote, which must then resume.
void expect_resumable_checkpoint(const std::string& out, const std::string& dir) {
  const size_t at = out.find("checkpoint: " + dir + "/");
  ASSERT_NE(at, std::string::npos) << out;
  const size_t begin = at + std::string("checkpoint: ").size();
  const std::string path = out.substr(begin, out.find(' ', begin) - begin);
  const CheckpointMeta m = read_checkpoint_meta(path);
  EXPECT_GT(m.step, 0u);
  register_everything();
  RunRequest r;
  r.config_path = long_config();
  r.resume = path;
  r.epochs = m.epoch + 1;
  r.quiet = true;
  EXPECT_EQ(run_train(r), 0);
}

TEST(TrainerSignals, CtrlCWritesACheckpointAndExits130) {
  const std::string dir = test::fresh_dir("ckpt_sigint");
  auto r = interrupt_trainer("--config " + long_config() + " --threads 1 --checkpoint-dir " + dir,
                             SIGINT);
  ASSERT_EQ(r.status, 130) << r.out;
  EXPECT_NE(r.out.find("stopped by SIGINT at step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--resume " + dir + "/epoch-"), std::string::npos) << r.out;
  expect_resumable_checkpoint(r.out, dir);
}

// GNU timeout's SIGTERM arrives twice: the second must not quit before the checkpoint is written.
TEST(TrainerSignals, ASigtermDeliveredTwiceStillWritesTheCheckpoint) {
  const std::string dir = test::fresh_dir("ckpt_sigterm_twice");
  auto r = interrupt_trainer("--config " + long_config() + " --threads 1 --checkpoint-dir " + dir,
                             SIGTERM, ".", 2);
  ASSERT_EQ(r.status, 143) << r.out;
  EXPECT_EQ(r.out.find("stopped at once"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stopped by SIGTERM at step"), std::string::npos) << r.out;
  expect_resumable_checkpoint(r.out, dir);
}

// The command a stopped run printed after "continue with: ".
std::string continue_command(const std::string& out) {
  const size_t at = out.find("continue with: ");
  if (at == std::string::npos) return "";
  const size_t begin = at + std::string("continue with: ").size();
  return out.substr(begin, out.find('\n', begin) - begin);
}

// It was "trainer --config FILE --resume PATH": the run's other flags lost, so that the command
// failed (another batch size) or trained another run (other epochs, data, learning rate).
TEST(TrainerSignals, TheContinueCommandRepeatsEveryFlagAndResumesTheRun) {
  const std::string dir = test::fresh_dir("ckpt continue");  // a space: the path is quoted
  auto r = interrupt_trainer("--config " + long_config() +
                                 " --threads 1 --epochs 6 --batch-size 64 --lr 0.02 --seed 7 "
                                 "--checkpoint-dir '" +
                                 dir + "'",
                             SIGINT);
  ASSERT_EQ(r.status, 130) << r.out;
  const std::string command = continue_command(r.out);
  ASSERT_EQ(command.find(std::string(TANDEM_TRAINER) + " --config " + long_config() +
                         " --threads 1 --epochs 6 --batch-size 64 --lr 0.02 --seed 7 "
                         "--checkpoint-dir '" +
                         dir + "' --resume '" + dir + "/epoch-"),
            0u)
      << r.out;
  const test::CliResult resumed = test::run_command(command);
  ASSERT_EQ(resumed.status, 0) << command << "\n" << resumed.out;
  EXPECT_NE(resumed.out.find("Resume " + dir + "/epoch-"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("after 6 epochs"), std::string::npos) << resumed.out;
}

// Of a device list, the run that stopped is named, and its command continues it alone, in the
// folder it wrote to; the devices after it did not run.
TEST(TrainerSignals, OfADeviceListTheContinueCommandIsTheStoppedDevices) {
  const std::string dir = test::fresh_dir("ckpt_continue_list");
  auto r = interrupt_trainer("--config " + long_config() +
                                 " --device cpu:1,cpu:2 --epochs 4 --batch-size 64 "
                                 "--checkpoint-dir " +
                                 dir,
                             SIGINT);
  ASSERT_EQ(r.status, 130) << r.out;
  EXPECT_NE(r.out.find("the cpu:1 run: stopped by SIGINT at step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not run: cpu:2"), std::string::npos) << r.out;
  const std::string command = continue_command(r.out);
  ASSERT_EQ(command.find(std::string(TANDEM_TRAINER) + " --config " + long_config() +
                         " --device cpu:1 --epochs 4 --batch-size 64 --checkpoint-dir " + dir +
                         "/cpu-1 --resume " + dir + "/cpu-1/epoch-"),
            0u)
      << r.out;
  const test::CliResult resumed = test::run_command(command);
  ASSERT_EQ(resumed.status, 0) << command << "\n" << resumed.out;
  EXPECT_NE(resumed.out.find("cpu:1: test accuracy"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("after 4 epochs"), std::string::npos) << resumed.out;
}

TEST(TrainerSignals, SigtermWritesACheckpointAndExits143) {
  const std::string dir = test::fresh_dir("ckpt_sigterm");
  auto r = interrupt_trainer("--config " + long_config() + " --threads 1 --checkpoint-dir " + dir,
                             SIGTERM);
  ASSERT_EQ(r.status, 143) << r.out;
  EXPECT_NE(r.out.find("stopped by SIGTERM"), std::string::npos) << r.out;
  expect_resumable_checkpoint(r.out, dir);
}

TEST(TrainerSignals, WithoutACheckpointFolderCtrlCWritesUnderRuns) {
  const std::string cwd = test::fresh_dir("ckpt_cwd");
  fs::create_directories(cwd);
  auto r = interrupt_trainer("--config " + long_config() + " --threads 1", SIGINT, cwd);
  ASSERT_EQ(r.status, 130) << r.out;
  ASSERT_NE(r.out.find("checkpoint: runs/ckpt_long/epoch-"), std::string::npos) << r.out;
  const std::string dir = cwd + "/runs/ckpt_long";
  ASSERT_EQ(files_in(dir).size(), 1u);
  EXPECT_GT(read_checkpoint_meta(find_checkpoint(dir)).step, 0u);
}

// A working folder that cannot hold runs/ (/proc/self, even for root): the stop's checkpoint goes
// to the system's temporary folder, says so, and the run still ends as a stop.
TEST(TrainerSignals, CtrlCWhereRunsCannotBeMadeWritesToTheTemporaryFolder) {
  const std::string dir = (fs::temp_directory_path() / "tandem-runs/runs/ckpt_long").string();
  fs::remove_all(dir);
  auto r = interrupt_trainer("--config " + long_config() + " --threads 1", SIGINT, "/proc/self");
  ASSERT_EQ(r.status, 130) << r.out;
  EXPECT_NE(r.out.find("cannot create checkpoint folder 'runs/ckpt_long' ("), std::string::npos)
      << r.out;
  ASSERT_NE(r.out.find("checkpoint: " + dir + "/epoch-"), std::string::npos) << r.out;
  EXPECT_GT(read_checkpoint_meta(find_checkpoint(dir)).step, 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
