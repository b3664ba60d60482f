// Small text helpers (text.h).
#include "engine/text.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "engine/utf8.h"

namespace tandem {

namespace {

// Code points in s (a byte that is no UTF-8 counts as one).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    char32_t c;
    const size_t len = utf8_at(s, i, &c);
    i += len ? len : 1;
  }
  return n;
}

}  // namespace

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} byte{}", bytes, bytes == 1 ? "" : "s");
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / (1ull << 20));
  return fmt::format("{:.1f} KiB", b / (1ull << 10));
}

std::string fill_words(const std::string& words, size_t first, size_t indent, size_t width) {
  std::string out, word;
  size_t col = first;
  bool line_empty = true;
  std::istringstream in(words);
  while (in >> word) {
    const size_t w = columns(word);
    if (!line_empty && col + 1 + w > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
      line_empty = true;
    }
    if (!line_empty) out += ' ', ++col;
    out += word;
    col += w;
    line_empty = false;
  }
  return out + "\n";
}

size_t output_width() {
  if (!isatty(STDOUT_FILENO)) return 80;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return std::max<size_t>(ws.ws_col, 40);
  if (const char* c = std::getenv("COLUMNS"); c && std::atoi(c) > 0)
    return std::max<size_t>(static_cast<size_t>(std::atoi(c)), 40);
  return 80;
}

}  // namespace tandem
