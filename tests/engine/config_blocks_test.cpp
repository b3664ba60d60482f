// Blocks written once (`blocks:`) and used like layer types: their layers copied in with the
// use's values, names scoped by the use, `input` the block's input; and every way a use can be
// wrong, refused at its line before anything trains.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"

namespace tandem {
namespace {

const std::string kHead = R"(name: blocks
input: {shape: [4, 6, 6]}
)";

const std::string kBlocks = R"(blocks:
  res:
    params: {filters: null, act: relu}
    layers:
      - {conv2d: {filters: $filters, kernel: 3, padding: 1}, name: conv}
      - {add: {}, inputs: [input, conv]}
      - $act
  pair:
    params: {filters: 4}
    layers:
      - {res: {filters: $filters}, name: a}
      - {res: {filters: $filters, act: tanh}}
)";

Config parsed(const std::string& layers, const std::string& blocks = kBlocks) {
  return parse_config(kHead + blocks + "layers:\n" + layers, "blocks.yaml");
}

// The message of the config's refusal, "" when it is accepted (the graph built too).
std::string error_of(const std::string& layers, const std::string& blocks = kBlocks) {
  try {
    Config c = parsed(layers, blocks);
    Graph g(c);
  } catch (const ConfigError& e) {
    return e.cause() + "\nhint: " + e.hint();
  }
  return "";
}

std::vector<std::string> names_of(Config& c) {
  Graph g(c);
  std::vector<std::string> names;
  for (const SummaryRow& r : g.summary()) names.push_back(r.name);
  return names;
}

TEST(ConfigBlocks, AUseCopiesTheLayersWithItsValuesUnderItsName) {
  Config c = parsed(R"(  - conv2d: {filters: 4, kernel: 1}
  - {res: {filters: 4}, repeat: 2, name: stage}
  - {res: {filters: 4, act: sigmoid}}
  - flatten
  - dense: {units: 2}
)");
  const std::vector<std::string> expected = {"conv2d_1",        "stage.0.conv", "stage.0.add_1",
                                             "stage.0.relu_1",  "stage.1.conv", "stage.1.add_1",
                                             "stage.1.relu_1",  "res_1.conv",   "res_1.add_1",
                                             "res_1.sigmoid_1", "flatten_1",    "dense_1"};
  EXPECT_EQ(names_of(c), expected);
  // `input` is the block's input, the layer before the use; names within a use are its own.
  ASSERT_EQ(c.layers[2].inputs.size(), 2u);
  EXPECT_EQ(c.layers[2].inputs[0], "conv2d_1");
  EXPECT_EQ(c.layers[2].inputs[1], "stage.0.conv");
  EXPECT_EQ(c.layers[5].inputs[0], "stage.0.relu_1");  // the second use takes the first's output
  EXPECT_EQ(c.layers[8].inputs[1], "res_1.conv");
}

TEST(ConfigBlocks, BlocksUseBlocksAndAUseTakesTheInputsItNames) {
  Config c = parsed(R"(  - {conv2d: {filters: 4, kernel: 1}, name: stem}
  - {relu: {}, name: r}
  - {pair: {}, inputs: [stem], name: p}
  - {add: {}, inputs: [p.res_1.tanh_1, r]}
  - flatten
  - dense: {units: 2}
)");
  const std::vector<std::string> names = names_of(c);
  EXPECT_EQ(names[2], "p.a.conv");
  EXPECT_EQ(names[5], "p.res_1.conv");
  EXPECT_EQ(names[7], "p.res_1.tanh_1");
  EXPECT_EQ(c.layers[2].inputs, std::vector<std::string>{"stem"});  // not r, listed before it
  EXPECT_EQ(c.layers[3].inputs[0], "stem");                         // the add's `input`
  EXPECT_EQ(c.layers[6].inputs[0], "p.a.relu_1");                   // the second res's input
}

struct BadUse {
  const char* name;
  std::string layers, blocks;
  std::vector<std::string> expected;
};

class ConfigBlockErrors : public ::testing::TestWithParam<BadUse> {};

TEST_P(ConfigBlockErrors, AreRefusedAtTheirLines) {
  const BadUse& bad = GetParam();
  const std::string e = error_of(bad.layers, bad.blocks.empty() ? kBlocks : bad.blocks);
  ASSERT_FALSE(e.empty()) << "accepted: " << bad.layers;
  for (const std::string& part : bad.expected) EXPECT_NE(e.find(part), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(
    Config, ConfigBlockErrors,
    ::testing::Values(
        BadUse{"MissingParam",
               "  - res: {}\n",
               "",
               {"blocks.yaml:16:5: block 'res' (defined at blocks.yaml:4:3) needs a value for its "
                "param 'filters'",
                "e.g. '- res: {filters: ...}'"}},
        BadUse{"UnknownParam",
               "  - res: {filter: 4}\n",
               "",
               {"blocks.yaml:16:11: block 'res' (defined at blocks.yaml:4:3) has no param "
                "'filter'",
                "did you mean 'filters'"}},
        BadUse{"UnknownDollarParam",
               "  - bad: {}\n",
               "blocks:\n  bad:\n    params: {filters: 2}\n    layers:\n"
               "      - conv2d: {filters: $filter, kernel: 1}\n",
               {"blocks.yaml:7:27: block 'bad' uses '$filter', which is none of its params",
                "did you mean 'filters'"}},
        BadUse{"ABlockThatUsesItself",
               "  - loop: {}\n",
               "blocks:\n  loop:\n    layers:\n      - relu\n      - loop: {}\n",
               {"block 'loop' uses itself", "never itself"}},
        BadUse{"BlocksThatUseEachOther",
               "  - a: {}\n",
               "blocks:\n  a:\n    layers: [b]\n  b:\n    layers: [a]\n",
               {"block 'a' uses itself (through a -> b)"}},
        BadUse{"AnErrorInsideABlockNamesBothLines",
               "  - res: {filters: 6}\n  - {conv2d: {filters: 4, kernel: 1, groups: 4}}\n",
               "blocks:\n  res:\n    params: {filters: null}\n    layers:\n"
               "      - {conv2d: {filters: $filters, kernel: 3, padding: 1, groups: 4}}\n",
               {"blocks.yaml:7:9 (in block 'res', used at blocks.yaml:9:5): layer 1 (conv2d, "
                "res_1.conv2d_1), input [4, 6, 6]",
                "groups 4 must divide both the input's 4 channels and the 6 filters"}},
        BadUse{"RepeatOfALayerType",
               "  - {relu: {}, repeat: 2}\n",
               "",
               {"layer 1 (relu): 'repeat' repeats a block, and relu is a layer type"}},
        BadUse{"RepeatThatIsNotAPositiveCount",
               "  - {res: {filters: 4}, repeat: 0}\n",
               "",
               {"'repeat' must be a positive number of uses"}},
        BadUse{"ABlockNamedLikeALayerType",
               "  - relu\n",
               "blocks:\n  relu:\n    layers: [tanh]\n",
               {"block 'relu' has the name of a layer type"}}),
    [](const ::testing::TestParamInfo<BadUse>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace tandem
