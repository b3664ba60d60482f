// Training in bf16 end to end: LeNet's accuracy, fp32 and bf16 side by side, checkpoints that
// record the precision and load in fp32, bit-exact resumes, and the refusals; on the GPU, bf16 and
// fp16 beside fp32 (skipped, with the reason, without a GPU that has them).
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include "datasets/dataset.h"
#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"

namespace tandem {
namespace {

using test::run_command;
using test::run_trainer;

bool cpu_has_bf16() {
  register_everything();
  return create_backend("cpu", {})->supports_dtype(DType::kBF16, nullptr);
}

#define SKIP_WITHOUT_BF16() \
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 instructions (trainer devices)"

// Why this machine's GPU cannot train in both bf16 and fp16; empty when it can.
std::string gpu_without_16bit() {
  register_everything();
  std::unique_ptr<Backend> gpu;
  try {
    gpu = create_backend("gpu", {});
  } catch (const DeviceError& e) {
    return "no usable GPU: " + e.cause();
  }
  std::string why;
  for (DType d : {DType::kBF16, DType::kF16})
    if (!gpu->supports_dtype(d, &why)) return why;
  return "";
}

#define SKIP_WITHOUT_GPU_16BIT() \
  if (const std::string why = gpu_without_16bit(); !why.empty()) GTEST_SKIP() << why

std::string small_config(const std::string& name, const std::string& train) {
  return test::write_temp_file(name + ".yaml",
                               test::small_model_yaml(name) + "train: {" + train + "}\n");
}

// LeNet learns the bundled MNIST sample in bf16 as in fp32: 90% after one epoch (the fp32 test's
// bar; 5 epochs reach 97%, bench/README.md).
TEST(MixedPrecisionRun, LeNetInBf16ReachesNinetyPercentInOneEpoch) {
  SKIP_WITHOUT_BF16();
  Config c = load_config(test::source_path("configs/lenet.yaml"));
  c.precision = "bf16";
  c.train.epochs = 1;
  DataSplits data = load_data(c.data, c.input, 10);
  Graph graph(c);
  BackendOptions o;
  o.threads = 2;
  auto backend = create_backend("cpu", o);
  auto loss = make_loss(c.loss);
  graph.allocate(*backend, c.train.batch_size, c.train.seed);
  Batcher train_src(data.train, c.train.batch_size, true, c.train.seed, c.data.mean, c.data.std);
  Batcher test_src(data.test, c.train.batch_size, false, c.train.seed, c.data.mean, c.data.std);
  TrainOptions opts;
  opts.progress = false;
  TrainResult r = train(c, graph, *loss, *backend, train_src, &test_src, opts);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_GE(r.epochs.back().test_accuracy, 0.90);
  EXPECT_LT(r.step_losses.back(), r.step_losses.front());
}

TEST(MixedPrecisionRun, OnePrecisionListRunsSideBySideWithA16BitTolerance) {
  SKIP_WITHOUT_BF16();
  auto r = run_trainer("--config " + small_config("sbs_precision", "epochs: 1, batch_size: 32") +
                       " --device cpu:1 --precision fp32,bf16 --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\ncpu:1 fp32 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncpu:1 bf16 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu:1 bf16 vs cpu:1 fp32: agree: first 8 steps within 5e-02"),
            std::string::npos)
      << r.out;
}

// The GPU's three precisions side by side on LeNet's small sibling: a row each, and the 16-bit
// runs agree with fp32 to their tolerance (engine/precision.h).
TEST(MixedPrecisionRun, GpuRunsFp32Bf16AndFp16SideBySide) {
  SKIP_WITHOUT_GPU_16BIT();
  auto r = run_trainer("--config " + small_config("gpu_precisions", "epochs: 1, batch_size: 32") +
                       " --device gpu --precision fp32,bf16,fp16 --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* p : {"fp32", "bf16", "fp16"})
    EXPECT_NE(r.out.find(std::string("\ngpu ") + p + " "), std::string::npos) << p << "\n" << r.out;
  EXPECT_NE(r.out.find("gpu bf16 vs gpu fp32: agree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpu fp16 vs gpu fp32: agree"), std::string::npos) << r.out;
}

// `trainer devices` says, in the GPU's table, whether fp16 (and bf16) are native there.
TEST(MixedPrecisionRun, GpuDevicesSaysWhetherFp16IsNative) {
  register_everything();
  std::unique_ptr<Backend> gpu;
  try {
    gpu = create_backend("gpu", {});
  } catch (const DeviceError& e) {
    GTEST_SKIP() << "no usable GPU: " << e.cause();
  }
  const bool fp16 = gpu->supports_dtype(DType::kF16, nullptr);
  auto d = run_trainer("devices");
  EXPECT_TRUE(
      std::regex_search(d.out, std::regex(fp16 ? R"(\bfp16 +native \()" : R"(\bfp16 +no \()")))
      << d.out;
}

TEST(MixedPrecisionRun, BenchNamesThePrecisionOfEveryRow) {
  SKIP_WITHOUT_BF16();
  auto r = run_trainer("bench --config " + small_config("bench_precision", "batch_size: 16") +
                       " --device cpu:1 --precision fp32,bf16 --steps 2 --warmup 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"device\": \"cpu:1 fp32\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"threads\": 1, \"precision\": \"bf16\""), std::string::npos) << r.out;
}

TEST(MixedPrecisionRun, APrecisionListMustPairWithTheDevices) {
  auto r = run_trainer("--config " + small_config("pairs", "epochs: 1") +
                       " --device cpu:1,cpu:2,cpu:1 --precision fp32,bf16");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--precision lists 2 precisions for 3 devices"), std::string::npos) << r.out;
  auto typo = run_trainer("--config " + small_config("typo", "epochs: 1") + " --precision bf61");
  EXPECT_EQ(typo.status, 2) << typo.out;
  EXPECT_NE(typo.out.find("unknown precision 'bf61'"), std::string::npos) << typo.out;
}

// The checkpoint holds fp32 master weights and says it was trained in bf16: it evaluates in fp32
// to the figures the bf16 run gave, within bf16's rounding.
TEST(MixedPrecisionRun, ABf16CheckpointRecordsItsPrecisionAndEvaluatesInFp32) {
  SKIP_WITHOUT_BF16();
  const std::string dir = test::fresh_dir("bf16_ckpt");
  auto train = run_trainer("--config " + small_config("bf16_ckpt", "epochs: 2, batch_size: 32") +
                           " --precision bf16 --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  const CheckpointMeta meta = read_checkpoint_meta(dir + "/epoch-2.safetensors");
  EXPECT_EQ(meta.precision, "bf16");
  auto eval = run_trainer("eval --quiet --precision fp32 --checkpoint " + dir);
  ASSERT_EQ(eval.status, 0) << eval.out;
  std::smatch trained, evaluated;
  ASSERT_TRUE(std::regex_search(train.out, trained, std::regex(R"(test accuracy ([0-9.]+)%)")));
  ASSERT_TRUE(std::regex_search(eval.out, evaluated, std::regex(R"(accuracy ([0-9.]+)%)")))
      << eval.out;
  EXPECT_NEAR(std::stod(evaluated[1]), std::stod(trained[1]), 5.0);  // 64 samples: 3 of them
}

// Resuming a bf16 run on the same device and threads continues it bit for bit.
TEST(MixedPrecisionRun, ResumingABf16RunEqualsTheUninterruptedRun) {
  SKIP_WITHOUT_BF16();
  const std::string cfg =
      small_config("bf16_resume", "epochs: 3, batch_size: 32, optimizer: {type: adam, lr: 0.01}");
  const std::string whole = test::fresh_dir("whole"), part = test::fresh_dir("part");
  auto a = run_trainer("--config " + cfg + " --device cpu:2 --precision bf16 --metrics " + whole +
                       ".jsonl --quiet --checkpoint-dir " + whole);
  ASSERT_EQ(a.status, 0) << a.out;
  auto b =
      run_trainer("--config " + cfg + " --device cpu:2 --precision bf16 --epochs 3 --metrics " +
                  part + ".jsonl --quiet --resume " + whole + "/epoch-1.safetensors");
  ASSERT_EQ(b.status, 0) << b.out;
  auto losses = [](const std::string& file) {
    std::ifstream in(file);
    std::vector<std::string> out;
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, std::regex(R"("train_loss": ([-0-9.e]+))")))
        out.push_back(m[1]);
    return out;
  };
  const std::vector<std::string> x = losses(whole + ".jsonl"), y = losses(part + ".jsonl");
  ASSERT_EQ(x.size(), 3u);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[1], x[1]);
  EXPECT_EQ(y[2], x[2]);
}

TEST(MixedPrecisionRun, Fp16OnTheCpuIsRefusedWithTheFix) {
  auto r = run_trainer("--config " + small_config("fp16_cpu", "epochs: 1") + " --precision fp16");
  EXPECT_EQ(r.status, 5) << r.out;
  EXPECT_NE(r.out.find("precision fp16 on cpu: the CPU computes in fp32 or bf16; fp16 is a GPU "
                       "precision (use bf16)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: use --precision bf16 or fp32 on the CPU (fp16 runs on GPUs: "
                       "trainer devices says what this machine has)"),
            std::string::npos)
      << r.out;
}

// oneDNN's DNNL_MAX_CPU_ISA=AVX2 stands in for a CPU without AVX512-BF16: on every x86-64 CPU
// tandem runs on (AVX2 at least) oneDNN then runs as avx2, and tandem's bf16 check follows it.
TEST(MixedPrecisionRun, ACpuWithoutBf16InstructionsIsRefusedAndDevicesSaysSo) {
  const std::string avx2 = "DNNL_MAX_CPU_ISA=AVX2";
  auto d = test::run_trainer_with(avx2, "devices");
  EXPECT_EQ(d.status, 0) << d.out;
  EXPECT_NE(d.out.find("ISA      avx2 (limited by DNNL_MAX_CPU_ISA=AVX2)"), std::string::npos)
      << d.out;
  EXPECT_NE(d.out.find("bf16     no (no AVX512-BF16 instructions within DNNL_MAX_CPU_ISA=AVX2"),
            std::string::npos)
      << d.out;
  auto r = test::run_trainer_with(
      avx2, "--config " + small_config("no_bf16", "epochs: 1") + " --precision bf16");
  EXPECT_EQ(r.status, 5) << r.out;
  EXPECT_NE(r.out.find("this CPU has no bf16 instructions (oneDNN runs it as avx2, held there by "
                       "DNNL_MAX_CPU_ISA=AVX2: unset it to use all of the CPU's instructions; "
                       "bf16 needs avx512_core_bf16"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch 1/1"), std::string::npos) << "nothing trains: " << r.out;
  // An fp32 run's banner does not speak of bf16, which it did not ask for.
  r = test::run_trainer_with(avx2, "--config " + small_config("no_bf16_fp32", "epochs: 1"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("bf16     no"), std::string::npos) << r.out;
  // Beside fp32 in a list: told before fp32 trains, which still runs; exit status 8.
  r = test::run_trainer_with(avx2, "--config " + small_config("no_bf16_list", "epochs: 1") +
                                       " --precision fp32,bf16 --quiet");
  EXPECT_EQ(r.status, 8) << r.out;
  const size_t told = r.out.find("error: cpu bf16 cannot run: precision bf16 on cpu");
  ASSERT_NE(told, std::string::npos) << r.out;
  EXPECT_LT(told, r.out.find("cpu fp32: test accuracy")) << r.out;
  SKIP_WITHOUT_BF16();
  auto native = run_trainer("devices");
  EXPECT_NE(native.out.find("bf16     native"), std::string::npos) << native.out;
}

}  // namespace
}  // namespace tandem
