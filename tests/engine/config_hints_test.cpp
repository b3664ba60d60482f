// Messages for config mistakes that point elsewhere: a key at the wrong indentation, an
// activation written inside a layer, a layer given a number, a channels-last input shape.
#include <gtest/gtest.h>

#include <string>

#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "tests/engine/config_refusal.h"

namespace tandem {
namespace {

const char* kGood = R"(name: tiny
input: {shape: [1, 28, 28]}
layers:
  - conv2d: {filters: 4, kernel: 5}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 10}
data: {format: synthetic, train_size: 32, test_size: 8}
train:
  epochs: 2
  optimizer: {type: sgd, lr: 0.1}
)";

std::string with(const std::string& from, const std::string& to) {
  return replaced(kGood, from, to);
}

TEST(ConfigHints, ASeedAtTheTopLevelBelongsUnderTrain) {
  const Refusal r = refusal_of(std::string(kGood) + "seed: 42\n");
  EXPECT_EQ(r.cause,
            "bad.yaml:13:1: 'seed': unknown key in the top level; 'seed' belongs under "
            "'train:'");
  EXPECT_EQ(r.hint, "indent it under 'train:', e.g. train: {seed: ...}");
}

TEST(ConfigHints, EpochsOutsideTrainBelongsUnderTrain) {
  const Refusal r = refusal_of(with("train:\n  epochs: 2\n", "epochs: 2\ntrain:\n"));
  EXPECT_NE(r.cause.find("'epochs': unknown key in the top level; 'epochs' belongs under 'train:'"),
            std::string::npos)
      << r.cause;
}

TEST(ConfigHints, ALearningRateUnderTrainBelongsUnderItsOptimizer) {
  const Refusal r = refusal_of(with("  epochs: 2\n", "  epochs: 2\n  lr: 0.5\n"));
  EXPECT_NE(r.cause.find("'lr': unknown key in 'train:'; 'lr' belongs under 'train.optimizer:'"),
            std::string::npos)
      << r.cause;
  EXPECT_EQ(r.hint, "indent it under 'train.optimizer:', e.g. train: {optimizer: {lr: ...}}");
}

TEST(ConfigHints, AnActivationInsideADenseLayerIsALayerOfItsOwn) {
  const Refusal r =
      refusal_of(with("dense: {units: 10}", "dense: {units: 10, activation: softmax}"));
  EXPECT_NE(r.cause.find("layer 5 (dense): 'activation': unknown key; in tandem an activation is "
                         "a layer of its own"),
            std::string::npos)
      << r.cause;
  EXPECT_EQ(r.hint, "remove 'activation: softmax' and add '- softmax' after this layer");
}

TEST(ConfigHints, ADenseLayerGivenANumberGetsItsUnits) {
  const Refusal r = refusal_of(with("dense: {units: 10}", "dense: 10"));
  EXPECT_EQ(r.cause,
            "bad.yaml:8:12: layer 5 (dense): '10' is not a mapping of the layer's options");
  EXPECT_EQ(r.hint, "write '- dense: {units: 10}'");
}

TEST(ConfigHints, AChannelsLastInputIsNamedWithItsOtherOrder) {
  const Refusal r = refusal_of(with("[1, 28, 28]", "[28, 28, 1]"));
  EXPECT_NE(r.cause.find("bad.yaml: input: {shape: [28, 28, 1]} looks channels-last (Keras' "
                         "[H, W, C]); tandem takes [C, H, W]"),
            std::string::npos)
      << r.cause;
  EXPECT_EQ(r.hint, "write 'input: {shape: [1, 28, 28]}'");
}

TEST(ConfigHints, AKeyThatIsNoSectionsKeepsTheSpellingHint) {
  const Refusal r = refusal_of(with("  epochs: 2\n", "  epochs: 2\n  epoch_count: 2\n"));
  EXPECT_NE(r.cause.find("'epoch_count': unknown key"), std::string::npos) << r.cause;
  EXPECT_NE(r.hint.find("check the spelling"), std::string::npos) << r.hint;
}

}  // namespace
}  // namespace tandem
