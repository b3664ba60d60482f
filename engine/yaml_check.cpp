// Strict YAML checks beyond yaml-cpp's own (see yaml_check.h); every check is one linear pass.
#include "engine/yaml_check.h"

#include <fmt/format.h>

#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/error.h"
#include "engine/utf8.h"

namespace tandem {
namespace {

// YAML 1.2's printable characters (c-printable), less the byte order mark, which it allows only
// at the start: tab, line feed, carriage return, U+0020..U+007E, NEL, U+00A0 and up but for the
// surrogates and U+FFFE/U+FFFF.
bool printable(char32_t c) {
  return c == 0x09 || c == 0x0A || c == 0x0D || (c >= 0x20 && c <= 0x7E) || c == 0x85 ||
         (c >= 0xA0 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
         (c >= 0x10000 && c <= 0x10FFFF);
}

std::string character_name(char32_t c) {
  if (c == 0) return "a NUL character (U+0000)";
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F))
    return fmt::format("the control character U+{:04X}", static_cast<uint32_t>(c));
  return fmt::format("the character U+{:04X}", static_cast<uint32_t>(c));
}

std::string mark_text(const YAML::Mark& m) {
  if (m.line < 0) return "";
  return fmt::format(":{}:{}", m.line + 1, m.column + 1);  // yaml-cpp counts from 0
}

// A value's characters: what escapes in a double-quoted scalar ("\0", "\e") may have put there.
// Tab and line ends are text; other control characters are not (a NUL would cut a path short).
void check_scalar(const std::string& s, const YAML::Node& node, const std::string& file,
                  const std::string& where) {
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const size_t n = utf8_at(s, i, &c);
    if (n == 0) {
      throw ConfigError(
          fmt::format("{}{}: {}a value holds the byte 0x{:02X}, which is not UTF-8", file,
                      mark_text(node.Mark()), where, static_cast<unsigned char>(s[i])),
          "write the value as UTF-8 text (a \\x escape makes a byte, not text)");
    }
    if (!printable(c) && c != 0xFEFF)
      throw ConfigError(fmt::format("{}{}: {}a value holds {}", file, mark_text(node.Mark()), where,
                                    character_name(c)),
                        "remove the escape that makes it: config values are printable text");
    i += n;
  }
}

}  // namespace

void check_yaml_text(const std::string& text, const std::string& file) {
  int line = 1, column = 1;
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const size_t n = utf8_at(text, i, &c);
    if (n == 0)
      throw ConfigError(fmt::format("{}:{}:{}: malformed YAML: the byte 0x{:02X} is not UTF-8",
                                    file, line, column, static_cast<unsigned char>(text[i])),
                        "save the file as UTF-8 (YAML text is Unicode)");
    if (!printable(c) && !(c == 0xFEFF && i == 0))
      throw ConfigError(
          fmt::format("{}:{}:{}: malformed YAML: {} in the text", file, line, column,
                      character_name(c)),
          "remove it: YAML allows tabs, line ends and printable characters only (write a "
          "character a value needs as an escape in double quotes, e.g. \"\\t\")");
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += n;
  }
}

void check_yaml_tree(const YAML::Node& root, const std::string& file, size_t text_size) {
  // Breadth first, without recursion (a deeply nested document does not exhaust the stack); each
  // entry knows its parent, so that a message can say where it is only when one is needed.
  struct Item {
    YAML::Node node;
    size_t parent;
    std::string step;  // "train", "item 2"
  };
  constexpr size_t kRoot = static_cast<size_t>(-1);
  // Nodes reached: one per place in the text but for aliases, which repeat their anchor's.
  const size_t limit = 8 * text_size + 4096;
  std::vector<Item> items;
  items.push_back({root, kRoot, ""});
  auto where = [&](size_t i) {
    std::string path;
    for (; i != kRoot && items[i].parent != kRoot; i = items[i].parent)
      path = items[i].step + (path.empty() ? "" : (path.starts_with("item ") ? " " : ".") + path);
    return path.empty() ? std::string() : path + ": ";
  };
  for (size_t i = 0; i < items.size(); ++i) {
    if (items.size() > limit)
      throw ConfigError(
          fmt::format("{}: the document expands through aliases (*name) to more than {} values, "
                      "far more than its {} bytes hold",
                      file, limit, text_size),
          "write the values out, or use fewer aliases");
    const YAML::Node node = items[i].node;  // a handle: `items` may grow below
    if (node.IsScalar()) {
      check_scalar(node.Scalar(), node, file, where(i));
    } else if (node.IsSequence()) {
      size_t k = 0;
      for (const YAML::Node& child : node) items.push_back({child, i, fmt::format("item {}", ++k)});
    } else if (node.IsMap()) {
      std::unordered_map<std::string, YAML::Mark> seen;
      for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node key = it->first;
        if (!key.IsScalar())
          throw ConfigError(
              fmt::format("{}{}: {}a key is {}, not plain text", file, mark_text(key.Mark()),
                          where(i), key.IsSequence() ? "a list" : "a mapping"),
              "write each key as a word, e.g. 'batch_size: 64'");
        check_scalar(key.Scalar(), key, file, where(i));
        if (auto [first, fresh] = seen.emplace(key.Scalar(), key.Mark()); !fresh)
          throw ConfigError(
              fmt::format("{}{}: {}'{}' appears twice (first at {})", file, mark_text(key.Mark()),
                          where(i), key.Scalar(), mark_text(first->second).substr(1)),
              "keep one of them");
        items.push_back({it->second, i, key.Scalar()});
      }
    }
  }
}

}  // namespace tandem
