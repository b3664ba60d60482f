// Helpers for the data set tests: a scratch folder per test, IDX / CIFAR-10 file writers, and the
// message of the DataError a call throws.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/error.h"

namespace tandem::testing_data {

namespace fs = std::filesystem;

// A fresh folder under the system's temporary folder, one per test (and suffix), removed with its
// content at the end.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& suffix = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("tandem_data_" + std::to_string(::getpid()) + "_" +
                                         info->test_suite_name() + "_" + info->name() + suffix);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

// Image i has every pixel equal to (i * 7 + p) % 256 at pixel p, so records can be told apart.
inline std::vector<uint8_t> idx_images(uint32_t count, uint32_t rows, uint32_t cols,
                                       uint32_t magic = 2051) {
  std::vector<uint8_t> out;
  put_be32(out, magic);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t p = 0; p < rows * cols; ++p)
      out.push_back(static_cast<uint8_t>((i * 7 + p) % 256));
  return out;
}

// Label i is i % 10 unless `labels` is given.
inline std::vector<uint8_t> idx_labels(uint32_t count, std::vector<uint8_t> labels = {},
                                       uint32_t magic = 2049) {
  std::vector<uint8_t> out;
  put_be32(out, magic);
  put_be32(out, count);
  for (uint32_t i = 0; i < count; ++i)
    out.push_back(labels.empty() ? static_cast<uint8_t>(i % 10) : labels[i]);
  return out;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// n CIFAR-10 records: label i % 10, then 3072 bytes equal to (i + p) % 256.
inline std::vector<uint8_t> cifar_records(int n) {
  std::vector<uint8_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(static_cast<uint8_t>(i % 10));
    for (int p = 0; p < 3072; ++p) out.push_back(static_cast<uint8_t>((i + p) % 256));
  }
  return out;
}

// The message (cause, then hint) of the DataError `f` throws; fails the test when it throws none.
inline std::string data_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.cause() + " | hint: " + e.hint();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace tandem::testing_data
