// Paths checked for what they are before they are read or written (see file_check.h).
#include "engine/file_check.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "engine/text.h"

namespace tandem {
namespace {

// What a file of this mode is, when it is not a regular file: "a FIFO (named pipe)".
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The words for a stat result: "" when it is a regular file of at most max_bytes.
std::string problem_of(const struct stat& st, uint64_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    const std::string kind = kind_of(st.st_mode);
    return "is " + kind + (kind.starts_with("not") ? "" : ", not a file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    return fmt::format("is {}, more than the {} such a file may have", format_bytes(size),
                       format_bytes(max_bytes));
  return "";
}

[[noreturn]] void refuse_with(const RefuseFile& refuse, const std::string& path,
                              const std::string& why) {
  refuse(why);
  throw Error("'" + path + "' " + why, "give a regular file");
}

}  // namespace

std::string file_problem(const std::string& path, uint64_t max_bytes) {
  if (path.empty()) return "is an empty path";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return "does not exist";
    return std::string("cannot be looked at: ") + std::strerror(err);
  }
  return problem_of(st, max_bytes);
}

std::string output_problem(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  return "is " + kind_of(st.st_mode) + ", not a file to write";
}

ReadFile::ReadFile(const std::string& path, uint64_t max_bytes, const RefuseFile& refuse) {
  if (std::string why = file_problem(path, max_bytes); !why.empty()) refuse_with(refuse, path, why);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) refuse_with(refuse, path, std::string("cannot be opened: ") + std::strerror(errno));
  struct stat st;
  std::string why = ::fstat(fd_, &st) != 0
                        ? std::string("cannot be looked at: ") + std::strerror(errno)
                        : problem_of(st, max_bytes);
  if (!why.empty()) {
    ::close(fd_);
    fd_ = -1;
    refuse_with(refuse, path, why);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  // A regular file never blocks; the flag only guarded the open.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool ReadFile::read_at(uint64_t offset, void* out, size_t n) const {
  auto* p = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

std::string read_whole_file(const std::string& path, uint64_t max_bytes, const RefuseFile& refuse) {
  ReadFile f(path, max_bytes, refuse);
  std::string text(static_cast<size_t>(f.size()), '\0');
  errno = 0;
  if (!f.read_at(0, text.data(), text.size()))
    refuse_with(refuse, path,
                errno ? std::string("cannot be read: ") + std::strerror(errno)
                      : std::string("cannot be read: it became shorter while it was read"));
  return text;
}

}  // namespace tandem
