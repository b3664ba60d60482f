// File helpers shared by the data set readers: whole-file reads (gzipped or plain) and lookups.
#include "datasets/file_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/error.h"

namespace tandem::data_io {

namespace fs = std::filesystem;

namespace {

// gzerror's text, without the "path: " prefix zlib puts before some messages.
std::string gz_message(gzFile f, const std::string& path, int* code) {
  std::string msg = gzerror(f, code);
  if (msg.rfind(path + ": ", 0) == 0) msg.erase(0, path.size() + 2);
  return msg;
}

}  // namespace

std::vector<uint8_t> read_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    int err = errno;
    throw DataError("cannot open '" + path + "': " + (err ? std::strerror(err) : "out of memory"),
                    "check that the file exists and is readable");
  }
  gzbuffer(f, 1 << 18);
  std::vector<uint8_t> out;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    size_t at = out.size();
    out.resize(at + kChunk);
    int n = gzread(f, out.data() + at, static_cast<unsigned>(kChunk));
    if (n < 0) {
      int code = 0;
      std::string msg = gz_message(f, path, &code);
      gzclose(f);
      throw DataError("'" + path + "' is corrupt: " + msg,
                      "download the file again (a gzip stream that does not decompress)");
    }
    out.resize(at + static_cast<size_t>(n));
    if (static_cast<size_t>(n) < kChunk) break;
  }
  int code = 0;
  std::string msg = gz_message(f, path, &code);
  gzclose(f);
  // A gzip stream cut short reads as far as it goes, then reports Z_BUF_ERROR.
  if (code != Z_OK && code != Z_STREAM_END)
    throw DataError("'" + path + "' is corrupt: " + msg + " after " + std::to_string(out.size()) +
                        " decompressed bytes",
                    "download the file again (the gzip stream is cut short or damaged)");
  return out;
}

void require_folder(const std::string& folder, const std::string& what, const std::string& hint) {
  if (folder.empty()) throw DataError("no folder is given for the " + what + " data", hint);
  std::error_code ec;
  if (!fs::exists(folder, ec))
    throw DataError("the " + what + " data folder '" + folder + "' does not exist", hint);
  if (!fs::is_directory(folder, ec))
    throw DataError("the " + what + " data path '" + folder + "' is not a folder", hint);
}

std::string find_first(const std::string& folder, const std::vector<std::string>& names) {
  std::error_code ec;
  for (const std::string& name : names) {
    std::string p = join(folder, name);
    if (fs::is_regular_file(p, ec)) return p;
  }
  return "";
}

std::string join(const std::string& folder, const std::string& name) {
  return (fs::path(folder) / name).string();
}

}  // namespace tandem::data_io
