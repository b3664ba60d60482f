// Configs read as a strict YAML parser reads them: no repeated key in any mapping, no control
// characters, UTF-8 text, and work in proportion to the document's size.
#include "engine/yaml_check.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "engine/config.h"
#include "engine/error.h"

namespace tandem {
namespace {

const std::string kModel = R"(name: tiny
input: {shape: [1, 4, 4]}
layers:
  - flatten
  - dense: {units: 2}
data: {format: synthetic, classes: 2, train_size: 8, test_size: 8}
train: {epochs: 1, batch_size: 4}
)";

// The ConfigError that parsing `text` gives; "" when it parses.
std::string config_error(const std::string& text) {
  try {
    parse_config(text, "c.yaml");
  } catch (const ConfigError& e) {
    EXPECT_FALSE(e.hint().empty()) << e.cause();
    return e.cause();
  }
  return "";
}

TEST(StrictYaml, TheModelParses) { EXPECT_EQ(config_error(kModel), ""); }

TEST(StrictYaml, ARepeatedKeyBesideALayerTypeIsRefused) {
  std::string text = kModel;
  text.insert(text.find("data:"), "  - {dense: {units: 2}, name: a, name: b}\n");
  EXPECT_EQ(config_error(text), "c.yaml:6:34: layers item 3: 'name' appears twice (first at 6:25)");
}

TEST(StrictYaml, ARepeatedKeyInABlockLayerEntryIsRefused) {
  const std::string text = R"(name: tiny
input: {shape: [1, 4, 4]}
layers:
  - flatten
  - dense:
      units: 2
    inputs: [flatten_1]
    inputs: [input]
)";
  EXPECT_EQ(config_error(text), "c.yaml:8:5: layers item 2: 'inputs' appears twice (first at 7:5)");
}

TEST(StrictYaml, ARepeatedKeyInALayersOptionsIsRefused) {
  const std::string text =
      "name: tiny\ninput: {shape: [4]}\nlayers:\n"
      "  - dense: {units: 2, units: 3}\n";
  EXPECT_EQ(config_error(text),
            "c.yaml:4:23: layers item 1.dense: 'units' appears twice (first at 4:13)");
}

TEST(StrictYaml, ARepeatedKeyInAMappingInsideAListIsRefused) {
  const std::string text = kModel + "gpu: {devices: [{a: 1, a: 2}]}\n";
  EXPECT_NE(config_error(text).find("gpu.devices item 1: 'a' appears twice"), std::string::npos)
      << config_error(text);
}

TEST(StrictYaml, ANulByteInTheTextIsRefusedWithItsPlace) {
  std::string text = kModel;
  text.replace(text.find("tiny"), 4, std::string("ti\0ny", 5));
  EXPECT_EQ(config_error(text), "c.yaml:1:9: malformed YAML: a NUL character (U+0000) in the text");
}

TEST(StrictYaml, AnEscapedNulInAValueIsRefused) {
  std::string text = kModel;
  text.replace(text.find("name: tiny"), 10, "name: \"ti\\0ny\"");
  EXPECT_EQ(config_error(text), "c.yaml:1:7: name: a value holds a NUL character (U+0000)");
}

TEST(StrictYaml, OtherControlCharactersAreRefused) {
  for (const char* c : {"\x1b", "\x7f", "\x08", "\xc2\x80"}) {
    std::string text = kModel;
    text.replace(text.find("tiny"), 4, std::string("ti") + c + "ny");
    EXPECT_NE(config_error(text).find("the control character U+"), std::string::npos)
        << config_error(text);
  }
  std::string text = kModel;
  text.replace(text.find("name: tiny"), 10, "name: \"ti\\eny\"");
  EXPECT_EQ(config_error(text), "c.yaml:1:7: name: a value holds the control character U+001B");
}

TEST(StrictYaml, TextThatIsNotUtf8IsRefused) {
  std::string text = kModel;
  text.replace(text.find("tiny"), 4, "caf\xe9");
  EXPECT_EQ(config_error(text), "c.yaml:1:10: malformed YAML: the byte 0xE9 is not UTF-8");
}

TEST(StrictYaml, TabsCarriageReturnsUnicodeAndAByteOrderMarkAreText) {
  std::string text = "\xef\xbb\xbf" + kModel;
  text.replace(text.find("name: tiny\n"), 11, "name: \"caf\xc3\xa9\tt\xe2\x82\xac\"\r\n");
  EXPECT_EQ(config_error(text), "");
  EXPECT_EQ(parse_config(text, "c.yaml").name, "caf\xc3\xa9\tt\xe2\x82\xac");
}

TEST(StrictYaml, AKeyThatIsAListIsRefused) {
  EXPECT_EQ(config_error(kModel + "[a, b]: 1\n"), "c.yaml:8:1: a key is a list, not plain text");
}

// A few lines of aliases, each doubling the one before: 2^24 values if expanded.
TEST(StrictYaml, AliasesThatExpandFarBeyondTheTextAreRefused) {
  std::string text = kModel + "bomb:\n  a0: &a0 [x, x]\n";
  for (int i = 1; i < 24; ++i)
    text += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" +
            std::to_string(i - 1) + ", *a" + std::to_string(i - 1) + "]\n";
  EXPECT_NE(config_error(text).find("expands through aliases"), std::string::npos)
      << config_error(text);
}

// A mapping of `n` keys k0..k{n-1} after the model, and `tail` after them.
std::string many_keys(int n, const std::string& tail) {
  std::string text = kModel;
  for (int i = 0; i < n; ++i) text += fmt::format("k{}: {}\n", i, i);
  return text + tail;
}

// The duplicate check compares each key with a hash of those before it, not with each of them:
// 40,000 keys take a fraction of a second that way, and minutes with comparisons of every pair.
// The bound is far above the first and far below the second, so a slow machine does not fail it.
TEST(StrictYaml, AMappingOfManyKeysIsCheckedInTimeInProportionToItsSize) {
  constexpr int kKeys = 40000;
  const auto start = std::chrono::steady_clock::now();
  const std::string repeated = config_error(many_keys(kKeys, "k0: again\n"));
  const std::string unknown = config_error(many_keys(kKeys, ""));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The repeat is found at the very end: every key was looked at.
  EXPECT_EQ(repeated, "c.yaml:40008:1: 'k0' appears twice (first at 8:1)");
  EXPECT_NE(unknown.find("c.yaml:8:1: 'k0': unknown key"), std::string::npos) << unknown;
  EXPECT_LT(seconds, 30.0) << "two parses of " << kKeys << " keys";
}

}  // namespace
}  // namespace tandem
