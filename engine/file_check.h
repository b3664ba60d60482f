// Paths checked for what they are before they are read or written: only regular files of a sane
// size, so that a FIFO, a device or a folder named for a file is refused at once by name rather
// than hanging or filling memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tandem {

// The most each kind of file may weigh; more is refused before a byte is read.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;  // a YAML config
inline constexpr uint64_t kMaxImageBytes = uint64_t{512} << 20;  // one encoded image
// A data file read whole into memory (IDX labels, a gzipped file that cannot be unpacked to disk).
inline constexpr uint64_t kMaxWholeDataBytes = uint64_t{4} << 30;
// Files read by ranges (checkpoints, IDX images, CIFAR-10 batches): the size only has to be one a
// file system can hold; the readers check it against what the header announces.
inline constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 50;

// Why `path` cannot be read as a regular file of at most `max_bytes`, as words that follow its
// quoted name ("is a FIFO (named pipe), not a file", "does not exist"); "" when it can. Follows
// symbolic links; opens nothing, so a FIFO or a device is never touched.
std::string file_problem(const std::string& path, uint64_t max_bytes);

// Why `path` cannot be written as a file: it exists and is not a regular file (a folder, a FIFO,
// a device); "" when it is absent or a regular file.
std::string output_problem(const std::string& path);

// Called with file_problem's words when a file is refused; it throws the caller's error (if it
// returns, a generic Error is thrown).
using RefuseFile = std::function<void(const std::string& why)>;

// A regular file open for reading. It is looked at before it is opened, opened without blocking
// (a FIFO put in its place after the look would otherwise wait for a writer), and checked again
// on the open descriptor, so that the bytes read are those of the file that was checked.
class ReadFile {
 public:
  ReadFile(const std::string& path, uint64_t max_bytes, const RefuseFile& refuse);
  ~ReadFile();
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }  // owned: dup() it to keep it beyond this object
  // n bytes at `offset` into `out`; false when the file holds fewer (it shrank) or a read fails.
  bool read_at(uint64_t offset, void* out, size_t n) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file of at most `max_bytes`; `refuse` is called when it is not one, or
// with "cannot be read: ..." when reading it fails.
std::string read_whole_file(const std::string& path, uint64_t max_bytes, const RefuseFile& refuse);

}  // namespace tandem
