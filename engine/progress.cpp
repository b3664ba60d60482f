// The progress bar, fitted to the terminal's width, and the number formats of the user-facing
// output.
#include "engine/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace tandem {

std::string format_loss_scale(double scale) {
  return scale >= 1 ? format_count(scale) : fmt::format("{:g}", scale);
}

std::string format_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) s = 0;
  if (s < 60) return fmt::format("{:.1f}s", s);
  if (s < 3600)
    return fmt::format("{}m {:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h {:02d}m", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
}

std::string format_loss(double loss) {
  if (std::isfinite(loss) && std::abs(loss) < 1e9) return fmt::format("{:.4f}", loss);
  return fmt::format("{:.4e}", loss);
}

std::string format_accuracy(double fraction) { return fmt::format("{:.2f}%", 100 * fraction); }

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

ProgressOutput ProgressOutput::standard() {
  ProgressOutput out;
  out.tty = isatty(STDOUT_FILENO);
  if (!out.tty) return out;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    out.width = ws.ws_col;
  } else if (const char* columns = std::getenv("COLUMNS")) {
    const int c = std::atoi(columns);
    if (c > 0) out.width = c;
  }
  out.width = std::max(out.width, 20);
  return out;
}

namespace {

// "  12/157": the count right-aligned to the total's width, so that the line does not shift.
std::string counter(int64_t done, int64_t total) {
  const std::string t = format_count(static_cast<double>(total));
  return fmt::format("{:>{}}/{}", format_count(static_cast<double>(done)), t.size(), t);
}

std::string bar_of(int64_t done, int64_t total, int width) {
  const int filled = total ? static_cast<int>(width * std::min(done, total) / total) : width;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), '.');
  return "[" + bar + "]";
}

std::string join(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields)
    if (!f.empty()) out += (out.empty() ? "" : " - ") + f;
  return out;
}

}  // namespace

std::string progress_line(const ProgressFigures& f, int width) {
  const std::string count = counter(f.done, f.total);
  const double eta =
      f.done ? f.elapsed * static_cast<double>(f.total - f.done) / static_cast<double>(f.done) : 0;
  const std::string time =
      f.final ? format_duration(f.elapsed) + " train" : "ETA " + format_duration(eta);
  const std::string run =
      !f.final && f.run_left >= 0 ? " (run " + format_duration(eta + f.run_left) + ")" : "";
  const std::string loss = "loss " + format_loss(f.loss);
  const std::string acc = "acc " + format_accuracy(f.accuracy);
  const std::string ips = format_count(f.images_per_second) + " img/s";
  const std::string scale =
      f.loss_scale > 0 && !f.final ? "scale " + format_loss_scale(f.loss_scale) : "";
  auto line = [&](int bar, bool with_run, bool with_acc, bool with_ips, bool with_scale = false) {
    return join({bar ? count + " " + bar_of(f.done, f.total, bar) : count,
                 time + (with_run ? run : ""), loss, with_acc ? acc : "", with_ips ? ips : "",
                 with_scale ? scale : ""});
  };
  auto fits = [&](const std::string& l) { return static_cast<int>(l.size()) <= width; };
  // The bar narrows to 10 before a field goes; then the loss scale, images/s, the run's ETA, the
  // bar, accuracy.
  const std::string full = line(30, true, true, true, true);
  if (fits(full)) return full;
  for (bool with_scale : {true, false}) {
    const int spare =
        width - static_cast<int>(line(0, true, true, true, with_scale).size()) - 3;  // " []"
    if (spare >= 10) return line(std::min(30, spare), true, true, true, with_scale);
  }
  for (auto [bar, with_run, with_acc, with_ips] :
       {std::tuple{10, true, true, false}, std::tuple{10, false, true, false},
        std::tuple{0, false, true, false}, std::tuple{0, false, false, false}}) {
    std::string l = line(bar, with_run, with_acc, with_ips);
    if (fits(l)) return l;
  }
  return line(0, false, false, false).substr(0, static_cast<size_t>(std::max(width, 0)));
}

std::vector<std::string> fit_fields(const std::string& head, const std::vector<std::string>& fields,
                                    int width, const std::string& separator, int indent) {
  const std::string margin(static_cast<size_t>(indent), ' ');
  std::vector<std::string> lines{head};
  for (const std::string& f : fields) {
    if (f.empty()) continue;
    std::string& last = lines.back();
    if (last.empty()) {
      last += f;
    } else if (static_cast<int>(last.size() + separator.size() + f.size()) <= width) {
      last += separator + f;
    } else {
      // A separator that ends a field list (", ") stays at the end of the line it closes.
      const std::string tail = separator.substr(0, separator.find_last_not_of(' ') + 1);
      if (separator != " - ") last += tail;
      lines.push_back(margin + f);
    }
  }
  return lines;
}

std::string wrap_to_terminal(const std::string& head, const std::vector<std::string>& parts,
                             const std::string& separator, int indent) {
  const ProgressOutput out = ProgressOutput::standard();
  std::string text;
  for (const std::string& l :
       fit_fields(head, parts, out.tty ? out.width - 1 : INT_MAX, separator, indent))
    text += l + "\n";
  return text;
}

namespace {
std::atomic<bool> g_line_open{false};
}  // namespace

void end_progress_line() {
  if (!g_line_open.exchange(false)) return;
  std::fputs("\n", stdout);
  std::fflush(stdout);
}

ProgressBar::ProgressBar(int64_t total, int verbose, ProgressRun run, ProgressOutput out)
    : total_(total), verbose_(verbose), run_(run), out_(out) {
  // A terminal's last column is left free: a line that fills it would wrap on some terminals.
  if (out_.tty) out_.width = std::max(out_.width - 1, 10);
  if (!out_.tty) out_.width = INT_MAX;
  start_ = last_draw_ = last_update_ = std::chrono::steady_clock::now();
}

ProgressFigures ProgressBar::figures(bool final) const {
  ProgressFigures f;
  f.done = done_;
  f.total = total_;
  const auto end = final && done_ > 0 ? last_update_ : std::chrono::steady_clock::now();
  f.elapsed = std::chrono::duration<double>(end - start_).count();
  f.loss = loss_;
  f.accuracy = accuracy_;
  f.images_per_second = ips_;
  f.loss_scale = scale_;
  f.final = final;
  const int64_t after = run_.epochs - run_.epoch - 1 + run_.later_epochs;
  if (after > 0 && done_ > 0) {
    const double epoch = run_.epoch_seconds > 0
                             ? run_.epoch_seconds
                             : f.elapsed * static_cast<double>(total_) / static_cast<double>(done_);
    f.run_left = static_cast<double>(after) * epoch;
  }
  return f;
}

void ProgressBar::update(int64_t done, double loss, double acc, double ips, double loss_scale) {
  done_ = done;
  last_update_ = std::chrono::steady_clock::now();
  scale_ = loss_scale;
  loss_ = loss;
  accuracy_ = acc;
  ips_ = ips;
  if (verbose_ != 1) return;
  auto now = std::chrono::steady_clock::now();
  if (out_.tty) {
    if (std::chrono::duration<double>(now - last_draw_).count() < 0.1 && done < total_) return;
    last_draw_ = now;
    std::fprintf(out_.file, "\r%s\033[K", progress_line(figures(false), out_.width).c_str());
    std::fflush(out_.file);
    if (out_.file == stdout) g_line_open = true;
  } else {
    int64_t quarter = total_ ? 4 * done / total_ : 4;
    if (quarter > last_quarter_ && done < total_) {
      last_quarter_ = quarter;
      std::fprintf(out_.file, "%s\n", progress_line(figures(false), out_.width).c_str());
      std::fflush(out_.file);
    }
  }
}

void ProgressBar::finish(const std::vector<std::string>& fields, const std::string& heading) {
  if (verbose_ == 0) return;
  const ProgressFigures f = figures(true);
  std::vector<std::string> lines;
  if (verbose_ == 1) {
    lines = fit_fields(progress_line(f, out_.width), fields, out_.width);
  } else {
    std::vector<std::string> all{
        format_duration(f.elapsed) + " train", "loss " + format_loss(f.loss),
        "acc " + format_accuracy(f.accuracy), format_count(f.images_per_second) + " img/s"};
    all.insert(all.end(), fields.begin(), fields.end());
    lines = fit_fields(heading, all, out_.width);
  }
  std::string text = out_.tty && verbose_ == 1 ? "\r" : "";
  for (size_t i = 0; i < lines.size(); ++i)
    text += lines[i] + (out_.tty && i == 0 && verbose_ == 1 ? "\033[K\n" : "\n");
  std::fputs(text.c_str(), out_.file);
  std::fflush(out_.file);
  if (out_.file == stdout) g_line_open = false;
}

}  // namespace tandem
