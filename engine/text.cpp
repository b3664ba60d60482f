// Small text helpers (text.h).
#include "engine/text.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>

namespace tandem {

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

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} byte{}", bytes, bytes == 1 ? "" : "s");
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / (1ull << 20));
  return fmt::format("{:.1f} KiB", b / (1ull << 10));
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
