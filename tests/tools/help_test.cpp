// trainer --help and trainer COMMAND --help: each command's own usage, flags and example, from
// the same table as the general help.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/cli_util.h"

namespace {

using Result = tandem::test::CliResult;

Result trainer(const std::string& args) { return tandem::test::run_trainer(args); }

const std::vector<std::string> kCommands = {"train", "bench",   "devices",
                                            "eval",  "predict", "export-images"};

// The lines of `text` from the one after `header` up to the next empty line.
std::vector<std::string> section(const std::string& text, const std::string& header) {
  std::vector<std::string> lines;
  std::istringstream in(text.substr(text.find(header + "\n") + header.size() + 1));
  for (std::string l; std::getline(in, l) && !l.empty();) lines.push_back(l);
  return lines;
}

// The "--flag" words of a line.
std::vector<std::string> flags_in(const std::string& line) {
  std::vector<std::string> flags;
  std::istringstream in(line);
  for (std::string w; in >> w;)
    if (w.starts_with("--")) flags.push_back(w);
  return flags;
}

TEST(Help, EachCommandPrintsItsUsageFlagsAndExampleNotTheGeneralHelp) {
  for (const std::string& c : kCommands) {
    Result r = trainer(c + " --help");
    ASSERT_EQ(r.status, 0) << c << ": " << r.out;
    EXPECT_EQ(r.out.find(c == "train" ? "usage:\n  trainer --config" : "usage:\n  trainer " + c),
              0u)
        << c << ": " << r.out;
    EXPECT_FALSE(section(r.out, "flags:").empty()) << c << ": " << r.out;
    ASSERT_EQ(section(r.out, "example:").size(), 1u) << c << ": " << r.out;
    EXPECT_EQ(r.out.find("exit status:"), std::string::npos) << c << ": " << r.out;
  }
}

TEST(Help, CommandUsageIsTheGeneralHelpsUsageOfIt) {
  const std::string general = trainer("--help").out;
  for (const std::string& c : kCommands) {
    const std::vector<std::string> usage = section(trainer(c + " --help").out, "usage:");
    ASSERT_FALSE(usage.empty()) << c;
    std::string block;
    for (const std::string& l : usage) block += l + "\n";
    EXPECT_NE(general.find(block), std::string::npos) << c << ":\n" << block;
  }
}

TEST(Help, TrainingFlagsReadAsInTheGeneralHelp) {
  const std::string general = trainer("--help").out;
  const std::vector<std::string> rows = section(trainer("train --help").out, "flags:");
  ASSERT_GT(rows.size(), 10u);
  for (const std::string& row : rows) {
    if (row.starts_with("  --config ") || row.starts_with("  --device ")) continue;  // usage only
    EXPECT_NE(general.find("\n" + row + "\n"), std::string::npos) << row;
  }
}

TEST(Help, CommandListsItsOwnFlagsAndNotThoseOfOthers) {
  auto listed = [](const std::string& command, const std::string& flag) {
    for (const std::string& row : section(trainer(command + " --help").out, "flags:"))
      if (row.starts_with("  " + flag + " ") || row == "  " + flag) return true;
    return false;
  };
  for (const char* f : {"--batch-sizes", "--steps", "--warmup", "--json", "--per-layer", "--plot"})
    EXPECT_TRUE(listed("bench", f)) << f;
  EXPECT_FALSE(listed("bench", "--epochs"));
  EXPECT_FALSE(listed("bench", "--resume"));
  EXPECT_TRUE(listed("eval", "--checkpoint"));
  EXPECT_TRUE(listed("eval", "--data"));
  EXPECT_FALSE(listed("eval", "--top-k"));
  EXPECT_TRUE(listed("predict", "--top-k"));
  EXPECT_TRUE(listed("export-images", "--out"));
  EXPECT_TRUE(listed("export-images", "--limit-per-class"));
  EXPECT_TRUE(listed("train", "--resume"));
  EXPECT_FALSE(listed("train", "--batch-sizes"));
}

TEST(Help, ExamplesUseOnlyFlagsTheirHelpLists) {
  for (const std::string& c : kCommands) {
    const std::string out = trainer(c + " --help").out;
    const std::string rows = [&] {
      std::string s;
      for (const std::string& row : section(out, "flags:")) s += row + "\n";
      return s;
    }();
    for (const std::string& flag : flags_in(section(out, "example:").at(0)))
      EXPECT_NE(rows.find("  " + flag + " "), std::string::npos) << c << ": " << flag;
  }
}

TEST(Help, HelpAfterTrainingFlagsIsTheGeneralHelp) {
  const std::string general = trainer("--help").out;
  EXPECT_EQ(trainer("--config x.yaml --help").out, general);
  EXPECT_EQ(trainer("-h").out, general);
}

TEST(Help, UnknownFlagOfACommandPointsAtThatCommandsHelp) {
  Result r = trainer("bench --config x.yaml --stepz 3");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean '--steps'?\nhint: see trainer bench --help"),
            std::string::npos)
      << r.out;
}

}  // namespace
