// The progress bar and the number formats of the user-facing output.
#include "engine/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>

namespace tandem {

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  if (s < 3600) return fmt::format("{}m {:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h {:02d}m", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
}

std::string format_loss(double loss) {
  if (std::isfinite(loss) && std::abs(loss) < 1e5) return fmt::format("{:.4f}", loss);
  return fmt::format("{:.4g}", loss);
}

std::string format_count(double v) {
  std::string digits = fmt::format("{:.0f}", std::round(v));
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

ProgressBar::ProgressBar(int64_t total, bool enabled)
    : total_(total), enabled_(enabled), tty_(isatty(STDOUT_FILENO)) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

std::string ProgressBar::line(int64_t done, double loss, double acc, double ips, bool final) const {
  const int width = 30;
  const int filled = total_ ? static_cast<int>(width * done / total_) : width;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), '.');
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string when = final ? format_duration(elapsed)
                           : "ETA " + format_duration(done ? elapsed * (total_ - done) / done : 0);
  int w = static_cast<int>(std::to_string(total_).size());
  return fmt::format("{:>{}}/{} [{}] {} - loss: {} - accuracy: {:.4f} - {} img/s", done, w, total_,
                     bar, when, format_loss(loss), acc, format_count(ips));
}

namespace {
std::atomic<bool> g_line_open{false};
}  // namespace

void end_progress_line() {
  if (!g_line_open.exchange(false)) return;
  std::fputs("\n", stdout);
  std::fflush(stdout);
}

void ProgressBar::update(int64_t done, double loss, double acc, double ips) {
  done_ = done;
  loss_ = loss;
  accuracy_ = acc;
  ips_ = ips;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (std::chrono::duration<double>(now - last_draw_).count() < 0.1 && done < total_) return;
    last_draw_ = now;
    std::fprintf(stdout, "\r%s\033[K", line(done, loss, acc, ips, false).c_str());
    std::fflush(stdout);
    g_line_open = true;
  } else {
    int64_t quarter = total_ ? 4 * done / total_ : 4;
    if (quarter > last_quarter_ && done < total_) {
      last_quarter_ = quarter;
      std::fprintf(stdout, "%s\n", line(done, loss, acc, ips, false).c_str());
      std::fflush(stdout);
    }
  }
}

void ProgressBar::finish(const std::string& summary) {
  if (!enabled_) return;
  std::string l = line(done_, loss_, accuracy_, ips_, true);
  std::fprintf(stdout, "%s%s%s%s\n", tty_ ? "\r" : "", l.c_str(), summary.c_str(),
               tty_ ? "\033[K" : "");
  std::fflush(stdout);
  g_line_open = false;
}

std::string format_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / (1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / (1ull << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace tandem
