// trainer export: the ONNX file's form (IR version, opset, dynamic batch, metadata, pooling
// attributes), its outputs in ONNX Runtime equal to trainer predict's logits for every reference
// model, and bad input refused.
//
// ONNX Runtime is npm's onnxruntime-node, installed into the build folder by the build
// (tools/install_onnxruntime_node.sh); where node or the package cannot be had, the tests that
// run it skip with the reason.
#include "tools/export_onnx.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>

#include "engine/error.h"
#include "engine/layer_registry.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"
#include "tools/checkpoint_model.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using test::run_trainer;

const std::string kOrtDir = TANDEM_ONNXRUNTIME_NODE_DIR;

// Why ONNX Runtime cannot run here ("" when it can): what the install step wrote.
std::string ort_unavailable() {
  if (fs::exists(kOrtDir + "/installed.txt")) return "";
  std::ifstream f(kOrtDir + "/unavailable.txt");
  std::string why;
  std::getline(f, why);
  return why.empty() ? "onnxruntime-node is not installed in " + kOrtDir +
                           " (the build's onnxruntime_node target installs it)"
                     : why;
}

#define SKIP_WITHOUT_ONNX_RUNTIME()                            \
  if (const std::string why = ort_unavailable(); !why.empty()) \
  GTEST_SKIP() << "ONNX Runtime for node unavailable: " << why

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

onnx::ModelProto read_model(const std::string& path) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(read_file(path))) << path;
  return m;
}

std::string metadata(const onnx::ModelProto& m, const std::string& key) {
  for (const auto& e : m.metadata_props())
    if (e.key() == key) return e.value();
  return "(absent)";
}

const onnx::NodeProto* node_of(const onnx::ModelProto& m, const std::string& op) {
  for (const onnx::NodeProto& n : m.graph().node())
    if (n.op_type() == op) return &n;
  return nullptr;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// The model's first output in ONNX Runtime on `input` (float32, of `dims`); name: its name.
std::vector<float> run_onnx_runtime(const std::string& model, const std::vector<float>& input,
                                    const std::vector<int64_t>& dims, std::string* name = nullptr) {
  const std::string dir = test::test_temp_dir();
  const std::string in = dir + "ort_input.bin", out = dir + "ort_output.bin";
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(input.data()),
             static_cast<std::streamsize>(input.size() * sizeof(float)));
  std::string dims_text;
  for (int64_t d : dims) {
    if (!dims_text.empty()) dims_text += ',';
    dims_text += std::to_string(d);
  }
  const test::CliResult r =
      run_command("node " + test::source_path("tests/tools/run_onnx.js") + " " + kOrtDir + " " +
                  model + " " + in + " " + dims_text + " " + out);
  EXPECT_EQ(r.status, 0) << r.out;
  if (name) {
    const size_t at = r.out.find("\"output\":\"");
    *name =
        at == std::string::npos ? "" : r.out.substr(at + 10, r.out.find('"', at + 10) - at - 10);
  }
  const std::string bytes = read_file(out);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// The largest difference of a sample's outputs over the largest magnitude among that sample's
// expected ones (one scale per sample, so that a logit near zero is judged at the others' size).
double relative_difference(const std::vector<float>& got, const std::vector<float>& want,
                           int64_t per_sample) {
  if (got.size() != want.size() || want.empty()) return INFINITY;
  double worst = 0;
  for (size_t s = 0; s < want.size(); s += static_cast<size_t>(per_sample)) {
    double diff = 0, scale = 1e-30;
    for (size_t k = s; k < s + static_cast<size_t>(per_sample); ++k) {
      diff = std::max(diff, std::abs(static_cast<double>(got[k]) - want[k]));
      scale = std::max(scale, std::abs(static_cast<double>(want[k])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Random 8-bit samples of a shape, as decoded images are.
std::vector<uint8_t> random_samples(int64_t n, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n * shape.numel()));
  for (uint8_t& b : v) b = static_cast<uint8_t>(byte(gen));
  return v;
}

// A config's model on small synthetic data of its input shape, with a normalization of every
// channel's own, trained one epoch of two steps into `dir`; returns the config's path.
std::string train_small(const std::string& name, YAML::Node config, const std::string& dir) {
  const YAML::Node shape = config["input"]["shape"];
  const size_t channels = shape.size() == 3 ? shape[0].as<size_t>() : 1;
  YAML::Node data;
  data["format"] = "synthetic";
  data["shape"] = shape;
  data["classes"] = 10;
  data["train_size"] = 32;
  data["test_size"] = 8;
  data["seed"] = 5;
  for (size_t c = 0; c < channels; ++c) {
    data["normalize"]["mean"].push_back(0.3 + 0.1 * static_cast<double>(c));
    data["normalize"]["std"].push_back(0.2 + 0.05 * static_cast<double>(c));
  }
  config["data"] = data;
  config["train"]["epochs"] = 1;
  config["train"]["batch_size"] = 16;
  YAML::Emitter e;
  e << config;
  const std::string path = test::write_temp_file(name + ".yaml", e.c_str());
  fs::remove_all(dir);
  const test::CliResult r = run_trainer("--config " + path + " --quiet --checkpoint-dir " + dir);
  EXPECT_EQ(r.status, 0) << r.out;
  return path;
}

// What predict computes for n random samples from the newest checkpoint in `dir`.
struct Predicted {
  Shape shape;                  // per sample
  std::vector<uint8_t> images;  // (n, shape...) 8-bit values
  std::vector<float> inputs;    // what the model took: the normalized images
  std::vector<float> logits;    // (n, classes)
  std::vector<int64_t> dims() const {
    std::vector<int64_t> d{static_cast<int64_t>(images.size()) / shape.numel()};
    d.insert(d.end(), shape.dims().begin(), shape.dims().end());
    return d;
  }
};

Predicted predict(const std::string& dir, int64_t n, uint32_t seed) {
  register_everything();
  RunRequest r;
  r.checkpoint = dir;
  CheckpointModel m = load_checkpoint_model(r, "predict");
  Predicted p;
  p.shape = m.graph->input_shape();
  p.images = random_samples(n, p.shape, seed);
  p.logits = predict_logits(m, p.images, &p.inputs);
  return p;
}

// Exports DIR/STEM.onnx and DIR/STEM-folded.onnx (--fold-normalization), runs both in ONNX Runtime
// on 6 random samples (normalized, and as [0,1] pixels) and compares with predict's logits.
void expect_runtime_equals_predict(const std::string& dir, const std::string& stem,
                                   const std::string& flags = "") {
  const std::string plain = dir + "/" + stem + ".onnx", folded = dir + "/" + stem + "-folded.onnx";
  test::CliResult r = run_trainer("export --checkpoint " + dir + " --onnx " + plain + flags);
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_trainer("export --checkpoint " + dir + " --onnx " + folded + " --fold-normalization" +
                  flags);
  ASSERT_EQ(r.status, 0) << r.out;
  const Predicted p = predict(dir, 6, 11);
  const int64_t classes = static_cast<int64_t>(p.logits.size()) / 6;
  const double plain_diff =
      relative_difference(run_onnx_runtime(plain, p.inputs, p.dims()), p.logits, classes);
  EXPECT_LT(plain_diff, 1e-5) << "normalized input";
  std::vector<float> pixels(p.images.size());
  for (size_t k = 0; k < p.images.size(); ++k) pixels[k] = static_cast<float>(p.images[k]) / 255.f;
  const double folded_diff =
      relative_difference(run_onnx_runtime(folded, pixels, p.dims()), p.logits, classes);
  EXPECT_LT(folded_diff, 1e-5) << "pixels in [0,1], normalized in the graph";
  std::cout << stem << flags << ": ONNX Runtime against predict, relative difference " << plain_diff
            << " (normalized input), " << folded_diff << " (folded)\n";
}

class ExportReferenceModel : public ::testing::TestWithParam<std::string> {};

// The reference configs' models, briefly trained: ONNX Runtime's logits are predict's within
// 1e-5, on normalized input and, with the normalization folded in, on [0,1] pixels.
TEST_P(ExportReferenceModel, OnnxRuntimeOutputsEqualPredictLogits) {
  SKIP_WITHOUT_ONNX_RUNTIME();
  const std::string name = GetParam();
  const std::string dir = test::fresh_dir("ckpt");
  train_small(name, YAML::LoadFile(test::source_path("configs/" + name + ".yaml")), dir);
  expect_runtime_equals_predict(dir, name);
}

INSTANTIATE_TEST_SUITE_P(Configs, ExportReferenceModel,
                         ::testing::Values("lenet", "mlp", "cifar_cnn", "cifar_bn", "cifar_resnet"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A model of every layer type and option the exporter maps: strided, dilated and padded
// convolutions without bias, padded max and average pooling on odd sizes (where ceil mode or a
// divisor that counts padding would differ), leaky_relu, sigmoid, tanh, dropout, batch
// normalization of images and of features, concat of images and of features, add of three.
const char kEveryLayer[] = R"(name: every_layer
input: {shape: [2, 13, 11]}
layers:
  - {conv2d: {filters: 4, kernel: 3, stride: 2, padding: 1}, name: a}
  - {conv2d: {filters: 4, kernel: [3, 2], dilation: 2, padding: [2, 1], bias: false}, inputs: [input]}
  - {avgpool: {kernel: 3, stride: 2, padding: 1}, name: b}
  - {maxpool: {kernel: 3, stride: 1, padding: 1}, inputs: [a]}
  - {leaky_relu: {alpha: 0.2}, name: c}
  - {concat: {}, inputs: [c, b]}
  - batchnorm
  - {sigmoid: {}, name: d}
  - {tanh: {}, inputs: [d], name: e}
  - {add: {}, inputs: [d, e, d]}
  - {maxpool: {kernel: 2}, name: f}
  - {global_avgpool: {}, inputs: [f]}
  - {flatten: {}, name: g}
  - {flatten: {}, inputs: [f]}
  - {dense: {units: 6}, name: h}
  - {concat: {}, inputs: [g, h]}
  - batchnorm
  - relu
  - {dropout: {rate: 0.3}}
  - dense: {units: 3}
data: {format: synthetic, classes: 3, train_size: 32, test_size: 8, seed: 2,
       normalize: {mean: [0.4, 0.6], std: [0.25, 0.3]}}
train: {epochs: 1, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 4}
)";

TEST(ExportOnnx, EveryLayerTypeRunsInOnnxRuntimeAsPredictComputesIt) {
  SKIP_WITHOUT_ONNX_RUNTIME();
  const std::string dir = test::fresh_dir("ckpt");
  const std::string config = test::write_temp_file("every_layer.yaml", kEveryLayer);
  const test::CliResult r = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_runtime_equals_predict(dir, "opset13");
  expect_runtime_equals_predict(dir, "opset17", " --opset 17");
}

// Every activation, each on its own branch of one dense layer's output, and beside them a grouped
// convolution gated twice (squeeze-and-excitation with a (C,1,1) gate, then with a flat (C) one)
// and pooled to (C), in ONNX Runtime: the operators or compositions export writes compute what
// tandem computes.
const char kEveryActivation[] = R"(name: every_activation
input: {shape: [1, 6, 5]}
layers:
  - flatten
  - {dense: {units: 8}, name: d}
  - {relu6: {}, inputs: [d], name: a1}
  - {silu: {}, inputs: [d], name: a2}
  - {hardswish: {}, inputs: [d], name: a3}
  - {hardsigmoid: {}, inputs: [d], name: a4}
  - {gelu: {}, inputs: [d], name: a5}
  - {gelu: {approximate: tanh}, inputs: [d], name: a6}
  - {elu: {alpha: 0.5}, inputs: [d], name: a7}
  - {softplus: {}, inputs: [d], name: a8}
  - {mish: {}, inputs: [d], name: a9}
  - {conv2d: {filters: 4, kernel: 3, padding: 1, groups: 1}, inputs: [input], name: c1}
  - {conv2d: {filters: 8, kernel: 3, padding: 1, groups: 4}, name: c2}
  - global_avgpool
  - conv2d: {filters: 8, kernel: 1}
  - {sigmoid: {}, name: s1}
  - {multiply: {}, inputs: [c2, s1], name: m1}
  - {global_avgpool: {keep_dims: false}, name: gp}
  - dense: {units: 8}
  - {sigmoid: {}, name: s2}
  - {multiply: {}, inputs: [s2, m1]}
  - {global_avgpool: {keep_dims: false}, name: gp2}
  - {concat: {}, inputs: [a1, a2, a3, a4, a5, a6, a7, a8, a9, gp2]}
  - dense: {units: 3}
data: {format: synthetic, classes: 3, train_size: 32, test_size: 8, seed: 2}
train: {epochs: 1, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 4}
)";

TEST(ExportOnnx, EveryActivationRunsInOnnxRuntimeAsPredictComputesIt) {
  SKIP_WITHOUT_ONNX_RUNTIME();
  const std::string dir = test::fresh_dir("ckpt");
  const std::string config = test::write_temp_file("every_activation.yaml", kEveryActivation);
  const test::CliResult r = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_runtime_equals_predict(dir, "activations");
}

// Group normalization (as layer, group and instance normalization, on images and on a flat
// input), stochastic depth on a residual branch, ceil-mode max and average pooling of odd sizes,
// trained with label smoothing, in ONNX Runtime.
const char kNormalizations[] = R"(name: normalizations
input: {shape: [3, 9, 7]}
layers:
  - {conv2d: {filters: 8, kernel: 3, padding: 1}, name: c1}
  - {groupnorm: {groups: 4}, name: g4}
  - relu
  - {conv2d: {filters: 8, kernel: 3, padding: 1}, name: c2}
  - {groupnorm: {groups: 1, eps: 1.0e-3}, name: g1}
  - {drop_path: {rate: 0.3}, name: dp}
  - {add: {}, inputs: [dp, g4]}
  - {maxpool: {kernel: 3, stride: 2, ceil_mode: true}, name: mp}
  - {groupnorm: {groups: 8}, name: g8}
  - {avgpool: {kernel: 2, stride: 2, padding: 1, ceil_mode: true}}
  - flatten
  - dense: {units: 6}
  - {groupnorm: {groups: 2}, name: gflat}
  - dense: {units: 3}
loss: {softmax_cross_entropy: {label_smoothing: 0.1}}
data: {format: synthetic, classes: 3, train_size: 32, test_size: 8, seed: 2}
train: {epochs: 1, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 4}
)";

TEST(ExportOnnx, GroupNormDropPathAndCeilModePoolingRunInOnnxRuntimeAsPredictComputesThem) {
  SKIP_WITHOUT_ONNX_RUNTIME();
  const std::string dir = test::fresh_dir("ckpt");
  const std::string config = test::write_temp_file("normalizations.yaml", kNormalizations);
  const test::CliResult r = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.out;
  expect_runtime_equals_predict(dir, "normalizations");
}

// The file's form, read back with the ONNX library: what a runtime needs to use it.
TEST(ExportOnnx, WritesIrVersion8Opset13DynamicBatchAndMetadata) {
  const std::string dir = test::fresh_dir("ckpt");
  const test::CliResult t = run_trainer("--config " + test::one_epoch_config("export_form") +
                                        " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(t.status, 0) << t.out;
  const std::string out = dir + "/m.onnx";
  const test::CliResult r = run_trainer("export --checkpoint " + dir + " --onnx " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  const onnx::ModelProto m = read_model(out);
  EXPECT_EQ(m.ir_version(), 8);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), 13);
  EXPECT_EQ(m.producer_name(), "tandem");
  ASSERT_EQ(m.graph().input_size(), 1);
  const onnx::ValueInfoProto& in = m.graph().input(0);
  EXPECT_EQ(in.name(), "input");
  const auto& dims = in.type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 4);
  EXPECT_EQ(dims[0].dim_param(), "batch");  // any batch size
  EXPECT_EQ(dims[1].dim_value(), 1);
  EXPECT_EQ(dims[2].dim_value(), 12);
  EXPECT_EQ(dims[3].dim_value(), 12);
  ASSERT_EQ(m.graph().output_size(), 1);
  EXPECT_EQ(m.graph().output(0).name(), "logits");
  EXPECT_EQ(m.graph().output(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(m.graph().output(0).type().tensor_type().shape().dim(1).dim_value(), 4);
  EXPECT_EQ(metadata(m, "class_names"), R"(["0", "1", "2", "3"])");
  EXPECT_EQ(metadata(m, "normalize_mean"), "[0]");  // the config normalizes nothing
  EXPECT_EQ(metadata(m, "normalize_std"), "[1]");
  EXPECT_EQ(metadata(m, "normalization"), "before_input");
  EXPECT_EQ(metadata(m, "output"), "logits");
  // The weights, under their checkpoint names.
  std::vector<std::string> names;
  for (const auto& t : m.graph().initializer()) names.push_back(t.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "conv2d_1.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "dense_1.bias"), names.end());
}

// tandem's pooling semantics as ONNX attributes: floor mode, padding at both ends, and an average
// over the window's input values only.
TEST(ExportOnnx, PoolingIsFloorModeWithPaddingLeftOutOfTheAverage) {
  const std::string dir = test::fresh_dir("ckpt");
  const std::string config = test::write_temp_file("every_layer.yaml", kEveryLayer);
  ASSERT_EQ(run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir).status, 0);
  const std::string out = dir + "/m.onnx";
  ASSERT_EQ(run_trainer("export --checkpoint " + dir + " --onnx " + out).status, 0);
  const onnx::ModelProto m = read_model(out);
  const onnx::NodeProto* avg = node_of(m, "AveragePool");
  ASSERT_NE(avg, nullptr);
  ASSERT_NE(attribute(*avg, "count_include_pad"), nullptr);
  EXPECT_EQ(attribute(*avg, "count_include_pad")->i(), 0);
  EXPECT_EQ(attribute(*avg, "ceil_mode")->i(), 0);
  const auto& pads = attribute(*avg, "pads")->ints();
  EXPECT_EQ(std::vector<int64_t>(pads.begin(), pads.end()), (std::vector<int64_t>{1, 1, 1, 1}));
  const onnx::NodeProto* max = node_of(m, "MaxPool");
  ASSERT_NE(max, nullptr);
  EXPECT_EQ(attribute(*max, "ceil_mode")->i(), 0);
  EXPECT_NE(node_of(m, "GlobalAveragePool"), nullptr);
  EXPECT_EQ(node_of(m, "Dropout"), nullptr);  // dropout is the identity outside training
  EXPECT_NE(node_of(m, "Identity"), nullptr);
}

TEST(ExportOnnx, SoftmaxOutputsProbabilitiesThatSumToOne) {
  SKIP_WITHOUT_ONNX_RUNTIME();
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_EQ(run_trainer("--config " + test::one_epoch_config("export_softmax") +
                        " --quiet --checkpoint-dir " + dir)
                .status,
            0);
  const std::string out = dir + "/p.onnx";
  const test::CliResult r =
      run_trainer("export --checkpoint " + dir + " --onnx " + out + " --softmax");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(metadata(read_model(out), "output"), "probabilities");
  const Predicted pred = predict(dir, 3, 5);
  const std::vector<float>& logits = pred.logits;
  std::string name;
  const std::vector<float> p = run_onnx_runtime(out, pred.inputs, pred.dims(), &name);
  EXPECT_EQ(name, "probabilities");
  ASSERT_EQ(p.size(), logits.size());
  std::vector<float> want(logits.size());
  for (size_t s = 0; s < logits.size(); s += 4) {
    const double top = *std::max_element(logits.begin() + s, logits.begin() + s + 4);
    double sum = 0;
    for (size_t k = s; k < s + 4; ++k) sum += std::exp(logits[k] - top);
    for (size_t k = s; k < s + 4; ++k)
      want[k] = static_cast<float>(std::exp(logits[k] - top) / sum);
  }
  EXPECT_LT(relative_difference(p, want, 4), 1e-5);
}

// --- bad input: one sentence each, with the fix, and nothing written ---

class ExportBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_dir("ckpt");
    const test::CliResult t = run_trainer("--config " + test::one_epoch_config("export_bad") +
                                          " --quiet --checkpoint-dir " + dir_);
    ASSERT_EQ(t.status, 0) << t.out;
  }
  std::string dir_;
};

TEST_F(ExportBadInput, AnExistingFileIsKeptUnlessForceIsGiven) {
  const std::string out = test::write_temp_file("existing.onnx", "keep me");
  test::CliResult r = run_trainer("export --checkpoint " + dir_ + " --onnx " + out);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: '" + out + "' already exists\nhint: pass --force to overwrite it"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(read_file(out), "keep me");
  r = run_trainer("export --checkpoint " + dir_ + " --onnx " + out + " --force");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_model(out).graph().output(0).name(), "logits");
}

TEST_F(ExportBadInput, AFolderThatIsMissingOrAFileIsRefusedBeforeReadingTheCheckpoint) {
  const std::string file = test::write_temp_file("plain_file", "x");
  test::CliResult r = run_trainer("export --checkpoint " + dir_ + " --onnx " + file + "/m.onnx");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'" + file + "' is not a folder"), std::string::npos) << r.out;
  r = run_trainer("export --checkpoint /nonexistent/ckpt --onnx " + test::test_temp_dir() +
                  "no/such/folder/m.onnx");
  EXPECT_EQ(r.status, 2) << r.out;  // the path is checked first: no checkpoint error
  EXPECT_NE(r.out.find("does not exist\nhint: create it first"), std::string::npos) << r.out;
}

// /proc takes no new files, from root either.
TEST_F(ExportBadInput, AFolderThatTakesNoFilesIsRefusedBeforeReadingTheCheckpoint) {
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc file system here";
  const test::CliResult r =
      run_trainer("export --checkpoint /nonexistent/ckpt --onnx /proc/tandem-export-test.onnx");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: --onnx '/proc/tandem-export-test.onnx': cannot write in the folder "
                       "'/proc'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: give a path in a writable folder"), std::string::npos) << r.out;
}

TEST_F(ExportBadInput, AReadOnlyFolderIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root, which may write in any folder";
  const std::string ro = test::fresh_dir("read_only");
  fs::create_directories(ro);
  ::chmod(ro.c_str(), 0555);
  const test::CliResult r =
      run_trainer("export --checkpoint " + dir_ + " --onnx " + ro + "/m.onnx");
  ::chmod(ro.c_str(), 0755);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cannot write in the folder"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(ro + "/m.onnx"));
}

TEST_F(ExportBadInput, AnOpsetOutside13To17IsRefused) {
  for (const char* opset : {"12", "18"}) {
    const std::string out = test::test_temp_dir() + "opset.onnx";
    const test::CliResult r =
        run_trainer("export --checkpoint " + dir_ + " --onnx " + out + " --opset " + opset);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("--opset " + std::string(opset) +
                         " is not supported: export writes ONNX opsets 13 to 17"),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST_F(ExportBadInput, MissingOnnxPathNamesTheFlag) {
  const test::CliResult r = run_trainer("export --checkpoint " + dir_);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("error: export needs --onnx FILE"), std::string::npos) << r.out;
}

// What export prints reads as the other commands' counts do: digits grouped, bytes in units.
TEST(ExportOnnx, ItsSummaryGroupsDigitsAndSizesTheFile) {
  const std::string dir = test::fresh_dir("ckpt");
  const std::string config =
      test::write_dense_config("export_counts", {.hidden = {300},
                                                 .data = "train_size: 16, test_size: 8",
                                                 .train = "epochs: 1, batch_size: 8"});
  ASSERT_EQ(run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir).status, 0);
  const test::CliResult r =
      run_trainer("export --checkpoint " + dir + " --onnx " + dir + "/m.onnx");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("4 layers, 20,704 parameters, [0-9.]+ KiB\n")))
      << r.out;
}

TEST(ExportOnnx, SoftmaxOfAModelTrainedWithMseIsRefused) {
  const std::string dir = test::fresh_dir("ckpt");
  const std::string config = test::write_temp_file(
      "export_mse.yaml",
      test::small_model_yaml("export_mse") + "loss: mse\ntrain: {epochs: 1, batch_size: 32}\n");
  ASSERT_EQ(run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir).status, 0);
  const test::CliResult r =
      run_trainer("export --checkpoint " + dir + " --onnx " + dir + "/m.onnx --softmax");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("trained with the mse loss, whose outputs are not logits"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir + "/m.onnx"));
}

// A layer type the exporter has no ONNX form for (here one only this test registers) is refused
// by its name and type, not approximated.
class Square : public Layer {
 public:
  std::string type() const override { return "square_for_export_test"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  void forward(Context&, const Tensor&, Tensor&) override {}
  void backward(Context&, const Tensor&, const Tensor&, const Tensor&, Tensor*) override {}
};

TEST(ExportOnnx, ALayerWithoutAnOnnxFormIsRefusedByName) {
  register_everything();
  register_layer("square_for_export_test", [](ConfigMap&) { return std::make_unique<Square>(); });
  Config config = parse_config(R"(name: odd
input: {shape: [4]}
layers:
  - dense: {units: 3}
  - square_for_export_test
data: {format: synthetic, classes: 3}
)",
                               "odd.yaml");
  Graph graph(config);
  auto backend = create_backend("cpu", {});
  graph.allocate(*backend, 1, 0);
  try {
    onnx_model_bytes(graph, *backend, config, CheckpointMeta{}, OnnxExportOptions{});
    FAIL() << "exported";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.cause()).find(
                  "layer 2 (square_for_export_test, square_for_export_test_1) cannot be exported"),
              std::string::npos)
        << e.cause();
  }
}

}  // namespace
}  // namespace tandem
