// Checkpoint files: round trip, the format read by an independent parser, and refused files.
#include "engine/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "engine/backend_registry.h"
#include "engine/error.h"
#include "tests/tools/timeout_util.h"

namespace tandem {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + name; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct Tensors {
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  NamedTensors named;
  void add(const std::string& name, Shape shape, float base) {
    Tensor t(*backend, shape);
    std::vector<float> v(static_cast<size_t>(shape.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + 0.25f * static_cast<float>(i);
    backend->upload(t, v.data());
    named.emplace_back(name, t);
  }
  std::vector<float> values(size_t k) {
    std::vector<float> v(static_cast<size_t>(named[k].second.numel()));
    backend->download(v.data(), named[k].second);
    return v;
  }
};

Tensors model_tensors() {
  Tensors t;
  t.add("conv2d_1.weight", Shape{2, 1, 3, 3}, 1.0f);
  t.add("conv2d_1.bias", Shape{2}, -3.0f);
  t.add("optimizer.conv2d_1.weight.velocity", Shape{2, 1, 3, 3}, 0.5f);
  t.add("optimizer.conv2d_1.bias.velocity", Shape{2}, 7.0f);
  return t;
}

CheckpointMeta some_meta() {
  CheckpointMeta m;
  m.config_text = "name: \"tiny\"\nlayers:\n  - dense: {units: 3}\t# tab\\backslash\n";
  m.device = "cpu:2";
  m.epoch = 3;
  m.batch = 5;
  m.step = 123456789012ULL;
  m.updates = 123456789000ULL;
  m.seed = 42;
  m.class_names = {"cat", "dog \"big\"", "", "t\\ree"};
  m.batch_size = 96;
  m.best_metric = "val_loss";
  m.best_value = 0.12345678901234567;
  m.best_epoch = 2;
  m.precision = "fp16";
  m.loss_scale = 32768;
  m.good_steps = 1234;
  // Three epochs: a validation pass in the second only, a loss that blew up in the third, and
  // figures that only a shortest round-trip format writes back exactly.
  for (int64_t e = 1; e <= 3; ++e) {
    EpochStats s;
    s.device = e == 1 ? "gpu:1" : "cpu:2";
    s.epoch = e;
    s.train_loss = e == 3 ? std::nan("") : 2.302585092994046 / static_cast<double>(e);
    s.train_accuracy = 0.1 * static_cast<double>(e);
    s.test_loss = e == 3 ? std::numeric_limits<double>::infinity() : 1.0 / 3.0;
    s.test_accuracy = 0.98765432109876543;
    s.seconds = 12.5e-3;
    s.images_per_second = 123456.789;
    s.learning_rate = 1e-3 / static_cast<double>(e);
    s.peak_memory_bytes = (size_t{5} << 32) + 7;
    s.has_val = e == 2;
    s.val_loss = s.has_val ? 0.25 : 0;
    s.val_accuracy = s.has_val ? 0.875 : 0;
    s.skipped_steps = e == 3 ? 4 : 0;
    m.history.push_back(s);
  }
  return m;
}

// Equal figures, NaN equal to NaN.
void expect_same_epochs(const std::vector<EpochStats>& got, const std::vector<EpochStats>& want) {
  ASSERT_EQ(got.size(), want.size());
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  for (size_t i = 0; i < want.size(); ++i) {
    const EpochStats &g = got[i], &w = want[i];
    EXPECT_EQ(g.device, w.device) << i;
    EXPECT_EQ(g.epoch, w.epoch) << i;
    for (auto field :
         {&EpochStats::train_loss, &EpochStats::train_accuracy, &EpochStats::test_loss,
          &EpochStats::test_accuracy, &EpochStats::seconds, &EpochStats::images_per_second,
          &EpochStats::learning_rate, &EpochStats::val_loss, &EpochStats::val_accuracy})
      EXPECT_TRUE(same(g.*field, w.*field))
          << "epoch " << w.epoch << ": " << g.*field << " for " << w.*field;
    EXPECT_EQ(g.peak_memory_bytes, w.peak_memory_bytes) << i;
    EXPECT_EQ(g.has_val, w.has_val) << i;
    EXPECT_EQ(g.skipped_steps, w.skipped_steps) << i;
  }
}

void expect_refused(const std::string& path, NamedTensors& into, const std::string& needle) {
  try {
    read_checkpoint(path, into);
    FAIL() << "expected a CheckpointError containing '" << needle << "'";
  } catch (const CheckpointError& e) {
    EXPECT_NE(e.cause().find(needle), std::string::npos) << e.cause();
    EXPECT_NE(e.cause().find(path), std::string::npos) << e.cause();
    EXPECT_FALSE(e.hint().empty());
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
  }
}

TEST(Checkpoint, RoundTripRestoresEveryTensorAndMetadataField) {
  Tensors src = model_tensors();
  const std::string path = temp_path("round_trip.safetensors");
  write_checkpoint(path, src.named, some_meta());

  Tensors dst = model_tensors();
  for (auto& [name, t] : dst.named) dst.backend->fill(t, 0.f);
  CheckpointMeta m = read_checkpoint(path, dst.named);
  for (size_t k = 0; k < src.named.size(); ++k) EXPECT_EQ(dst.values(k), src.values(k)) << k;
  const CheckpointMeta want = some_meta();
  EXPECT_EQ(m.config_text, want.config_text);
  EXPECT_EQ(m.device, want.device);
  EXPECT_EQ(m.epoch, want.epoch);
  EXPECT_EQ(m.batch, want.batch);
  EXPECT_EQ(m.step, want.step);
  EXPECT_EQ(m.updates, want.updates);
  EXPECT_EQ(m.seed, want.seed);
  EXPECT_EQ(m.class_names, want.class_names);
  EXPECT_EQ(m.batch_size, want.batch_size);
  EXPECT_EQ(m.best_metric, want.best_metric);
  EXPECT_EQ(m.best_value, want.best_value);  // bit for bit
  EXPECT_EQ(m.best_epoch, want.best_epoch);
  EXPECT_EQ(m.precision, want.precision);
  EXPECT_EQ(m.loss_scale, want.loss_scale);
  EXPECT_EQ(m.good_steps, want.good_steps);
  expect_same_epochs(m.history, want.history);
  EXPECT_EQ(m.version, TANDEM_VERSION);
  EXPECT_EQ(read_checkpoint_meta(path).step, want.step);
  EXPECT_FALSE(std::filesystem::exists(temp_path(".round_trip.safetensors.tmp")));
}

// Rewrites a checkpoint's header through `edit`, with its length and alignment set again.
void rewrite_header(const std::string& path, const std::function<void(std::string&)>& edit) {
  const std::string bytes = read_all(path);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
  std::string header = bytes.substr(8, len);
  while (!header.empty() && header.back() == ' ') header.pop_back();
  edit(header);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string old(8, '\0');
  for (int i = 0; i < 8; ++i) old[i] = static_cast<char>(header.size() >> (8 * i));
  write_all(path, old + header + bytes.substr(8 + len));
}

// Rewrites a checkpoint without one metadata field, like an older version wrote.
void erase_meta(const std::string& path, const std::string& key) {
  rewrite_header(path, [&](std::string& header) {
    const size_t from = header.find(",\"" + key + "\":");
    ASSERT_NE(from, std::string::npos) << key;
    size_t end = header.find(":\"", from) + 2;  // the value's first character
    while (header[end] != '"') end += header[end] == '\\' ? 2 : 1;
    header.erase(from, end + 1 - from);
  });
}

// A checkpoint of model_tensors() and some_meta() as an older version wrote it, without the
// metadata fields `keys`, read back into fresh tensors.
struct OlderCheckpoint {
  Tensors src = model_tensors(), dst = model_tensors();
  CheckpointMeta meta;
};
OlderCheckpoint read_without(const std::string& name, const std::vector<std::string>& keys) {
  OlderCheckpoint old;
  const std::string path = temp_path(name);
  write_checkpoint(path, old.src.named, some_meta());
  for (const std::string& key : keys) erase_meta(path, key);
  old.meta = read_checkpoint(path, old.dst.named);
  return old;
}

// A file of an older version, without class names and batch size, still loads.
TEST(Checkpoint, WithoutClassNamesAndBatchSizeLoads) {
  OlderCheckpoint old = read_without("old_meta.safetensors", {"class_names", "batch_size"});
  EXPECT_TRUE(old.meta.class_names.empty());
  EXPECT_EQ(old.meta.batch_size, 0);
  EXPECT_EQ(old.meta.seed, 42u);
  EXPECT_EQ(old.meta.best_epoch, 2) << "the fields after them are read";
  EXPECT_EQ(old.dst.values(1), old.src.values(1));
}

// Before steps could be skipped (on_nan: skip_step) every step was an optimizer update.
TEST(Checkpoint, WithoutAnUpdateCountEveryStepWasAnUpdate) {
  OlderCheckpoint old = read_without("old_updates.safetensors", {"updates"});
  EXPECT_EQ(old.meta.updates, some_meta().step);
  EXPECT_EQ(old.dst.values(0), old.src.values(0));
}

TEST(Checkpoint, WithoutABestEpochLoadsWithNone) {
  OlderCheckpoint old =
      read_without("old_best.safetensors", {"best_metric", "best_value", "best_epoch"});
  EXPECT_TRUE(old.meta.best_metric.empty());
  EXPECT_EQ(old.meta.best_epoch, 0);
  EXPECT_EQ(old.meta.batch_size, 96);
}

TEST(Checkpoint, WithoutAHistoryLoadsWithNone) {
  OlderCheckpoint old = read_without("old_history.safetensors", {"history"});
  EXPECT_TRUE(old.meta.history.empty());
  EXPECT_EQ(old.meta.best_epoch, 2);
}

TEST(Checkpoint, AHistoryWithAMissingOrBadFigureIsRefused) {
  Tensors src = model_tensors();
  const std::string path = temp_path("bad_history.safetensors");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {",123456.789,", ",fast,", "line 2: images_per_second is 'fast'"},
      {",4,,\"}}", ",\"}}", "line 4 has 11 values for 13 columns"}};
  for (const auto& [from, to, needle] : cases) {
    write_checkpoint(path, src.named, some_meta());
    rewrite_header(path, [&](std::string& header) {
      const size_t at = header.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      header.replace(at, from.size(), to);
    });
    expect_refused(path, src.named, needle);
  }
}

// A deliberately separate reader of the format: length, JSON offsets, dtype, sizes.
TEST(Checkpoint, FileFollowsTheSafetensorsLayout) {
  Tensors src = model_tensors();
  const std::string path = temp_path("layout.safetensors");
  write_checkpoint(path, src.named, some_meta());
  const std::string bytes = read_all(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
  ASSERT_LE(8 + len, bytes.size());
  const std::string header = bytes.substr(8, len);
  EXPECT_EQ(header.front(), '{');
  const size_t data_size = bytes.size() - 8 - len;

  uint64_t expect_begin = 0;
  for (size_t k = 0; k < src.named.size(); ++k) {
    const auto& [name, t] = src.named[k];
    const size_t at = header.find("\"" + name + "\":");
    ASSERT_NE(at, std::string::npos) << name;
    const size_t obj_end = header.find('}', at);
    const std::string obj = header.substr(at, obj_end - at);
    EXPECT_NE(obj.find("\"dtype\":\"F32\""), std::string::npos) << obj;
    const size_t off = obj.find("\"data_offsets\":[");
    ASSERT_NE(off, std::string::npos) << obj;
    uint64_t b = 0, e = 0;
    ASSERT_EQ(std::sscanf(obj.c_str() + off, "\"data_offsets\":[%lu,%lu]", &b, &e), 2) << obj;
    EXPECT_EQ(b, expect_begin) << name << ": offsets are contiguous";
    EXPECT_EQ(e - b, 4u * static_cast<uint64_t>(t.numel())) << name;
    expect_begin = e;
    // The stored bytes are the tensor's little-endian floats.
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), bytes.data() + 8 + len + b, e - b);
    EXPECT_EQ(v, src.values(k)) << name;
  }
  EXPECT_EQ(expect_begin, data_size);
  EXPECT_NE(header.find("\"__metadata__\":{"), std::string::npos);
  EXPECT_NE(header.find("\"seed\":\"42\""), std::string::npos);
  EXPECT_NE(header.find("\"epoch\":\"3\""), std::string::npos);
}

TEST(Checkpoint, TruncatedFileIsRefusedAndLeavesTensorsAlone) {
  Tensors src = model_tensors();
  const std::string path = temp_path("truncated.safetensors");
  write_checkpoint(path, src.named, some_meta());
  std::string bytes = read_all(path);
  write_all(path, bytes.substr(0, bytes.size() - 4));
  Tensors dst = model_tensors();
  for (auto& [name, t] : dst.named) dst.backend->fill(t, 9.f);
  expect_refused(path, dst.named, "data section has");
  for (size_t k = 0; k < dst.named.size(); ++k)
    for (float v : dst.values(k)) ASSERT_EQ(v, 9.f) << "no tensor is half loaded";

  write_all(path, bytes.substr(0, 5));
  expect_refused(path, dst.named, "fewer than the 8 of the header length");
  write_all(path, bytes.substr(0, 40));
  expect_refused(path, dst.named, "header claims");
}

// A NaN where the file's bytes were damaged (the last float of the data section is the last
// tensor's): refused naming the tensor, and nothing is loaded.
TEST(Checkpoint, NonFiniteValuesAreRefusedNamingTheTensorAndLeaveTensorsAlone) {
  Tensors src = model_tensors();
  const std::string path = temp_path("nan.safetensors");
  write_checkpoint(path, src.named, some_meta());
  std::string bytes = read_all(path);
  const float nan = std::nanf("");
  std::memcpy(&bytes[bytes.size() - sizeof nan], &nan, sizeof nan);
  write_all(path, bytes);
  Tensors dst = model_tensors();
  for (auto& [name, t] : dst.named) dst.backend->fill(t, 9.f);
  expect_refused(
      path, dst.named,
      "holds 1 non-finite value (NaN or infinity) in 'optimizer.conv2d_1.bias.velocity'");
  for (size_t k = 0; k < dst.named.size(); ++k)
    for (float v : dst.values(k)) ASSERT_EQ(v, 9.f) << "no tensor is half loaded";
}

TEST(Checkpoint, CorruptHeaderIsRefused) {
  Tensors src = model_tensors();
  const std::string path = temp_path("corrupt.safetensors");
  write_checkpoint(path, src.named, some_meta());
  std::string bytes = read_all(path);
  bytes[8] = '[';
  bytes[20] = '}';
  write_all(path, bytes);
  expect_refused(path, src.named, "not valid JSON");
}

TEST(Checkpoint, WrongShapeIsRefusedNamingTheTensor) {
  Tensors src = model_tensors();
  const std::string path = temp_path("shape.safetensors");
  write_checkpoint(path, src.named, some_meta());
  Tensors other;
  other.add("conv2d_1.weight", Shape{4, 1, 3, 3}, 0.f);
  other.add("conv2d_1.bias", Shape{2}, 0.f);
  other.add("optimizer.conv2d_1.weight.velocity", Shape{2, 1, 3, 3}, 0.f);
  other.add("optimizer.conv2d_1.bias.velocity", Shape{2}, 0.f);
  expect_refused(path, other.named,
                 "conv2d_1.weight is [2, 1, 3, 3] in the file, [4, 1, 3, 3] in the model");
}

TEST(Checkpoint, MissingAndExtraTensorsAreRefused) {
  Tensors src = model_tensors();
  const std::string path = temp_path("missing.safetensors");
  write_checkpoint(path, src.named, some_meta());
  Tensors more = model_tensors();
  more.add("dense_2.weight", Shape{3, 3}, 0.f);
  expect_refused(path, more.named, "lacks tensors the model has: dense_2.weight");
  Tensors fewer = model_tensors();
  fewer.named.pop_back();
  expect_refused(path, fewer.named,
                 "has tensors the model lacks: optimizer.conv2d_1.bias.velocity");
}

TEST(Checkpoint, OtherMajorVersionIsRefused) {
  Tensors src = model_tensors();
  const std::string path = temp_path("version.safetensors");
  CheckpointMeta m = some_meta();
  m.version = "99.0.0";
  write_checkpoint(path, src.named, m);
  expect_refused(path, src.named, "another major version");
}

TEST(Checkpoint, NewestInAFolderIsFound) {
  const std::string dir = temp_path("ckpt_dir");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_THROW(find_checkpoint(dir), CheckpointError);
  Tensors src = model_tensors();
  // The newest by time, not by name: epoch-2 is left from an earlier, longer run.
  const auto now = std::filesystem::file_time_type::clock::now();
  auto write_at = [&](const std::string& name, std::chrono::minutes age) {
    write_checkpoint(dir + "/" + name, src.named, some_meta());
    std::filesystem::last_write_time(dir + "/" + name, now - age);
  };
  write_at("epoch-2.safetensors", std::chrono::minutes(60));
  write_at("epoch-1.safetensors", std::chrono::minutes(30));
  EXPECT_EQ(find_checkpoint(dir), dir + "/epoch-1.safetensors");
  // Newer still, and never taken: the best epoch's file, and a hidden one (a write in progress).
  write_at("best.safetensors", std::chrono::minutes(1));
  write_at(".epoch-3.safetensors", std::chrono::minutes(0));
  EXPECT_EQ(find_checkpoint(dir), dir + "/epoch-1.safetensors");
  EXPECT_EQ(find_checkpoint(dir + "/epoch-2.safetensors"), dir + "/epoch-2.safetensors");
}

// --- Strict reading: the rules of the safetensors library's own loader -----------------------

// The independent strict reader (tests/tools/strict_safetensors.py) on a file: 0 when it passes,
// 1 when it refuses it; -1 when there is no Python to run it.
int strict_reader_status(const std::string& path) {
  if (::access("/usr/bin/python3", X_OK) != 0) return -1;
  const std::string cmd = std::string("/usr/bin/python3 ") + TANDEM_SOURCE_DIR +
                          "/tests/tools/strict_safetensors.py '" + path + "' 2>/dev/null";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

// A checkpoint of model_tensors() and some_meta() with `from` replaced by `to` in its header.
std::string edited_checkpoint(const std::string& name, const std::string& from,
                              const std::string& to) {
  Tensors src = model_tensors();
  const std::string path = temp_path(name);
  write_checkpoint(path, src.named, some_meta());
  rewrite_header(path, [&](std::string& header) {
    const size_t at = header.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    header.replace(at, from.size(), to);
  });
  return path;
}

struct HostileHeader {
  const char* name;
  std::string from, to;  // an edit of the header
  std::string needle;    // in tandem's message
};

void PrintTo(const HostileHeader& h, std::ostream* os) { *os << h.name; }

class StrictHeader : public ::testing::TestWithParam<HostileHeader> {};

// Each file is refused by tandem, naming what is wrong, and by the independent strict reader:
// tandem reads no file the format's own rules refuse.
TEST_P(StrictHeader, IsRefusedByTandemAndByAStrictReader) {
  const HostileHeader& c = GetParam();
  const std::string path = edited_checkpoint(std::string(c.name) + ".safetensors", c.from, c.to);
  Tensors into = model_tensors();
  expect_refused(path, into.named, c.needle);
  const int strict = strict_reader_status(path);
  if (strict == -1) GTEST_SKIP() << "no /usr/bin/python3 to run the strict reader";
  EXPECT_EQ(strict, 1) << "the strict reader takes " << path;
}

// model_tensors() lie at [0,72) [72,80) [80,152) [152,160) of the data section.
INSTANTIATE_TEST_SUITE_P(
    Checkpoint, StrictHeader,
    ::testing::Values(
        HostileHeader{"OverlappingOffsets", "\"data_offsets\":[72,80]", "\"data_offsets\":[64,72]",
                      "bytes up to 72 already belong to another tensor"},
        HostileHeader{"OffsetsWithAHole", "\"shape\":[2],\"data_offsets\":[72,80]",
                      "\"shape\":[1],\"data_offsets\":[76,80]",
                      "starts at byte 76 of the data section, where the one before ends at 72"},
        HostileHeader{"ShapeOfAnotherSize", "\"shape\":[2],\"data_offsets\":[72,80]",
                      "\"shape\":[3],\"data_offsets\":[72,80]", "needs 12 bytes but has 8"},
        HostileHeader{"ShapeThatOverflows", "\"shape\":[2],\"data_offsets\":[72,80]",
                      "\"shape\":[4294967296,4294967296,2],\"data_offsets\":[72,80]", "overflows"},
        HostileHeader{"HeaderNotUtf8", "\"cpu:2\"", "\"cpu\xff:2\"", "not UTF-8"},
        HostileHeader{"OverlongUtf8", "\"cpu:2\"",
                      "\"cpu\xc0\xba"
                      "2\"",
                      "not UTF-8"},
        HostileHeader{"ControlCharacterInAString", "\"cpu:2\"", "\"cpu\x01:2\"",
                      "control character inside a string"},
        HostileHeader{"DuplicateKey", "\"seed\":\"42\"", "\"seed\":\"42\",\"seed\":\"7\"",
                      "\"seed\" appears twice"},
        HostileHeader{"DuplicateTensor", "{\"conv2d_1.weight\":",
                      "{\"conv2d_1.bias\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,"
                      "0]},\"conv2d_1.weight\":",
                      "\"conv2d_1.bias\" appears twice"},
        HostileHeader{"LoneSurrogate", "\"cpu:2\"", "\"cpu\\ud800\"", "lone surrogate"},
        HostileHeader{"NumberWithALeadingZero", "[72,80]", "[072,80]", "leading zero"},
        HostileHeader{"FractionalOffset", "[72,80]", "[72.0,80]", "not an integer"},
        HostileHeader{"UnknownTensorField", "{\"dtype\":\"F32\",\"shape\":[2],",
                      "{\"dtype\":\"F32\",\"extra\":[],\"shape\":[2],", "unknown field 'extra'"},
        HostileHeader{"HeaderStartsWithWhitespace", "{\"conv2d_1.weight\":",
                      " {\"conv2d_1.weight\":", "does not start with '{'"}),
    [](const ::testing::TestParamInfo<HostileHeader>& info) {
      return std::string(info.param.name);
    });

// Bytes after the last tensor belong to nobody: the tensors must cover the data section exactly.
TEST(Checkpoint, BytesAfterTheLastTensorAreRefused) {
  Tensors src = model_tensors();
  const std::string path = temp_path("tail.safetensors");
  write_checkpoint(path, src.named, some_meta());
  write_all(path, read_all(path) + std::string(4, '\0'));
  expect_refused(path, src.named, "its tensors cover 160 bytes of a data section of 164");
  const int strict = strict_reader_status(path);
  if (strict == -1) GTEST_SKIP() << "no /usr/bin/python3 to run the strict reader";
  EXPECT_EQ(strict, 1);
}

// The header may list tensors in any order; the offsets, sorted, are what must tile the data.
TEST(Checkpoint, TensorsListedOutOfOffsetOrderAreReadAtTheirOffsets) {
  Tensors src = model_tensors();
  const std::string path = temp_path("swapped.safetensors");
  write_checkpoint(path, src.named, some_meta());
  // conv2d_1.weight and its velocity have one shape: swap where each lies.
  rewrite_header(path, [&](std::string& header) {
    const size_t a = header.find("[0,72]"), b = header.find("[80,152]");
    ASSERT_TRUE(a != std::string::npos && b != std::string::npos);
    header.replace(b, 8, "[0,72]");
    header.replace(a, 6, "[80,152]");
  });
  Tensors dst = model_tensors();
  read_checkpoint(path, dst.named);
  EXPECT_EQ(dst.values(0), src.values(2));
  EXPECT_EQ(dst.values(2), src.values(0));
}

TEST(Checkpoint, UnicodeEscapesReadAsUtf8) {
  const std::string path =
      edited_checkpoint("escapes.safetensors", "\"cpu:2\"", "\"caf\\u00e9 \\ud83d\\ude00\"");
  EXPECT_EQ(read_checkpoint_meta(path).device, "caf\xc3\xa9 \xf0\x9f\x98\x80");
}

// Class names come from folder names, which need not be UTF-8: the header stays UTF-8 JSON
// (checked by the strict reader) and the bytes that are not UTF-8 read back as \xNN.
TEST(Checkpoint, NamesThatAreNotUtf8AreWrittenAsValidUtf8) {
  Tensors src = model_tensors();
  const std::string path = temp_path("latin1.safetensors");
  CheckpointMeta meta = some_meta();
  meta.class_names = {"caf\xe9", "\xc3\xa9t\xc3\xa9", "cut\xc3"};
  meta.config_file = "/data/r\xe9sum\xe9/model.yaml";
  write_checkpoint(path, src.named, meta);
  const CheckpointMeta back = read_checkpoint_meta(path);
  EXPECT_EQ(back.class_names,
            (std::vector<std::string>{"caf\\xe9", "\xc3\xa9t\xc3\xa9", "cut\\xc3"}));
  EXPECT_EQ(back.config_file, "/data/r\\xe9sum\\xe9/model.yaml");
  const int strict = strict_reader_status(path);
  if (strict == -1) GTEST_SKIP() << "no /usr/bin/python3 to run the strict reader";
  EXPECT_EQ(strict, 0);
}

TEST(Checkpoint, WhatTandemWritesPassesTheStrictReader) {
  Tensors src = model_tensors();
  const std::string path = temp_path("strict_ok.safetensors");
  write_checkpoint(path, src.named, some_meta());
  const int strict = strict_reader_status(path);
  if (strict == -1) GTEST_SKIP() << "no /usr/bin/python3 to run the strict reader";
  EXPECT_EQ(strict, 0);
}

// This host's name as temporary file names hold it (letters, digits, '-', '_').
std::string host_tag() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string tag(name);
  for (char& c : tag)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  return tag;
}

// The temporaries of dead writers on this host go; a live writer's, another host's (which this
// one cannot tell alive or dead) and files that only look alike stay.
TEST(Checkpoint, OnlyTheTemporariesOfDeadWritersOnThisHostAreRemoved) {
  const std::string dir = temp_path("stale_tmp");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string host = host_tag();
  auto name = [&](const std::string& h, pid_t pid) {
    return ".epoch-1.safetensors.tmp." + h + "." + std::to_string(pid) + ".a1B2c3";
  };
  const std::vector<std::string> stale = {name(host, dead)};
  const std::vector<std::string> kept = {name(host, ::getpid()), name("other-host", dead),
                                         "epoch-1.safetensors", ".epoch-1.safetensors.tmp"};
  for (const auto& n : stale) write_all(dir + "/" + n, "x");
  for (const auto& n : kept) write_all(dir + "/" + n, "x");
  EXPECT_EQ(remove_stale_temporaries(dir), 1u);
  for (const auto& n : stale) EXPECT_FALSE(std::filesystem::exists(dir + "/" + n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(std::filesystem::exists(dir + "/" + n)) << n;
  // And a checkpoint written there removes them too.
  write_all(dir + "/" + stale[0], "x");
  Tensors src = model_tensors();
  write_checkpoint(dir + "/epoch-2.safetensors", src.named, some_meta());
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + stale[0]));
}

// --- Metadata: every field in its range before anything uses it ------------------------------

struct BadField {
  const char* name;
  std::string from, to;
  std::string needle;  // names the field
};

void PrintTo(const BadField& f, std::ostream* os) { *os << f.name; }

class MetadataRange : public ::testing::TestWithParam<BadField> {};

TEST_P(MetadataRange, IsRefusedNamingTheField) {
  const BadField& c = GetParam();
  const std::string path = edited_checkpoint(std::string(c.name) + ".safetensors", c.from, c.to);
  Tensors into = model_tensors();
  expect_refused(path, into.named, c.needle);
  try {
    read_checkpoint_meta(path);
    FAIL() << "read_checkpoint_meta took it";
  } catch (const CheckpointError& e) {
    EXPECT_NE(e.cause().find(c.needle), std::string::npos) << e.cause();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoint, MetadataRange,
    ::testing::Values(
        BadField{"EpochBeyondInt64", "\"epoch\":\"3\"", "\"epoch\":\"9223372036854775808\"",
                 "metadata 'epoch' is 9223372036854775808"},
        BadField{"NegativeBatch", "\"batch\":\"5\"", "\"batch\":\"-5\"", "metadata 'batch'"},
        BadField{"MoreUpdatesThanSteps", "\"updates\":\"123456789000\"",
                 "\"updates\":\"123456789013\"", "metadata 'updates' is 123456789013"},
        BadField{"NoProcesses", "\"processes\":\"1\"", "\"processes\":\"0\"",
                 "metadata 'processes' is 0"},
        BadField{"BestEpochAfterTheEpochsDone", "\"best_epoch\":\"2\"", "\"best_epoch\":\"4\"",
                 "metadata 'best_epoch' is 4"},
        BadField{"NonFiniteBestValue", "\"best_value\":\"",
                 "\"best_value\":\"inf\",\"best_value_was\":\"", "metadata 'best_value' is inf"},
        BadField{"HistoryBeyondTheEpochsDone", "\\ncpu:2,21474836487,3,", "\\ncpu:2,21474836487,4,",
                 "metadata 'history' holds epoch 4 beyond the 3 epochs"},
        BadField{"HistoryOutOfOrder", "\\ncpu:2,21474836487,2,", "\\ncpu:2,21474836487,1,",
                 "metadata 'history' holds epoch 1 after epoch 1"},
        BadField{"SeedNotANumber", "\"seed\":\"42\"", "\"seed\":\"42x\"", "metadata 'seed'"}),
    [](const ::testing::TestParamInfo<BadField>& info) { return std::string(info.param.name); });

TEST(Checkpoint, NormalizeValuesAreOnePositiveDeviationPerMean) {
  Tensors src = model_tensors();
  const std::string path = temp_path("normalize.safetensors");
  CheckpointMeta meta = some_meta();
  meta.normalize_mean = {0.5f, 0.5f};
  meta.normalize_std = {0.25f};
  write_checkpoint(path, src.named, meta);
  expect_refused(path, src.named, "metadata 'normalize_mean' has 2 values but 'normalize_std' 1");
  meta.normalize_std = {0.25f, 0.0f};
  write_checkpoint(path, src.named, meta);
  expect_refused(path, src.named, "metadata 'normalize_std' holds 0");
}

// --- Paths that are not regular files ---------------------------------------------------------

// A FIFO given for a checkpoint is refused at once: nothing waits for a writer to open it.
TEST(Checkpoint, AFifoIsRefusedWithoutWaiting) {
  const std::string fifo = temp_path("checkpoint.fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // In a child of its own (file operations only), killed if it waits.
  const test::ChildResult r = test::run_in_child(10, [&] {
    try {
      read_checkpoint_meta(fifo);
    } catch (const CheckpointError& e) {
      return e.cause().find("is a FIFO (named pipe), not a file") != std::string::npos ? 0 : 2;
    }
    return 1;
  });
  EXPECT_FALSE(r.timed_out) << "reading a FIFO as a checkpoint hangs";
  EXPECT_EQ(r.exit_code, 0);
  std::filesystem::remove(fifo);
}

TEST(Checkpoint, ADeviceIsRefusedByName) {
  Tensors into = model_tensors();
  expect_refused("/dev/zero", into.named, "is a character device, not a file");
}

// In a folder only regular files are checkpoints: a FIFO named like the newest is passed over.
TEST(Checkpoint, TheNewestInAFolderIsARegularFile) {
  const std::string dir = temp_path("ckpt_fifo_dir");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Tensors src = model_tensors();
  write_checkpoint(dir + "/epoch-1.safetensors", src.named, some_meta());
  std::filesystem::last_write_time(
      dir + "/epoch-1.safetensors",
      std::filesystem::file_time_type::clock::now() - std::chrono::minutes(5));
  ASSERT_EQ(::mkfifo((dir + "/epoch-2.safetensors").c_str(), 0600), 0);
  EXPECT_EQ(find_checkpoint(dir), dir + "/epoch-1.safetensors");
}

}  // namespace
}  // namespace tandem
