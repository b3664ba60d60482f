// Tables, and the check of an output file's path.
#include "engine/report.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/file_check.h"

namespace tandem {

namespace {
bool numeric(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == ',' || c == '-' ||
          c == '%' || c == 'x' || c == ' ' || c == 'e' || c == '+'))
      return false;
  return std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+';
}
// "576.0K", "1.2M": a number with an SI suffix.
bool numeric_cell(const std::string& s) {
  if (!s.empty() && std::string("KMGT").find(s.back()) != std::string::npos)
    return numeric(s.substr(0, s.size() - 1));
  return numeric(s);
}
}  // namespace

std::string format_table(const Row& header, const std::vector<Row>& rows) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const Row& r : rows)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  auto line = [&](const Row& r, bool head) {
    std::string s;
    for (size_t c = 0; c < width.size(); ++c) {
      std::string cell = c < r.size() ? r[c] : "";
      bool right = !head && c > 0 && numeric_cell(cell);
      if (head && c > 0 && !rows.empty() && c < rows[0].size() && numeric_cell(rows[0][c]))
        right = true;
      std::string pad(width[c] - cell.size(), ' ');
      s += (c ? "  " : "") + (right ? pad + cell : cell + pad);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(header, true);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += std::string(total + 2 * (width.size() - 1), '-') + "\n";
  for (const Row& r : rows) out += line(r, false);
  return out;
}

std::string format_pairs(const std::string& title, const InfoRows& rows) {
  size_t w = 0;
  for (const auto& [k, v] : rows) w = std::max(w, k.size());
  std::string out = title + "\n";
  for (const auto& [k, v] : rows) out += fmt::format("  {:<{}}  {}\n", k, w, v);
  return out;
}

void prepare_output_file(const std::string& path, const std::string& flag,
                         const std::string& example) {
  namespace fs = std::filesystem;
  const fs::path out(path);
  std::error_code ec;
  if (fs::is_directory(out, ec))
    throw UsageError(flag + " " + path + " is a folder",
                     "give a file name, e.g. " + flag + " " + (out / example).string());
  // A FIFO would block the run at its first write, a device would swallow the figures.
  if (const std::string why = output_problem(path); !why.empty())
    throw UsageError(flag + " " + path + " " + why,
                     "give a file name, e.g. " + flag + " " + example);
  const fs::path folder = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(folder, ec);
  if (ec)
    throw UsageError(flag + " " + path + ": cannot create the folder " + folder.string() + " (" +
                         ec.message() + ")",
                     "give a path in a writable folder");
  // The one sure test: create a file beside it and remove it (access() says yes to root on
  // folders that take no file, such as /proc).
  std::string probe = (folder / ".tandem-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw UsageError(flag + " " + path + ": cannot create files in " + folder.string() + " (" +
                         std::strerror(errno) + ")",
                     "give a path in a writable folder");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace tandem
