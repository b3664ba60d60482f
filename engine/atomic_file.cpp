// Whole-file replacement through a synced temporary and a rename (atomic_file.h).
#include "engine/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

namespace tandem {
namespace fs = std::filesystem;
namespace {

// This host's name as it goes into temporary file names: letters, digits, '-' and '_' only.
std::string host_tag() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !name[0]) return "host";
  std::string tag(name);
  for (char& c : tag)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  return tag;
}

// ".NAME.tmp.HOST.PID.": the start of this process's temporary files for NAME (a random part
// follows). It says which process on which host writes it, so that a later run can tell the
// leftovers of a process that died from the file a live run is still writing.
std::string temporary_prefix(const std::string& name) {
  return fmt::format(".{}.tmp.{}.{}.", name, host_tag(), ::getpid());
}

std::string folder_of(const std::string& path) {
  const fs::path target(path);
  return target.has_parent_path() ? target.parent_path().string() : ".";
}

// "what (reason)" with errno's reason.
std::string failure(const std::string& what, int error) {
  return fmt::format("{} ({})", what, std::strerror(error));
}

// Creates this process's temporary beside `path`: its name in *tmp and an open descriptor, or -1
// with *tmp cleared and *why set.
int create_temporary(const std::string& path, std::string* tmp, std::string* why,
                     bool sweep = true) {
  const std::string folder = folder_of(path);
  if (sweep) remove_stale_temporaries(folder);
  *tmp = (fs::path(folder) / (temporary_prefix(fs::path(path).filename().string()) + "XXXXXX"))
             .string();
  const int fd = ::mkostemp(tmp->data(), O_CLOEXEC);
  if (fd < 0) {
    *why = failure("cannot create " + *tmp, errno);
    tmp->clear();
    return -1;
  }
  // mkostemp makes it 0600; the file is as readable as any file the user makes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  return fd;
}

// Renames the complete, synced temporary over `path` and syncs the folder (where `synced`); on
// failure removes it.
std::string commit(const std::string& tmp, const std::string& path, bool synced = true) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return failure("renaming the temporary file failed", error);
  }
  if (!synced) return "";
  // The rename itself lives in the folder: sync it too, so a power cut keeps the new name.
  if (int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  return "";
}

}  // namespace

std::string replace_file(const std::string& path, const std::function<bool(FILE*)>& write,
                         bool synced) {
  std::string tmp, why;
  const int fd = create_temporary(path, &tmp, &why, synced);
  if (fd < 0) return why;
  FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int error = errno;
    ::close(fd);
    std::remove(tmp.c_str());
    return failure("cannot open " + tmp, error);
  }
  errno = 0;
  bool ok = write(f);
  ok = ok && std::fflush(f) == 0 && (!synced || ::fsync(fileno(f)) == 0);
  int error = errno;
  if (std::fclose(f) != 0) {
    if (ok) error = errno;
    ok = false;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return failure("writing failed", error ? error : EIO);
  }
  return commit(tmp, path, synced);
}

std::string replace_file_with(const std::string& path, const std::string& contents, bool synced) {
  return replace_file(
      path,
      [&](FILE* f) {
        return std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
      },
      synced);
}

std::string replace_file_by_name(const std::string& path,
                                 const std::function<bool(const std::string& tmp)>& produce) {
  std::string tmp, why;
  const int fd = create_temporary(path, &tmp, &why);
  if (fd < 0) return why;
  ::close(fd);  // the producer opens it by name
  errno = 0;
  bool ok = produce(tmp);
  int error = errno;
  std::error_code ec;
  if (ok && fs::file_size(tmp, ec) == 0) ok = false, error = ec ? ec.value() : EIO;
  if (ok) {
    const int sync_fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    ok = sync_fd >= 0 && ::fsync(sync_fd) == 0;
    if (!ok) error = errno;
    if (sync_fd >= 0) ::close(sync_fd);
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return failure("writing failed", error ? error : EIO);
  }
  return commit(tmp, path);
}

size_t remove_stale_temporaries(const std::string& folder) {
  const std::string host = host_tag();
  size_t removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    // ".NAME.tmp.HOST.PID.XXXXXX", from the right: the random part, the process, the host.
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(".")) continue;
    const size_t random_dot = name.rfind('.');
    if (random_dot == std::string::npos || random_dot == 0) continue;
    const size_t pid_dot = name.rfind('.', random_dot - 1);
    if (pid_dot == std::string::npos || pid_dot == 0) continue;
    const size_t host_dot = name.rfind('.', pid_dot - 1);
    if (host_dot == std::string::npos || host_dot < 4 ||
        name.compare(host_dot - 4, 4, ".tmp") != 0 ||
        name.compare(host_dot + 1, pid_dot - host_dot - 1, host) != 0)
      continue;
    pid_t pid = 0;
    const char* first = name.data() + pid_dot + 1;
    const char* last = name.data() + random_dot;
    if (std::from_chars(first, last, pid).ptr != last || pid <= 0) continue;
    // Another host's, or a live process's (this one's included): not ours to touch.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code remove_ec;
    if (entry.is_regular_file(remove_ec) && fs::remove(entry.path(), remove_ec)) ++removed;
  }
  return removed;
}

}  // namespace tandem
