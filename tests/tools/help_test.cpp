// trainer --help and trainer COMMAND --help: each command's own usage, flags and example, from
// the same table as the general help.
#include "tools/help.h"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/cli_util.h"
#include "tools/app.h"

namespace {

using Result = tandem::test::CliResult;

Result trainer(const std::string& args) { return tandem::test::run_trainer(args); }

const std::vector<std::string> kCommands = {
    "train", "bench", "devices", "eval", "predict", "export-images", "export", "import", "summary"};

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

// The flag rows of a section, each with the lines that continue its description.
std::vector<std::string> flag_rows(const std::vector<std::string>& lines) {
  std::vector<std::string> rows;
  for (const std::string& l : lines)
    if (l.starts_with("  --") || rows.empty())
      rows.push_back(l);
    else
      rows.back() += "\n" + l;
  return rows;
}

TEST(Help, TrainingFlagsReadAsInTheGeneralHelp) {
  const std::string general = trainer("--help").out;
  const std::vector<std::string> rows = flag_rows(section(trainer("train --help").out, "flags:"));
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
  EXPECT_TRUE(listed("export", "--onnx"));
  EXPECT_TRUE(listed("export", "--fold-normalization"));
  EXPECT_FALSE(listed("export", "--device"));
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

// A value the flag's parser takes, so that only whether the command has the flag is tested.
const char* value_for(const std::string& flag) {
  if (flag == "--device") return "cpu";
  if (flag == "--log-level") return "warn";
  if (flag == "--lr") return "0.1";
  if (flag == "--precision") return "fp32";
  return "1";
}

TEST(Help, EachCommandTakesTheFlagsItsHelpListsAndRefusesTheOthers) {
  std::map<std::string, std::map<std::string, bool>> listed;  // command -> flag -> takes a value
  std::set<std::string> every;
  for (const std::string& c : kCommands)
    for (const std::string& row : section(trainer(c + " --help").out, "flags:")) {
      std::istringstream in(row);
      std::string flag, next;
      if (!row.starts_with("  --") || !(in >> flag)) continue;  // a description's second line
      in >> next;
      listed[c][flag] = std::isupper(static_cast<unsigned char>(next[0]));  // "--epochs N"
      every.insert(flag);
    }
  for (const std::string& c : kCommands)
    for (const std::string& flag : every) {
      const auto it = listed[c].find(flag);
      const bool takes = it != listed[c].end();
      // With --help after it, a flag the command takes prints the help.
      std::vector<std::string> words = {c, flag};
      if (!takes || it->second) words.push_back(value_for(flag));
      words.push_back("--help");
      std::string args;
      for (const std::string& w : words) args.append(w).append(" ");
      Result r = trainer(args);
      if (takes)
        EXPECT_EQ(r.status, 0) << c << " " << flag << ": " << r.out;
      else
        EXPECT_NE(r.out.find("error: " + flag + " is not a flag of "), std::string::npos)
            << c << " " << flag << ": " << r.out;
    }
}

// In a file or a pipe (as here) every help screen fits 80 columns, filled between words: the
// same words in the same order as at a width where nothing is filled.
TEST(Help, EveryScreenFits80ColumnsAndBreaksOnlyBetweenWords) {
  auto words = [](const std::string& text) {
    std::vector<std::string> w;
    std::istringstream in(text);
    for (std::string word; in >> word;) w.push_back(word);
    return w;
  };
  std::vector<std::string> commands = kCommands;
  commands.push_back("");  // trainer --help
  for (const std::string& c : commands) {
    const std::string out = trainer(c + " --help").out;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      EXPECT_LE(line.size(), 80u) << (c.empty() ? "--help" : c) << ": " << line;
    const std::string wide = c.empty() ? tandem::general_help(1000) : tandem::command_help(c, 1000);
    EXPECT_EQ(words(out), words(wide)) << (c.empty() ? "--help" : c);
  }
  // At a width of 100 the flags' descriptions take the room.
  std::istringstream in(tandem::general_help(100));
  size_t longest = 0;
  for (std::string line; std::getline(in, line);) longest = std::max(longest, line.size());
  EXPECT_GT(longest, 80u);
  EXPECT_LE(longest, 100u);
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

TEST(Help, NoArgumentsNamesTheConfigFlagAndTheHelp) {
  Result r = trainer("");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out,
            "error: no model config given\nhint: pass --config FILE, e.g. trainer --config "
            "configs/lenet.yaml; trainer help lists every command and flag\n");
}

// The parser is the help's own table: every flag a command's help lists is one that command's
// command line sets, with a value exactly where the help shows one, and no other flag is taken.
TEST(Help, EveryFlagTheHelpListsIsTheOneTheCommandLineSets) {
  int uses = 0;
  for (const std::string& flag : tandem::flag_names()) {
    for (const std::string& command : tandem::commands_of_flag(flag)) {
      const std::optional<tandem::FlagUse> use = tandem::flag_use(flag, command);
      ASSERT_TRUE(use.has_value()) << flag << " of " << command;
      EXPECT_TRUE(static_cast<bool>(use->set)) << flag << " of " << command;
      EXPECT_EQ(use->takes_value, !tandem::is_switch(flag)) << flag;
      ++uses;
    }
  }
  EXPECT_GT(uses, 40);
  EXPECT_FALSE(tandem::flag_use("--epochs", "eval").has_value());  // train's, not eval's
  EXPECT_FALSE(tandem::flag_use("--epoch", "train").has_value());
  tandem::RunRequest r;
  tandem::flag_use("--epochs", "train")->set(r, "--epochs", "7");
  tandem::flag_use("--device", "train")->set(r, "--device", "cpu:2,gpu");
  tandem::flag_use("--json", "bench")->set(r, "--json", "");
  EXPECT_EQ(r.epochs, 7);
  EXPECT_EQ(r.devices, (std::vector<std::string>{"cpu:2", "gpu"}));
  EXPECT_TRUE(r.json);
}

}  // namespace
