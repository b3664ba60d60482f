// Shared by the fuzz targets: the readers under test take paths, so each input is written to a
// file in a folder of this process's own first.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace tandem::fuzz {

// A folder of this process's own under the system's temporary folder, made once.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const auto d =
        std::filesystem::temp_directory_path() / ("tandem-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Writes `size` bytes to `name` in the scratch folder and returns its path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace tandem::fuzz
