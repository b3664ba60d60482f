// data.normalize: auto: the statistics computed over a split, the config that asks for them, and
// the checkpoint that carries them to eval and predict.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "datasets/split.h"
#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/error.h"

namespace tandem {
namespace {

// Two (2,1,2) samples: channel 0 holds 0, 255, 0, 255 (mean 0.5, std 0.5), channel 1 holds
// 51 everywhere (mean 0.2, constant: std 1).
Dataset two_channel_data() {
  Dataset d;
  d.sample_shape = Shape{2, 1, 2};
  d.images = {0, 255, 51, 51, 255, 0, 51, 51};
  d.labels = {0, 1};
  return d;
}

TEST(NormalizeAuto, ChannelStatsOfKnownValues) {
  ChannelStats s = channel_stats(two_channel_data());
  ASSERT_EQ(s.mean.size(), 2u);
  ASSERT_EQ(s.std.size(), 2u);
  EXPECT_FLOAT_EQ(s.mean[0], 0.5f);
  EXPECT_FLOAT_EQ(s.std[0], 0.5f);
  EXPECT_FLOAT_EQ(s.mean[1], 0.2f);
  EXPECT_FLOAT_EQ(s.std[1], 1.0f);
}

TEST(NormalizeAuto, FlatSamplesAreOneChannel) {
  Dataset d;
  d.sample_shape = Shape{4};
  d.images = {0, 0, 0, 255, 0, 0, 0, 255};  // a quarter at 1: mean 0.25, std sqrt(3)/4
  d.labels = {0, 0};
  ChannelStats s = channel_stats(d);
  ASSERT_EQ(s.mean.size(), 1u);
  EXPECT_FLOAT_EQ(s.mean[0], 0.25f);
  EXPECT_NEAR(s.std[0], 0.4330127f, 1e-6);
}

const char* kConfig = R"(name: tiny
input: {shape: [2, 1, 2]}
layers:
  - flatten
  - dense: {units: 2}
data: {format: synthetic, NORMALIZE}
)";

Config config_with(const std::string& normalize) {
  std::string text = kConfig;
  text.replace(text.find("NORMALIZE"), 9, normalize);
  return parse_config(text, "norm.yaml");
}

TEST(NormalizeAuto, ApplySetsTheConfigAndSaysSo) {
  Config c = config_with("normalize: auto");
  EXPECT_TRUE(c.data.normalize_auto);
  EXPECT_TRUE(c.data.mean.empty());
  const std::string line = apply_normalize_auto(c.data, two_channel_data());
  EXPECT_EQ(line,
            "Normalise: mean [0.5000, 0.2000] std [0.5000, 1.0000], computed over 2 train images "
            "(data.normalize: auto)\n");
  EXPECT_EQ(c.data.mean, (std::vector<float>{0.5f, 0.2f}));
  EXPECT_EQ(c.data.std, (std::vector<float>{0.5f, 1.0f}));
}

TEST(NormalizeAuto, ExplicitValuesAreKept) {
  Config c = config_with("normalize: {mean: [0.1, 0.2], std: [0.3, 0.4]}");
  EXPECT_FALSE(c.data.normalize_auto);
  EXPECT_EQ(apply_normalize_auto(c.data, two_channel_data()), "");
  EXPECT_EQ(c.data.mean, (std::vector<float>{0.1f, 0.2f}));
  EXPECT_EQ(c.data.std, (std::vector<float>{0.3f, 0.4f}));
  EXPECT_FALSE(config_with("seed: 1").data.normalize_auto);
}

std::string config_error(const std::string& normalize) {
  try {
    config_with(normalize);
  } catch (const ConfigError& e) {
    return e.cause();
  }
  return "";
}

TEST(NormalizeAuto, BadValuesAreRefused) {
  EXPECT_NE(config_error("normalize: automatic")
                .find("norm.yaml:6:27: data: 'normalize': expected auto or {mean: [...], std: "
                      "[...]}, not 'automatic'"),
            std::string::npos)
      << config_error("normalize: automatic");
  EXPECT_NE(config_error("normalize: {mean: [0.5], std: [0]}").find("every std must be positive"),
            std::string::npos);
  EXPECT_NE(config_error("normalize: {auto: true}").find("'auto': unknown key"), std::string::npos)
      << config_error("normalize: {auto: true}");
}

TEST(NormalizeAuto, CheckpointCarriesTheValues) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tandem_norm_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  CheckpointMeta meta;
  meta.config_text = kConfig;
  meta.device = "cpu";
  meta.normalize_mean = {0.1307f, 0.48215842f};
  meta.normalize_std = {0.3081f, 0.24348513f};
  write_checkpoint(path, {}, meta);
  CheckpointMeta back = read_checkpoint_meta(path);
  EXPECT_EQ(back.normalize_mean, meta.normalize_mean);  // bit for bit
  EXPECT_EQ(back.normalize_std, meta.normalize_std);

  meta.normalize_mean.clear();
  meta.normalize_std.clear();
  write_checkpoint(path, {}, meta);
  EXPECT_TRUE(read_checkpoint_meta(path).normalize_mean.empty());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tandem
