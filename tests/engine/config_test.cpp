// The config reader's contract: good configs parse; every bad one is refused with a message that
// names the file, line and column, the layer and what was expected.
#include "engine/config.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "tools/app.h"

namespace tandem {
namespace {

const char* kGood = R"(name: tiny
input: {shape: [1, 8, 8]}
layers:
  - conv2d: {filters: 4, kernel: 3, padding: 1}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 10}
data: {format: synthetic, train_size: 32, test_size: 8}
train:
  epochs: 2
  batch_size: 16
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9, nesterov: true}
  schedule: {type: multistep, milestones: [1], gamma: 0.5}
  checkpoint: {dir: ckpts, every: 2, keep: 3}
  seed: 3
)";

// Parses and builds the graph (which checks layer types, keys and shapes); returns the error
// message, or "" when the config is accepted.
std::string error_of(const std::string& text) {
  try {
    Config c = parse_config(text, "bad.yaml");
    Graph g(c);
  } catch (const ConfigError& e) {
    return e.cause() + " | hint: " + e.hint();
  }
  return "";
}

// The good config with one line replaced.
std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(Config, LossTakesItsNameOrAMappingWithLabelSmoothing) {
  EXPECT_EQ(parse_config(kGood, "good.yaml").label_smoothing, 0);
  const Config c = parse_config(
      with("layers:", "loss: {softmax_cross_entropy: {label_smoothing: 0.1}}\nlayers:"), "s.yaml");
  EXPECT_EQ(c.loss, "softmax_cross_entropy");
  EXPECT_DOUBLE_EQ(c.label_smoothing, 0.1);
  EXPECT_EQ(parse_config(with("layers:", "loss: {mse: {}}\nlayers:"), "m.yaml").loss, "mse");
}

TEST(Config, GoodConfigParsesEveryField) {
  Config c = parse_config(kGood, "good.yaml");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.input, (Shape{1, 8, 8}));
  ASSERT_EQ(c.layers.size(), 5u);
  EXPECT_EQ(c.layers[2].type, "maxpool");
  EXPECT_EQ(c.train.epochs, 2);
  EXPECT_EQ(c.train.batch_size, 16);
  EXPECT_DOUBLE_EQ(c.train.optimizer.lr, 0.1);
  EXPECT_TRUE(c.train.optimizer.nesterov);
  EXPECT_EQ(c.train.schedule.milestones, std::vector<int64_t>{1});
  EXPECT_EQ(c.train.seed, 3u);
  EXPECT_EQ(c.train.checkpoint.dir, "ckpts");
  EXPECT_EQ(c.train.checkpoint.every, 2);
  EXPECT_EQ(c.train.checkpoint.keep, 3);
  EXPECT_EQ(c.data.train_size, 32);
  Graph g(c);
  EXPECT_EQ(g.classes(), 10);
  EXPECT_EQ(g.layers()[4]->input_shape(), (Shape{64}));
}

TEST(Config, OnNanStopsUnlessSetToSkipStep) {
  EXPECT_EQ(parse_config(kGood, "good.yaml").train.on_nan, "stop");
  EXPECT_EQ(parse_config(with("  seed: 3\n", "  seed: 3\n  on_nan: skip_step\n"), "good.yaml")
                .train.on_nan,
            "skip_step");
}

TEST(Config, DataWorkersAreAutoUnlessSet) {
  EXPECT_EQ(parse_config(kGood, "good.yaml").data.workers, -1);
  EXPECT_EQ(parse_config(with("format: synthetic", "format: synthetic, workers: auto"), "w.yaml")
                .data.workers,
            -1);
  EXPECT_EQ(parse_config(with("format: synthetic", "format: synthetic, workers: 0"), "w.yaml")
                .data.workers,
            0);
  EXPECT_EQ(parse_config(with("format: synthetic", "format: synthetic, workers: 3"), "w.yaml")
                .data.workers,
            3);
}

TEST(Config, DataCacheIsFourGibibytesUnlessSet) {
  EXPECT_EQ(parse_config(kGood, "good.yaml").data.cache_mb, 4096);
  EXPECT_EQ(parse_config(with("format: synthetic", "format: synthetic, cache_mb: 0"), "c.yaml")
                .data.cache_mb,
            0);
}

TEST(Config, GpuConvolutionAlgorithmsAreTimedUnlessHeuristicOrDeterministic) {
  auto options = [](const std::string& text) {
    return backend_options(parse_config(text, "g.yaml"), DeviceSpec{"gpu", 0, "gpu", ""});
  };
  EXPECT_EQ(parse_config(kGood, "good.yaml").gpu_conv_algo, "auto");
  EXPECT_TRUE(options(kGood).find_conv_algorithms);
  const std::string deterministic = std::string(kGood) + "deterministic: true\n";
  EXPECT_FALSE(options(deterministic).find_conv_algorithms);
  EXPECT_TRUE(options(deterministic + "gpu: {conv_algo: find}\n").find_conv_algorithms);
  EXPECT_FALSE(options(std::string(kGood) + "gpu: {conv_algo: heuristic}\n").find_conv_algorithms);
}

TEST(Config, CpuWinogradUnlessConvAlgoDirect) {
  auto options = [](const std::string& text) {
    return backend_options(parse_config(text, "c.yaml"), DeviceSpec{"cpu", -1, "cpu", ""});
  };
  EXPECT_EQ(parse_config(kGood, "good.yaml").cpu_conv_algo, "auto");
  EXPECT_TRUE(options(kGood).cpu_winograd);
  EXPECT_FALSE(options(std::string(kGood) + "cpu: {conv_algo: direct}\n").cpu_winograd);
}

// One buffer of values and one of gradients, each param at a 64-byte boundary, in order.
TEST(Graph, AllocatePacksTheParamsIntoOneAlignedBuffer) {
  Config c = parse_config(kGood, "good.yaml");
  Graph g(c);
  auto backend = create_backend("cpu", {});
  g.allocate(*backend, 4, 1);
  const std::vector<Param*> params = g.params();
  ASSERT_EQ(params.size(), 4u);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params[i]->value.data()) % 64, 0u) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params[i]->grad.data()) % 64, 0u) << i;
    if (i == 0) continue;
    EXPECT_TRUE(params[i]->value.shares_storage(params[0]->value));
    EXPECT_EQ(params[i]->value.data(),
              params[i - 1]->value.data() + packed_numel(params[i - 1]->shape));
    EXPECT_EQ(params[i]->grad.data(),
              params[i - 1]->grad.data() + packed_numel(params[i - 1]->shape));
  }
}

TEST(Config, ShippedConfigsLoadAndBuild) {
  for (const char* name : {"lenet", "mlp", "cifar_cnn", "cifar_bn", "cifar_resnet",
                           "resnet18_cifar", "mobilenet_v2_cifar", "efficientnet_b0_cifar"}) {
    Config c = load_config(std::string(TANDEM_SOURCE_DIR) + "/configs/" + name + ".yaml");
    Graph g(c);
    EXPECT_EQ(g.classes(), 10) << name;
  }
}

// The configs of torchvision's networks count PyTorch's parameters:
// sum(p.numel() for p in model.parameters()) of the models their comments describe.
TEST(Config, TorchvisionNetworksHavePyTorchsParameterCounts) {
  const std::pair<const char*, int64_t> nets[] = {{"resnet18_cifar", 11173962},
                                                  {"mobilenet_v2_cifar", 2236682},
                                                  {"efficientnet_b0_cifar", 4020358},
                                                  {"resnet50", 25557032}};
  for (const auto& [name, count] : nets) {
    Config c = load_config(std::string(TANDEM_SOURCE_DIR) + "/configs/" + name + ".yaml");
    EXPECT_EQ(Graph(c).parameter_count(), count) << name;
  }
}

TEST(Config, LeNetHasCaffesParameterCount) {
  Config c = load_config(std::string(TANDEM_SOURCE_DIR) + "/configs/lenet.yaml");
  EXPECT_EQ(Graph(c).parameter_count(), 431080);
}

// Each bad config: the message must contain every expected fragment.
struct BadConfig {
  const char* name;
  std::string text;
  std::vector<std::string> expected;
};

class ConfigErrors : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ConfigErrors, AreRefusedWithTheirMessage) {
  const BadConfig& bad = GetParam();
  std::string e = error_of(bad.text);
  ASSERT_FALSE(e.empty()) << "accepted: " << bad.text;
  for (const std::string& part : bad.expected) EXPECT_NE(e.find(part), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(
    Config, ConfigErrors,
    ::testing::Values(
        BadConfig{"MalformedYaml",
                  with("input: {shape: [1, 8, 8]}", "input: {shape: [1, 8, 8]"),
                  {"bad.yaml:2:8: malformed YAML: the '{' here is never closed"}},
        // Indentation slips, named at the line that is off, with the lines it must line up with.
        BadConfig{"AKeyUnindentedUnderItsSection",
                  with("  epochs: 2\n", "epochs: 2\n"),
                  {"bad.yaml:12:1: malformed YAML: 'batch_size: 16' is indented more (2 spaces) "
                   "than 'epochs: 2' (line 11) above it, whose value is already given",
                   "to put both under 'train:' (line 10), indent line 11 by 2 spaces as line 12"}},
        BadConfig{"AKeyIndentedMoreThanTheOneBefore",
                  with("  batch_size: 16\n", "   batch_size: 16\n"),
                  {"bad.yaml:12:1: malformed YAML: 'batch_size: 16' is indented more (3 spaces) "
                   "than 'epochs: 2' (line 11) above it",
                   "keys of one mapping line up: indent line 12 by 2 spaces, as line 11"}},
        BadConfig{"AKeyThatLinesUpWithNoKeyAbove",
                  with("  epochs: 2\n", "   epochs: 2\n"),
                  {"bad.yaml:12:1: malformed YAML: 'batch_size: 16' (2 spaces) lines up with no "
                   "key under 'train:' (line 10): 'epochs: 2' (line 11) above it is at 3 spaces",
                   "indent the keys of one mapping alike"}},
        BadConfig{"UnknownLayerType",
                  with("- conv2d:", "- conv3d:"),
                  {"bad.yaml:4:5: layer 1: unknown layer type 'conv3d'", "conv2d"}},
        BadConfig{"MisspelledLayerKey",
                  with("filters: 4", "filter: 4"),
                  {"bad.yaml:4:13: layer 1 (conv2d)", "missing required key 'filters'",
                   "did you mean 'filters' for 'filter'"}},
        BadConfig{
            "UnknownLayerKey",
            with("padding: 1}", "padding: 1, strides: 2}"),
            {"bad.yaml:4:49: layer 1 (conv2d): 'strides': unknown key", "did you mean 'stride'"}},
        BadConfig{"WrongTypeOfValue",
                  with("filters: 4", "filters: four"),
                  {"bad.yaml:4:14: layer 1 (conv2d): 'filters': expected an integer, got 'four'"}},
        BadConfig{"PoolWindowLargerThanInput",
                  with("maxpool: {kernel: 2}", "maxpool: {kernel: 9}"),
                  {"bad.yaml:6:5: layer 3 (maxpool), input [4, 8, 8]",
                   "pooling window 9x9 is larger than its input 8x8"}},
        BadConfig{
            "KernelLargerThanInput",
            with("kernel: 3, padding: 1", "kernel: 11"),
            {"bad.yaml:4:5: layer 1 (conv2d)", "11x11 kernel is larger than its padded input 8x8"}},
        BadConfig{"GroupsThatDoNotDivideTheChannels",
                  with("kernel: 3, padding: 1", "kernel: 3, padding: 1, groups: 3"),
                  {"bad.yaml:4:5: layer 1 (conv2d), input [1, 8, 8]",
                   "groups 3 must divide both the input's 1 channels and the 4 filters",
                   "give a groups that divides 1"}},
        BadConfig{"GroupNormGroupsThatDoNotDivideTheChannels",
                  with("  - flatten\n", "  - groupnorm: {groups: 3}\n  - flatten\n"),
                  {"bad.yaml:7:5: layer 4 (groupnorm), input [4, 4, 4]",
                   "groups 3 must divide the input's 4 channels", "divides 4"}},
        BadConfig{"DropPathWithoutRate",
                  with("  - flatten\n", "  - {drop_path: {}}\n  - flatten\n"),
                  {"bad.yaml:7:17: layer 4 (drop_path)", "missing required key 'rate'"}},
        BadConfig{"LabelSmoothingOutOfRange",
                  with("layers:", "loss: {softmax_cross_entropy: {label_smoothing: 1.5}}\nlayers:"),
                  {"bad.yaml:3:32: loss.softmax_cross_entropy: 'label_smoothing'", "[0, 1]"}},
        BadConfig{"UnknownLossInAMapping",
                  with("layers:", "loss: {cross_entropy: {label_smoothing: 0.1}}\nlayers:"),
                  {"bad.yaml:3:7: loss", "softmax_cross_entropy or mse"}},
        BadConfig{"GroupsBelowOne",
                  with("kernel: 3, padding: 1", "kernel: 3, padding: 1, groups: 0"),
                  {"layer 1 (conv2d): 'groups': expected a value of at least 1, got 0"}},
        BadConfig{"MultiplyOfShapesThatDoNotBroadcast",
                  with("  - flatten\n",
                       "  - {multiply: {}, inputs: [conv2d_1, maxpool_1]}\n  - flatten\n"),
                  {"layer 4 (multiply), inputs [4, 8, 8] and [4, 4, 4]",
                   "multiply needs inputs of one shape, or a (C) or (C,1,1) gate"}},
        BadConfig{
            "DenseOnImageInput",
            with("  - flatten\n", ""),
            {"bad.yaml:7:5: layer 4 (dense), input [4, 4, 4]", "flat input", "add '- flatten'"}},
        BadConfig{"OutputNotFlat",
                  with("  - flatten\n  - dense: {units: 10}\n", ""),
                  {"bad.yaml", "the model's output must be flat", "[4, 4, 4]"}},
        BadConfig{"SingleOutputClassifier", with("units: 10", "units: 1"), {"at least 2"}},
        BadConfig{"MisspelledTrainKey",
                  with("epochs: 2", "epoch: 2"),
                  {"bad.yaml:11:3: train: 'epoch': unknown key", "did you mean 'epochs'"}},
        BadConfig{"UnknownOptimizer",
                  with("type: sgd", "type: sgdd"),
                  {"bad.yaml:13:15: train.optimizer: 'type': unknown value 'sgdd'",
                   "expected one of: sgd, adam, adamw"}},
        BadConfig{"NegativeLearningRate",
                  with("lr: 0.1", "lr: -0.1"),
                  {"bad.yaml:13:26: train.optimizer: 'lr': expected a positive learning rate"}},
        BadConfig{"MissingInput",
                  with("input: {shape: [1, 8, 8]}\n", ""),
                  {"bad.yaml", "missing 'input: {shape: [C, H, W]}'"}},
        BadConfig{"TwoTypesInOneLayerItem",
                  with("  - relu\n", "  - {relu: null, tanh: null}\n"),
                  {"bad.yaml:5:5: layer 2: several layer types in one item (relu, tanh)"}},
        // Branching models (name: and inputs:).
        BadConfig{"InputNamesNoLayer",
                  with("  - relu\n", "  - relu\n  - {add: null, inputs: [conv2d_1, relu_7]}\n"),
                  {"bad.yaml:6:", "layer 3 (add) takes 'relu_7', which is no earlier layer's name",
                   "input, conv2d_1, relu_1"}},
        BadConfig{"InputListedLater",
                  with("  - relu\n", "  - {relu: null, inputs: [maxpool_1]}\n"),
                  {"layer 2 (relu) takes 'maxpool_1', a layer listed after it",
                   "list layers so that each comes after"}},
        BadConfig{"OneInputLayerGivenTwo",
                  with("  - relu\n", "  - {relu: null, inputs: [input, conv2d_1]}\n"),
                  {"layer 2 (relu) takes one input, got 2", "add or concat"}},
        BadConfig{
            "AddGivenOneInput",
            with("  - relu\n", "  - add\n"),
            {"bad.yaml:5:5: layer 2 (add) takes two or more inputs, got 1", "inputs: [a, b]"}},
        BadConfig{"AddOfTwoShapes",
                  with("  - relu\n",
                       "  - relu\n  - {maxpool: {kernel: 2}, name: half}\n"
                       "  - {add: null, inputs: [relu_1, half]}\n"),
                  {"layer 4 (add), inputs [4, 8, 8] and [4, 4, 4]: add needs inputs of one shape"}},
        BadConfig{"ConcatOfTwoSizes",
                  with("  - relu\n",
                       "  - relu\n  - {maxpool: {kernel: 2}, name: half}\n"
                       "  - {concat: null, inputs: [relu_1, half]}\n"),
                  {"layer 4 (concat)", "got [4, 8, 8] and [4, 4, 4]", "same height and width"}},
        BadConfig{"BranchTakenByNoLayer",
                  with("  - relu\n  - maxpool: {kernel: 2}\n",
                       "  - relu\n  - {conv2d: {filters: 4, kernel: 1}, name: side}\n"
                       "  - {maxpool: {kernel: 2}, inputs: [relu_1]}\n"),
                  {"bad.yaml:6:", "the output of layer 3 (conv2d, side) is taken by no later layer",
                   "name it in a later layer's 'inputs:', or remove it"}},
        BadConfig{"NameTakenTwice",
                  with("  - relu\n", "  - {relu: null, name: conv2d_1}\n"),
                  {"layer 2 (relu, conv2d_1) is called 'conv2d_1', a name an earlier layer "
                   "already has"}},
        BadConfig{"NameOfTheInput",
                  with("  - relu\n", "  - {relu: null, name: input}\n"),
                  {"is called 'input', a name kept for the model's input"}},
        BadConfig{"InputsNotNames",
                  with("  - relu\n", "  - {relu: null, inputs: {a: 1}}\n"),
                  {"layer 2: 'inputs' must name one or more layers"}},
        BadConfig{
            "NameAmongTheLayersOptions",
            with("  - relu\n", "  - leaky_relu: {alpha: 0.1, name: act}\n"),
            {"bad.yaml:5:", "layer 2 (leaky_relu): 'name' is written among the layer's options",
             "beside the layer type, e.g. '- {leaky_relu: {...}, name: ...}'"}},
        BadConfig{"NameNotAWord",
                  with("  - relu\n", "  - {relu: null, name: [a]}\n"),
                  {"layer 2: 'name' must be a word"}},
        BadConfig{"BatchNormMomentumOutOfRange",
                  with("  - relu\n", "  - batchnorm: {momentum: 1.5}\n"),
                  {"bad.yaml:5:", "layer 2 (batchnorm): 'momentum'", "in [0, 1]"}},
        BadConfig{"BatchNormEpsilonNotPositive",
                  with("  - relu\n", "  - batchnorm: {eps: 0}\n"),
                  {"layer 2 (batchnorm): 'eps'", "positive epsilon"}},
        BadConfig{"BatchNormMisspelledKey",
                  with("  - relu\n", "  - batchnorm: {momentun: 0.1}\n"),
                  {"layer 2 (batchnorm): 'momentun': unknown key", "did you mean 'momentum'"}},
        BadConfig{"KernelListOfWrongLength",
                  with("kernel: 3,", "kernel: [3, 3, 3],"),
                  {"bad.yaml:4:26: layer 1 (conv2d): 'kernel': expected 2 integers, got 3"}},
        BadConfig{"NotABoolean",
                  with("nesterov: true", "nesterov: maybe"),
                  {"train.optimizer: 'nesterov': expected true or false, got 'maybe'"}},
        BadConfig{
            "UnknownConvAlgo",
            std::string(kGood) + "gpu: {conv_algo: fastest}\n",
            {"bad.yaml:17:7: gpu: 'conv_algo': unknown value 'fastest'", "auto, find, heuristic"}},
        BadConfig{"UnknownCpuConvAlgo",
                  std::string(kGood) + "cpu: {conv_algo: winograd}\n",
                  {"bad.yaml:17:7: cpu: 'conv_algo': unknown value 'winograd'", "auto, direct"}},
        BadConfig{"UnknownDataFormat",
                  with("format: synthetic", "format: imagenet"),
                  {"bad.yaml:9:8: data: 'format': unknown value 'imagenet'", "mnist, cifar10"}},
        BadConfig{
            "NegativeCropPadding",
            with("format: synthetic", "format: synthetic, augment: {crop_padding: -1}"),
            {"bad.yaml:9:", "'crop_padding': expected 0 (off) or a positive number of pixels"}},
        BadConfig{"CropPaddingAsLargeAsTheImage",
                  with("format: synthetic", "format: synthetic, augment: {crop_padding: 8}"),
                  {"'crop_padding': expected less than the image height and width ([1, 8, 8])"}},
        BadConfig{"UnknownAugmentation",
                  with("format: synthetic", "format: synthetic, augment: {flip: true, rotate: 5}"),
                  {"bad.yaml:9:", "'rotate': unknown key"}},
        BadConfig{"NegativeWorkers",
                  with("format: synthetic", "format: synthetic, workers: -2"),
                  {"bad.yaml:9:",
                   "'workers': expected auto, or 0 (batches cut in the training thread) to 64"}},
        BadConfig{"WorkersNotANumber",
                  with("format: synthetic", "format: synthetic, workers: many"),
                  {"bad.yaml:9:", "'workers': expected an integer, got 'many'"}},
        BadConfig{"NegativeCache",
                  with("format: synthetic", "format: synthetic, cache_mb: -1"),
                  {"bad.yaml:9:", "'cache_mb': expected a size in MiB, 0 (decode every sample"}},
        BadConfig{"LayersNotAList",
                  "input: {shape: [1, 8, 8]}\nlayers: relu\n",
                  {"'layers' must be a list"}},
        BadConfig{"MisspelledCheckpointKey",
                  with("keep: 3", "kept: 3"),
                  {"bad.yaml:15:38: train.checkpoint: 'kept': unknown key",
                   "expected one of: best, dir, every, final, keep"}},
        BadConfig{"CheckpointEveryZero",
                  with("every: 2", "every: 0"),
                  {"train.checkpoint: 'every': expected at least 1 epoch between checkpoints"}},
        BadConfig{"CheckpointKeepNegative",
                  with("keep: 3", "keep: -1"),
                  {"train.checkpoint: 'keep': expected 0 (keep all) or more checkpoints"}},
        BadConfig{"CheckpointBestUnknownMetric",
                  with("keep: 3", "keep: 3, best: val_acc"),
                  {"train.checkpoint: 'best': unknown metric 'val_acc'",
                   "expected one of: test_accuracy, test_loss, train_accuracy, train_loss, "
                   "val_accuracy, val_loss"}},
        BadConfig{
            "CheckpointBestValWithoutValSplit",
            with("keep: 3", "keep: 3, best: val_loss"),
            {"train.checkpoint: 'best': val_loss needs a validation split: set data.val_split"}},
        BadConfig{"OnNanUnknownValue",
                  with("  seed: 3\n", "  seed: 3\n  on_nan: skip\n"),
                  {"bad.yaml:17:3: train: 'on_nan': unknown value 'skip'",
                   "expected one of: stop, skip_step"}},
        BadConfig{"CheckpointDirNotText",
                  with("dir: ckpts", "dir: [a, b]"),
                  {"train.checkpoint: 'dir':"}},
        BadConfig{"EmptyFile", "", {"bad.yaml: the config is empty"}},
        // Non-finite numbers pass a one-sided check and would surface as a NaN loss blamed on
        // the learning rate.
        BadConfig{"NanMomentum",
                  with("momentum: 0.9", "momentum: .nan"),
                  {"bad.yaml:13:35: train.optimizer: 'momentum': expected a value in [0, 1)"}},
        BadConfig{"InfiniteWeightDecay",
                  with("momentum: 0.9", "momentum: 0.9, weight_decay: .inf"),
                  {"train.optimizer: 'weight_decay': expected zero or a positive finite decay"}},
        BadConfig{
            "NanBeta1",
            with("type: sgd, lr: 0.1, momentum: 0.9, nesterov: true", "type: adam, beta1: .nan"),
            {"train.optimizer: 'beta1': expected a value in [0, 1)"}},
        BadConfig{
            "InfiniteAdamEpsilon",
            with("type: sgd, lr: 0.1, momentum: 0.9, nesterov: true", "type: adam, eps: .inf"),
            {"train.optimizer: 'eps': expected a positive finite epsilon"}},
        BadConfig{"InfiniteGamma",
                  with("gamma: 0.5", "gamma: .inf"),
                  {"train.schedule: 'gamma': expected a positive finite factor"}},
        BadConfig{"MilestoneZero",
                  with("milestones: [1]", "milestones: [0, 1]"),
                  {"train.schedule: 'milestones': expected epochs of 1 or more, got 0"}},
        BadConfig{
            "NegativeCosineMinLr",
            with("{type: multistep, milestones: [1], gamma: 0.5}", "{type: cosine, min_lr: -0.1}"),
            {"train.schedule: 'min_lr': expected zero or a positive finite learning rate"}},
        BadConfig{
            "NanNormalizeMean",
            with("format: synthetic", "format: synthetic, normalize: {mean: [.nan], std: [1]}"),
            {"data.normalize: 'mean': every mean must be a finite number"}},
        BadConfig{
            "InfiniteNormalizeStd",
            with("format: synthetic", "format: synthetic, normalize: {mean: [0], std: [.inf]}"),
            {"data.normalize: 'std': every std must be a finite number"}},
        BadConfig{"NanDropoutRate",
                  with("  - relu\n", "  - dropout: {rate: .nan}\n"),
                  {"layer 2 (dropout): 'rate': expected a drop rate in [0, 1)"}},
        BadConfig{"NanLeakyReluSlope",
                  with("  - relu\n", "  - leaky_relu: {alpha: .nan}\n"),
                  {"layer 2 (leaky_relu): 'alpha': expected a negative slope in [0, 1)"}},
        BadConfig{"InfiniteBatchNormEpsilon",
                  with("  - relu\n", "  - batchnorm: {eps: .inf}\n"),
                  {"layer 2 (batchnorm): 'eps'", "positive epsilon"}},
        // An internal error before, from the synthetic data generator.
        BadConfig{
            "DataShapeWithAZero",
            with("format: synthetic", "format: synthetic, shape: [1, 0, 8]"),
            {"bad.yaml:9:", "data: 'shape': every dimension must be positive, got [1, 0, 8]"}},
        // Trained, then reported a test accuracy of 0% over no samples.
        BadConfig{"NoTestSamples",
                  with("test_size: 8", "test_size: 0"),
                  {"data: 'test_size': expected a positive number of samples",
                   "the test split is evaluated after every epoch"}},
        // Cast to int, 4294967298 classes were 2 and 4294967297 threads 1.
        BadConfig{"ClassesBeyondAnInt",
                  with("format: synthetic", "format: synthetic, classes: 4294967298"),
                  {"data: 'classes': expected at most 2147483647 classes, got 4294967298"}},
        // Read as 2^64 - 1, where --seed -1 is refused.
        BadConfig{"NegativeSeed",
                  with("  seed: 3\n", "  seed: -1\n"),
                  {"train: 'seed': expected a seed of 0 or more"}},
        BadConfig{"ThreadsBeyondAnInt",
                  with("  seed: 3\n", "  seed: 3\n  threads: 4294967297\n"),
                  {"train: 'threads': expected at most 2147483647 threads, got 4294967297"}}),
    [](const ::testing::TestParamInfo<BadConfig>& info) { return std::string(info.param.name); });

TEST(ConfigErrors, MissingFileNamesIt) {
  try {
    load_config("/nonexistent/model.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.cause().find("config file '/nonexistent/model.yaml' does not exist"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace tandem
