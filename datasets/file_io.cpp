// File helpers shared by the data set readers: whole-file reads (gzipped or plain) and lookups.
#include "datasets/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/text.h"

namespace tandem::data_io {

namespace fs = std::filesystem;

namespace {

// gzerror's text, without the "path: " prefix zlib puts before some messages.
std::string gz_message(gzFile f, const std::string& path, int* code) {
  std::string msg = gzerror(f, code);
  if (msg.rfind(path + ": ", 0) == 0) msg.erase(0, path.size() + 2);
  return msg;
}

// Opens a data file, a regular file only: a FIFO, a device or a folder is refused by name before
// anything waits on it or reads it without end.
ReadFile open_data_file(const std::string& path, uint64_t max_bytes) {
  return ReadFile(path, max_bytes, [&](const std::string& why) {
    throw DataError("the data file '" + path + "' " + why,
                    "give the data set's own files (see the data section in README.md)");
  });
}

// Decompresses `path` (or passes a plain file through) chunk by chunk to `sink(bytes, n)`;
// returns the byte count. Throws DataError naming the file when it cannot be opened or its gzip
// stream is corrupt.
template <typename Sink>
uint64_t stream_file(const std::string& path, uint64_t max_bytes, Sink&& sink) {
  gzFile f = nullptr;
  {
    const ReadFile file = open_data_file(path, max_bytes);
    const int fd = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);
    f = fd >= 0 ? gzdopen(fd, "rb") : nullptr;
    if (!f && fd >= 0) ::close(fd);
  }
  if (!f) {
    int err = errno;
    throw DataError("cannot open '" + path + "': " + (err ? std::strerror(err) : "out of memory"),
                    "check that the file exists and is readable");
  }
  gzbuffer(f, 1 << 18);
  std::vector<uint8_t> chunk(1 << 20);
  uint64_t total = 0;
  for (;;) {
    int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string msg = gz_message(f, path, &code);
      gzclose(f);
      throw DataError("'" + path + "' is corrupt: " + msg,
                      "download the file again (a gzip stream that does not decompress)");
    }
    try {
      sink(chunk.data(), static_cast<size_t>(n));
    } catch (...) {
      gzclose(f);
      throw;
    }
    total += static_cast<uint64_t>(n);
    if (static_cast<size_t>(n) < chunk.size()) break;
  }
  int code = 0;
  std::string msg = gz_message(f, path, &code);
  gzclose(f);
  // A gzip stream cut short reads as far as it goes, then reports Z_BUF_ERROR.
  if (code != Z_OK && code != Z_STREAM_END)
    throw DataError("'" + path + "' is corrupt: " + msg + " after " + std::to_string(total) +
                        " decompressed bytes",
                    "download the file again (the gzip stream is cut short or damaged)");
  return total;
}

bool gzipped(const ReadFile& file) {
  unsigned char magic[2] = {0, 0};
  return file.read_at(0, magic, 2) && magic[0] == 0x1f && magic[1] == 0x8b;
}

// An unlinked temporary file open for reading and writing: it goes when it is closed, or when
// the process ends however it ends. -1 when none can be made.
int anonymous_file() {
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec);
  if (ec) return -1;
  std::string name = (dir / "tandem-data-XXXXXX").string();
  const int fd = mkstemp(name.data());
  if (fd >= 0) unlink(name.c_str());
  return fd;
}

}  // namespace

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> out;
  stream_file(path, kMaxWholeDataBytes, [&](const uint8_t* p, size_t n) {
    // A gzip stream can unpack to far more than its file: the bound holds for what is kept.
    if (out.size() + n > kMaxWholeDataBytes)
      throw DataError("the data file '" + path + "' unpacks to more than " +
                          format_bytes(kMaxWholeDataBytes) + ", more than such a file may have",
                      "check that it is the data set's own file (it may be damaged)");
    out.insert(out.end(), p, p + n);
  });
  return out;
}

RecordFile::RecordFile(const std::string& path) : path_(path) {
  {
    const ReadFile file = open_data_file(path, kMaxRecordBytes);
    if (!gzipped(file)) {
      fd_ = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);
      if (fd_ < 0)
        throw DataError("cannot open '" + path + "': " + std::strerror(errno),
                        "check that the file exists and is readable");
      size_ = file.size();
      return;
    }
  }
  struct NoRoom {};
  fd_ = anonymous_file();
  try {
    if (fd_ < 0) throw NoRoom{};
    size_ = stream_file(path, kMaxRecordBytes, [&](const uint8_t* p, size_t n) {
      for (size_t done = 0; done < n;) {
        const ssize_t w = write(fd_, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) throw NoRoom{};
        done += static_cast<size_t>(w);
      }
    });
  } catch (const NoRoom&) {  // no temporary file, or no space for it: memory instead
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    bytes_ = read_file(path);
    size_ = bytes_.size();
  } catch (...) {
    close(fd_);
    throw;
  }
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) close(fd_);
}

void RecordFile::read(uint64_t offset, size_t n, uint8_t* out) const {
  if (fd_ < 0 && offset + n <= bytes_.size()) {
    std::memcpy(out, bytes_.data() + offset, n);
    return;
  }
  size_t done = 0;
  while (fd_ >= 0 && done < n) {
    const ssize_t r = pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += static_cast<size_t>(r);
  }
  if (fd_ < 0 || done < n)
    throw DataError("'" + path_ + "' no longer holds bytes " + std::to_string(offset) + ".." +
                        std::to_string(offset + n) + " (it was " + std::to_string(size_) +
                        " bytes when loaded): it changed while training read it",
                    "restore the file (download it again) and restart training");
}

void require_folder(const std::string& folder, const std::string& what, const std::string& hint,
                    const std::string& from) {
  if (folder.empty()) throw DataError("no folder is given for the " + what + " data", hint);
  const std::string given = from.empty() ? "" : ", given by " + from + ",";
  std::error_code ec;
  if (!fs::exists(folder, ec))
    throw DataError("the " + what + " data folder '" + folder + "'" + given + " does not exist",
                    hint);
  if (!fs::is_directory(folder, ec))
    throw DataError("the " + what + " data path '" + folder + "'" + given + " is not a folder",
                    hint);
}

std::string find_first(const std::string& folder, const std::vector<std::string>& names) {
  std::error_code ec;
  for (const std::string& name : names) {
    std::string p = join(folder, name);
    if (fs::is_regular_file(p, ec)) return p;
    // A FIFO or a device under a data file's name is refused by name, not passed over.
    if (fs::exists(p, ec) && !fs::is_directory(p, ec)) open_data_file(p, kMaxRecordBytes);
  }
  return "";
}

std::string join(const std::string& folder, const std::string& name) {
  return (fs::path(folder) / name).string();
}

}  // namespace tandem::data_io
