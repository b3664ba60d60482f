// The config reader's messages for the mistakes a newcomer makes: each names the line at fault
// and the likely fix, and every error carries a hint.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "tests/engine/config_refusal.h"

namespace tandem {
namespace {

const char* kGood = R"(name: tiny
input: {shape: [1, 8, 8]}
layers:
  - conv2d: {filters: 4, kernel: 3, padding: 1}
  - relu
  - flatten
  - dense: {units: 10}
data: {format: synthetic, train_size: 32, test_size: 8}
train:
  epochs: 2
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
  seed: 3
)";

std::string with(const std::string& from, const std::string& to) {
  return replaced(kGood, from, to);
}

TEST(ConfigMessages, TabIndentationIsNamedAtItsLine) {
  Refusal r = refusal_of(with("  epochs: 2", "\tepochs: 2"));
  EXPECT_EQ(r.cause, "bad.yaml:10:1: malformed YAML: the line is indented with a tab");
  EXPECT_EQ(r.hint, "YAML indents with spaces only: replace the tab with spaces");
}

TEST(ConfigMessages, SectionWithoutColonIsNamedAtItsLine) {
  Refusal r = refusal_of(with("train:", "train"));
  EXPECT_EQ(r.cause, "bad.yaml:9:1: malformed YAML: 'train' has no ':' after its key");
  EXPECT_NE(r.hint.find("e.g. 'train:'"), std::string::npos) << r.hint;
}

TEST(ConfigMessages, KeyWithoutColonIsNamedWithTheFix) {
  Refusal r = refusal_of(with("epochs: 2", "epochs 2"));
  EXPECT_EQ(r.cause, "bad.yaml:10:1: malformed YAML: 'epochs 2' has no ':' after its key");
  EXPECT_NE(r.hint.find("e.g. 'epochs: 2'"), std::string::npos) << r.hint;
}

// yaml-cpp stops where it noticed ("end of map flow not found" lines later); the message names the
// bracket at fault instead.
TEST(ConfigMessages, AnUnclosedBracketIsNamedWhereItOpens) {
  Refusal r = refusal_of(with("padding: 1}", "padding: 1"));
  EXPECT_EQ(r.cause, "bad.yaml:4:13: malformed YAML: the '{' here is never closed");
  EXPECT_EQ(r.hint, "end it with '}', e.g. '- conv2d: {filters: 4, kernel: 3, padding: 1}'");
  Refusal list = refusal_of(with("input: {shape: [1, 8, 8]}", "input: {shape: [1, 8, 8}"));
  EXPECT_EQ(list.cause,
            "bad.yaml:2:24: malformed YAML: the '}' here does not close the '[' opened at "
            "bad.yaml:2:16");
  EXPECT_EQ(list.hint, "end the '[' with ']' before it, or add the '{' that this '}' closes");
  Refusal extra = refusal_of(with("input: {shape: [1, 8, 8]}", "input: {shape: [1, 8, 8]}}"));
  EXPECT_EQ(extra.cause, "bad.yaml:2:26: malformed YAML: the '}' here closes nothing");
  // Brackets inside quotes and comments are text, not flow.
  EXPECT_NO_THROW(parse_config(with("name: tiny", "name: \"t{[iny\"  # [{"), "good.yaml"));
  Refusal after_quote = refusal_of(with("name: tiny\ninput: {shape: [1, 8, 8]}",
                                        "name: \"t{[iny\"  # [{\ninput: {shape: [1, 8, 8]"));
  EXPECT_EQ(after_quote.cause, "bad.yaml:2:8: malformed YAML: the '{' here is never closed");
}

TEST(ConfigMessages, LastKeyWithoutColonSuggestsTheColon) {
  // The last key of a block parses as one key "seed 3" with no value.
  Refusal r = refusal_of(with("seed: 3", "seed 3"));
  EXPECT_NE(r.cause.find("train: 'seed 3': unknown key; did you mean 'seed: 3'?"),
            std::string::npos)
      << r.cause;
  EXPECT_EQ(r.hint, "put ': ' (a colon and a space) between a key and its value");
}

TEST(ConfigMessages, FlowKeyWithoutColonSuggestsTheColon) {
  Refusal r = refusal_of(with("filters: 4", "filters 4"));
  EXPECT_NE(r.cause.find("did you mean 'filters: 4' for 'filters 4'?"), std::string::npos)
      << r.cause;
  EXPECT_EQ(r.hint, "put ': ' (a colon and a space) between a key and its value");
}

TEST(ConfigMessages, MisspeltRequiredKeyIsNamedWithTheRename) {
  Refusal r = refusal_of(with("kernel: 3", "kernal: 3"));
  EXPECT_NE(r.cause.find("layer 1 (conv2d): missing required key 'kernel'"), std::string::npos)
      << r.cause;
  EXPECT_NE(r.cause.find("did you mean 'kernel' for 'kernal'?"), std::string::npos) << r.cause;
  EXPECT_EQ(r.hint, "rename 'kernal' to 'kernel'");
}

TEST(ConfigMessages, UnknownLayerTypeSuggestsTheNearest) {
  const std::pair<const char*, const char*> cases[] = {{"  - relu\n", "  - rleu\n"},
                                                       {"  - flatten\n", "  - Flatten\n"},
                                                       {"- conv2d:", "- conv:"},
                                                       {"- dense:", "- linear:"},
                                                       {"- conv2d:", "- Convolution2D:"},
                                                       {"- dense:", "- fully_connected:"},
                                                       {"  - relu\n", "  - BatchNormalization\n"},
                                                       {"  - relu\n", "  - MaxPooling2D\n"},
                                                       {"- dense:", "- InnerProduct:"},
                                                       {"- conv2d:", "- Convolution:"},
                                                       {"  - relu\n", "  - Eltwise\n"},
                                                       {"  - relu\n", "  - ReLU\n"}};
  const char* meant[] = {"relu",      "flatten", "conv2d", "dense",  "conv2d", "dense",
                         "batchnorm", "maxpool", "dense",  "conv2d", "add",    "relu"};
  for (size_t i = 0; i < std::size(cases); ++i) {
    Refusal r = refusal_of(with(cases[i].first, cases[i].second));
    EXPECT_NE(r.cause.find(std::string("; did you mean '") + meant[i] + "'?"), std::string::npos)
        << r.cause;
    EXPECT_NE(r.hint.find("known layer types: "), std::string::npos) << r.hint;
  }
}

TEST(ConfigMessages, MisspeltLayersSectionIsNamedNotReportedMissing) {
  Refusal r = refusal_of(with("layers:", "layer:"));
  EXPECT_EQ(r.cause, "bad.yaml:3:1: 'layer': unknown key; did you mean 'layers'?");
  EXPECT_EQ(r.hint, "rename 'layer' to 'layers'");
}

TEST(ConfigMessages, LongerSectionNameSuggestsTheKey) {
  Refusal r = refusal_of(with("train:", "training:"));
  EXPECT_NE(r.cause.find("'training': unknown key; did you mean 'train'?"), std::string::npos)
      << r.cause;
}

// The layer type as the value of a 'type' key (Caffe's and Keras' configs), and a layer's options
// beside its empty type rather than indented under it: each named, with the line that works.
TEST(ConfigMessages, ATypeKeyAndOptionsBesideTheTypeGetTheFlowForm) {
  Refusal typed = refusal_of(with("- conv2d: {filters: 4, kernel: 3, padding: 1}",
                                  "- {type: conv2d, filters: 4, kernel: 3}"));
  EXPECT_EQ(typed.cause, "bad.yaml:4:5: layer 1: 'type: conv2d' gives the layer type as a value");
  EXPECT_EQ(typed.hint, "the layer type is the key: write '- conv2d: {filters: 4, kernel: 3}'");
  Refusal bare = refusal_of(with("  - relu\n", "  - type: relu\n"));
  EXPECT_EQ(bare.hint, "the layer type is the key: write '- relu'");
  Refusal beside = refusal_of(with("- conv2d: {filters: 4, kernel: 3, padding: 1}",
                                   "- conv2d:\n    filters: 4\n    kernel: 3"));
  EXPECT_EQ(beside.cause,
            "bad.yaml:5:14: layer 1 (conv2d): 'filters' is beside 'conv2d:', not under it");
  EXPECT_EQ(beside.hint,
            "indent the layer's options under 'conv2d:', or write '- conv2d: {filters: 4, "
            "kernel: 3}'");
  // Two layer types in one item are that, not options beside a type.
  Refusal two = refusal_of(with("  - relu\n", "  - {relu: null, dense: {units: 4}}\n"));
  EXPECT_NE(two.cause.find("several layer types in one item (relu, dense)"), std::string::npos)
      << two.cause;
}

// The 'type:' form's fix names the layer type as tandem does (through the synonyms and the
// nearest name) and keeps list options, 'name:' and 'inputs:'; the line it gives is accepted.
TEST(ConfigMessages, ATypeKeyGetsTheFixInTandemsNames) {
  const std::string dense = "  - dense: {units: 10}\n";
  EXPECT_EQ(refusal_of(with(dense, "  - {type: Dense, units: 10}\n")).hint,
            "the layer type is the key, and tandem calls Dense 'dense': write '- dense: {units: "
            "10}'");
  EXPECT_EQ(refusal_of(with(dense, "  - {type: Linear, units: 10}\n")).hint,
            "the layer type is the key, and tandem calls Linear 'dense': write '- dense: {units: "
            "10}'");
  EXPECT_EQ(refusal_of(with("  - relu\n", "  - {type: MaxPooling2D, pool_size: 2}\n")).hint,
            "the layer type is the key, and tandem calls MaxPooling2D 'maxpool': write '- maxpool: "
            "{kernel: 2}'");
  const std::string conv = "  - conv2d: {filters: 4, kernel: 3, padding: 1}\n";
  Refusal named = refusal_of(
      with(conv, "  - {type: Conv2D, filters: 4, kernel_size: [3, 3], padding: 1, name: c1}\n"));
  EXPECT_EQ(named.cause, "bad.yaml:4:5: layer 1: 'type: Conv2D' gives the layer type as a value");
  EXPECT_EQ(named.hint,
            "the layer type is the key, and tandem calls Conv2D 'conv2d': write '- {conv2d: "
            "{filters: 4, kernel: [3, 3], padding: 1}, name: c1}'");
  Config fixed =
      parse_config(with(conv, "  - {conv2d: {filters: 4, kernel: [3, 3], padding: 1}, name: c1}\n"),
                   "good.yaml");
  EXPECT_NO_THROW(Graph{fixed});
  EXPECT_EQ(refusal_of(with("  - relu\n", "  - {type: relu, inputs: [c1]}\n")).hint,
            "the layer type is the key: write '- {relu: {}, inputs: [c1]}'");
}

// Caffe's Pooling is either of tandem's pooling layers: both are named.
TEST(ConfigMessages, CaffesPoolingSuggestsMaxpoolAndAvgpool) {
  Refusal r = refusal_of(with("  - relu\n", "  - Pooling: {kernel: 2}\n"));
  EXPECT_EQ(r.cause,
            "bad.yaml:5:5: layer 2: unknown layer type 'Pooling'; did you mean 'maxpool' or "
            "'avgpool'?");
  Refusal typed = refusal_of(with("  - relu\n", "  - {type: Pooling, kernel_size: 2}\n"));
  EXPECT_EQ(typed.hint,
            "the layer type is the key, and tandem calls Pooling 'maxpool' or 'avgpool': write "
            "'- maxpool: {kernel: 2}' or '- avgpool: {kernel: 2}'");
}

// Caffe's "pool: MAX" / "pool: AVE" says which pooling layer: that one alone, without the key.
TEST(ConfigMessages, CaffesPoolOptionPicksTheLayer) {
  EXPECT_EQ(refusal_of(with("  - relu\n", "  - {type: Pooling, pool: MAX, kernel_size: 2}\n")).hint,
            "the layer type is the key, and tandem calls Pooling 'maxpool': write "
            "'- maxpool: {kernel: 2}'");
  EXPECT_EQ(refusal_of(with("  - relu\n", "  - {type: Pooling, pool: AVE, stride: 2}\n")).hint,
            "the layer type is the key, and tandem calls Pooling 'avgpool': write "
            "'- avgpool: {stride: 2}'");
}

// The sample shape written as the value of input: gets its key.
TEST(ConfigMessages, AnInputShapeWithoutItsKeyGetsTheFix) {
  Refusal r = refusal_of(with("input: {shape: [1, 8, 8]}", "input: [1, 8, 8]"));
  EXPECT_EQ(r.cause, "bad.yaml:2:1: 'input': expected {shape: [C, H, W]}, got the list [1, 8, 8]");
  EXPECT_EQ(r.hint, "give the shape its key: write 'input: {shape: [1, 8, 8]}'");
}

// "amp" and "mixed" name a recipe, not a precision: the refusal names the two 16-bit ones.
TEST(ConfigMessages, AMixedPrecisionRecipeNamesTheSixteenBitPrecisions) {
  for (const std::string p : {"amp", "mixed"}) {
    Refusal r = refusal_of(std::string(kGood) + "precision: " + p + "\n");
    EXPECT_NE(r.cause.find("'precision': '" + p + "' names no one precision: tandem's mixed "
                           "precisions are bf16 and fp16"),
              std::string::npos)
        << r.cause;
    EXPECT_NE(r.hint.find("write 'precision: bf16'"), std::string::npos) << r.hint;
  }
}

// Another framework's name wins over a name a letter or two from it.
TEST(ConfigMessages, ASynonymWinsOverANearName) {
  EXPECT_EQ(closest_name("fc", {"dense", "fc1"}), "dense");
  EXPECT_EQ(closest_name("fc2", {"dense", "fc1"}), "fc1");
  EXPECT_EQ(closest_names("Pooling", {"avgpool", "maxpool", "pool"}),
            (std::vector<std::string>{"maxpool", "avgpool"}));
}

// Keras' and PyTorch's 'model:' for the list of layers: the key is named, not 'layers' missing.
TEST(ConfigMessages, LayersUnderModelAreNamedWithTheRename) {
  Refusal r = refusal_of(with("layers:", "model:"));
  EXPECT_EQ(r.cause,
            "bad.yaml:3:1: 'model': unknown key, read as nothing; tandem reads a model's layers "
            "from 'layers:'");
  EXPECT_EQ(r.hint, "rename 'model:' to 'layers:'");
}

// Keras and PyTorch models end in a softmax layer; tandem's loss applies it.
TEST(ConfigMessages, ASoftmaxLayerIsRefusedWithWhereSoftmaxIs) {
  Refusal r = refusal_of(with("  - dense: {units: 10}\n", "  - dense: {units: 10}\n  - softmax\n"));
  EXPECT_NE(r.cause.find("layer 5: no softmax layer: the loss applies it"), std::string::npos)
      << r.cause;
  EXPECT_EQ(r.hint,
            "remove the softmax layer; the model ends with its dense layer of one unit per class");
}

TEST(ConfigMessages, OtherFrameworksNameSuggestsOurs) {
  Refusal r = refusal_of(with("lr: 0.1", "learning_rate: 0.1"));
  EXPECT_NE(r.cause.find("'learning_rate': unknown key; did you mean 'lr'?"), std::string::npos)
      << r.cause;
}

TEST(ConfigMessages, EveryValueErrorCarriesAHint) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"filters: 4", "filters: four"},
           {"units: 10", "units: 10.5"},
           {"lr: 0.1", "lr: fast"},
           {"lr: 0.1", "lr: -0.1"},
           {"momentum: 0.9", "momentum: 0.9, nesterov: maybe"},
           {"type: sgd", "type: sgdd"},
           {"kernel: 3", "kernel: [3, x]"},
           {"epochs: 2", "epochs: 0"}}) {
    Refusal r = refusal_of(with(from, to));
    EXPECT_FALSE(r.hint.empty()) << to << ": " << r.cause;
  }
}

TEST(ConfigMessages, InfiniteLearningRateIsRefused) {
  Refusal r = refusal_of(with("lr: 0.1", "lr: .inf"));
  EXPECT_NE(r.cause.find("train.optimizer: 'lr': expected a positive learning rate"),
            std::string::npos)
      << r.cause;
}

TEST(ConfigMessages, ADuplicateKeyIsRefusedAtItsSecondPlace) {
  // yaml-cpp keeps both: the run would silently train with the first learning rate.
  Refusal r = refusal_of(with("lr: 0.1,", "lr: 0.1, lr: 0.5,"));
  EXPECT_EQ(r.cause, "bad.yaml:11:35: train.optimizer: 'lr' appears twice (first at 11:26)");
  EXPECT_EQ(r.hint, "keep one of them");
  r = refusal_of(std::string("name: other\n") + kGood);
  EXPECT_EQ(r.cause, "bad.yaml:2:1: 'name' appears twice (first at 1:1)");
}

TEST(ConfigMessages, AFolderGivenAsTheConfigIsNamed) {
  const std::string dir = ::testing::TempDir() + "config_is_a_folder";
  std::filesystem::create_directories(dir);
  try {
    load_config(dir);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.cause(), "'" + dir + "' is a folder, not a config file");
    EXPECT_FALSE(e.hint().empty());
  }
}

}  // namespace
}  // namespace tandem
