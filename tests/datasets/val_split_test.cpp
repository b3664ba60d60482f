// data.val_split: the validation share held out of the train split, and the trainer that
// evaluates it after every epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

#include "datasets/split.h"
#include "engine/config.h"
#include "engine/error.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

// n one-byte samples, sample i holding i % 256 and label i (every sample told apart by label).
Dataset numbered(int64_t n) {
  Dataset d;
  d.name = "numbered";
  d.sample_shape = Shape{1, 1, 1};
  d.classes = static_cast<int>(n);
  for (int64_t i = 0; i < n; ++i) {
    d.images.push_back(static_cast<uint8_t>(i % 256));
    d.labels.push_back(static_cast<int32_t>(i));
  }
  return d;
}

std::vector<int32_t> held_out(int64_t n, double share, uint64_t seed) {
  Dataset train = numbered(n);
  return hold_out(train, share, seed).labels;
}

TEST(ValSplit, SizesAreTheRoundedShare) {
  Dataset train = numbered(1000);
  Dataset val = hold_out(train, 0.1, 7);
  EXPECT_EQ(val.size(), 100);
  EXPECT_EQ(train.size(), 900);
  EXPECT_EQ(val.images.size(), 100u);
  EXPECT_EQ(train.images.size(), 900u);
  EXPECT_EQ(held_out(10, 0.25, 7).size(), 3u);  // 2.5 rounds away from zero
  EXPECT_EQ(held_out(10, 0.01, 7).size(), 1u);  // at least one sample
  EXPECT_EQ(held_out(10, 0.0, 7).size(), 0u);
}

TEST(ValSplit, EverySampleIsInExactlyOneSplitWithItsImage) {
  Dataset train = numbered(500);
  Dataset val = hold_out(train, 0.3, 11);
  std::multiset<int32_t> all(train.labels.begin(), train.labels.end());
  all.insert(val.labels.begin(), val.labels.end());
  ASSERT_EQ(all.size(), 500u);
  for (int32_t i = 0; i < 500; ++i) EXPECT_EQ(all.count(i), 1u) << i;
  for (const Dataset* d : {&train, &val}) {
    EXPECT_TRUE(std::is_sorted(d->labels.begin(), d->labels.end()));
    for (int64_t k = 0; k < d->size(); ++k)
      EXPECT_EQ(d->images[k], static_cast<uint8_t>(d->labels[k] % 256));
  }
  EXPECT_EQ(val.classes, 500);
  EXPECT_EQ(val.sample_shape, train.sample_shape);
}

TEST(ValSplit, SameSeedSameSplitOtherSeedAnother) {
  EXPECT_EQ(held_out(1000, 0.1, 3), held_out(1000, 0.1, 3));
  EXPECT_NE(held_out(1000, 0.1, 3), held_out(1000, 0.1, 4));
  // Not simply the first or last samples.
  std::vector<int32_t> v = held_out(1000, 0.1, 3);
  EXPECT_LT(v.front(), 100);
  EXPECT_GT(v.back(), 900);
}

TEST(ValSplit, LeavingNoTrainSampleIsRefused) {
  Dataset train = numbered(3);
  try {
    hold_out(train, 0.9, 1);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(e.cause().find("holds out 3 of the 3 train samples"), std::string::npos) << e.cause();
    EXPECT_FALSE(e.hint().empty());
  }
}

std::string config_error(const std::string& value) {
  try {
    parse_config(
        "name: t\ninput: {shape: [4]}\nlayers:\n  - dense: {units: 2}\n"
        "data: {format: synthetic, val_split: " +
            value + "}\n",
        "val.yaml");
  } catch (const ConfigError& e) {
    return e.cause();
  }
  return "";
}

TEST(ValSplit, ConfigTakesAShareBelowOne) {
  EXPECT_EQ(config_error("0.2"), "");
  EXPECT_EQ(config_error("0"), "");
  for (const char* bad : {"1", "1.5", "-0.1"})
    EXPECT_NE(config_error(bad).find("'val_split': expected a share in [0, 1)"), std::string::npos)
        << bad << ": " << config_error(bad);
}

TEST(ValSplit, TrainerEvaluatesItEveryEpoch) {
  const std::string config = test::write_temp_file("val_split.yaml", R"(name: small
input: {shape: [1, 8, 8]}
layers:
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 40, test_size: 16, seed: 1, val_split: 0.2,
       normalize: auto}
train: {epochs: 2, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 1}
)");
  const std::string metrics = ::testing::TempDir() + "val_split_metrics.jsonl";
  test::CliResult r = test::run_trainer("--config " + config + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Validation: 8 of 40 train samples held out (data.val_split 0.2)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("computed over 32 train images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" - val_loss "), std::string::npos) << r.out;
  std::ifstream in(metrics);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines)
    for (const char* key : {"\"val_loss\": ", "\"val_accuracy\": ", "\"test_loss\": "})
      EXPECT_NE(line.find(key), std::string::npos) << key << " in " << line;
  EXPECT_EQ(lines, 2);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

TEST(ValSplit, EachClassGivesItsShare) {
  // 3 classes of 50, 30 and 20 samples: a fifth is 10, 6 and 4.
  Dataset d;
  d.name = "classes";
  d.sample_shape = Shape{1, 1, 1};
  d.classes = 3;
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < (c == 0 ? 50 : c == 1 ? 30 : 20); ++k) {
      d.images.push_back(static_cast<uint8_t>(k));
      d.labels.push_back(c);
    }
  Dataset val = hold_out(d, 0.2, 5);
  std::vector<int> per_class(3);
  for (int32_t l : val.labels) ++per_class[static_cast<size_t>(l)];
  EXPECT_EQ(per_class, (std::vector<int>{10, 6, 4}));
  EXPECT_EQ(d.size(), 80);
}

TEST(ValSplit, RemaindersGoToClassesInASeededOrderAndTheTotalIsTheRoundedShare) {
  // 7 classes of 3: a tenth is 2.1 samples, 0.3 a class; 2 classes give one each.
  Dataset d = numbered(21);
  for (size_t i = 0; i < d.labels.size(); ++i) d.labels[i] = static_cast<int32_t>(i / 3);
  d.classes = 7;
  Dataset copy = d;
  const Dataset a = hold_out(d, 0.1, 1), b = hold_out(copy, 0.1, 1);
  EXPECT_EQ(a.size(), 2);
  EXPECT_EQ(a.images, b.images);
  EXPECT_NE(a.labels[0], a.labels[1]);  // from two classes
}

TEST(TestSplit, IsDrawnApartFromTheValidationShare) {
  Dataset a = numbered(1000), b = numbered(1000);
  EXPECT_NE(hold_out(a, 0.1, 3).labels, hold_out(b, 0.1, 3, kTestStream, "test").labels);
}

}  // namespace
}  // namespace tandem
