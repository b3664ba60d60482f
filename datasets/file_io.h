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

// Throws DataError when `folder` is empty or is not a directory; `what` names the data set
// ("MNIST train") and `hint` says how to fix it.
void require_folder(const std::string& folder, const std::string& what, const std::string& hint);

// The first of `names` that exists in `folder` as a regular file, or "" when none does.
std::string find_first(const std::string& folder, const std::vector<std::string>& names);

std::string join(const std::string& folder, const std::string& name);

// Big-endian 32-bit word at p (the IDX header's byte order).
inline uint32_t read_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

}  // namespace tandem::data_io
