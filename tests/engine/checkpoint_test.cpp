// Checkpoint files: round trip, the format read by an independent parser, and refused files.
#include "engine/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "engine/backend_registry.h"
#include "engine/error.h"

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

}  // namespace
}  // namespace tandem
