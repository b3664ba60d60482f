// File helpers shared by the data set readers: whole-file reads (gzipped or plain) and lookups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data_io {

// The whole content of `path`, decompressed when it is gzipped (zlib's gzread passes plain files
// through). Throws DataError naming the file when it cannot be opened or its gzip stream is
// corrupt.
std::vector<uint8_t> read_file(const std::string& path);

// A file read by byte ranges from several threads at once (pread), for data sets decoded on the
// fly. A gzipped file is decompressed once into an unlinked temporary file (held in memory when
// no temporary file can be made or written). Throws DataError naming the file.
class RecordFile {
 public:
  explicit RecordFile(const std::string& path);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // n bytes at `offset` into `out`; throws DataError when the file no longer holds them.
  void read(uint64_t offset, size_t n, uint8_t* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<uint8_t> bytes_;  // the decompressed content when fd_ < 0
};

// Throws DataError when `folder` is empty or is not a directory; `what` names the data set
// ("MNIST train"), `from` where the folder was given ("data.path in FILE", "--data", or "") and
// `hint` says how to fix it.
void require_folder(const std::string& folder, const std::string& what, const std::string& hint,
                    const std::string& from = "");

// The first of `names` that exists in `folder` as a regular file, or "" when none does. Throws
// DataError naming one that exists as something else than a file or a folder (a FIFO, a device).
std::string find_first(const std::string& folder, const std::vector<std::string>& names);

std::string join(const std::string& folder, const std::string& name);

// Big-endian 32-bit word at p (the IDX header's byte order).
inline uint32_t read_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

}  // namespace tandem::data_io
