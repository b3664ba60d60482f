// .safetensors checkpoints: an 8-byte little-endian header length, a JSON header, then the raw
// fp32 data in the host's byte order (little-endian on every target tandem builds for). The JSON
// writer and reader are our own: the header is a small, fixed subset of JSON (objects, arrays,
// strings, integers), and no JSON library is a dependency of tandem yet.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>

#include "engine/atomic_file.h"
#include "engine/backend.h"
#include "engine/checkpoint_json.h"
#include "engine/epoch_figures.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/graph.h"
#include "engine/json_text.h"
#include "engine/optimizer.h"
#include "engine/text.h"
#include "engine/utf8.h"

namespace tandem {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

using checkpoint_json::Json;

[[noreturn]] void corrupt(const std::string& path, const std::string& why) {
  throw CheckpointError(
      fmt::format("checkpoint '{}' is unusable: {}", path, why),
      "the file is truncated or corrupt; use another checkpoint (e.g. an earlier epoch-E file)");
}

int64_t integer(const Json& j, const std::string& path, const std::string& what) {
  int64_t v = 0;
  if (j.kind != Json::kNumber ||
      std::from_chars(j.text.data(), j.text.data() + j.text.size(), v).ptr !=
          j.text.data() + j.text.size())
    corrupt(path, what + " is not an integer");
  return v;
}

struct Entry {
  std::string name;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> meta;
  uint64_t data_start = 0;  // byte offset of the data section in the file
};

// Opens a checkpoint file: a regular file only (a FIFO, a device or a folder is refused before it
// is read, so that nothing waits on it or reads it without end).
std::unique_ptr<ReadFile> open_checkpoint(const std::string& path) {
  return std::make_unique<ReadFile>(path, kMaxRecordBytes, [&](const std::string& why) {
    if (why == "does not exist")
      throw CheckpointError(fmt::format("checkpoint '{}' does not exist", path),
                            "check the checkpoint's path");
    if (why.starts_with("is a folder"))
      throw CheckpointError(fmt::format("'{}' is a folder, not a checkpoint file", path),
                            "give a .safetensors file, or the folder to --resume");
    throw CheckpointError(fmt::format("checkpoint '{}' {}", path, why),
                          "give a .safetensors file written by trainer (--checkpoint-dir)");
  });
}

// The number of elements of a shape, or -1 when it does not fit 63 bits.
int64_t checked_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

// Reads and checks the whole header before any of it is used, as strictly as the safetensors
// library's own loader: the length, UTF-8 JSON without duplicate keys, each tensor's dtype, shape
// and byte size, and offsets that tile the data section exactly (in order, no hole, no overlap,
// nothing after the last tensor).
Header read_header(const ReadFile& file, const std::string& path) {
  const uint64_t file_size = file.size();
  unsigned char len_bytes[8];
  if (file_size < 8 || !file.read_at(0, len_bytes, 8))
    corrupt(path, fmt::format("it has {} bytes, fewer than the 8 of the header length", file_size));
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | len_bytes[i];
  // A YAML or image file given for a checkpoint lands here, with a length of gigabytes.
  if (len > kMaxHeaderBytes)
    corrupt(path, fmt::format("it is not a .safetensors file: its first 8 bytes give a header of "
                              "{} bytes, more than the format allows",
                              len));
  if (len > file_size - 8)
    corrupt(path, fmt::format("its header claims {} bytes but the file has {} after the length",
                              len, file_size - 8));
  std::string text(len, '\0');
  if (!file.read_at(8, text.data(), static_cast<size_t>(len)))
    corrupt(path, "the header cannot be read");
  if (text.empty() || text[0] != '{')
    corrupt(path, "the header is not valid JSON for the format: it does not start with '{'");
  Json root = checkpoint_json::read(text, "checkpoint '" + path + "'");
  if (root.kind != Json::kObject) corrupt(path, "the header is not a JSON object");

  Header h;
  h.data_start = 8 + len;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [name, j] : root.members) {
    if (name == "__metadata__") {
      if (j.kind != Json::kObject) corrupt(path, "__metadata__ is not an object");
      for (const auto& [k, v] : j.members) {
        if (v.kind != Json::kString) corrupt(path, "metadata '" + k + "' is not a string");
        h.meta[k] = v.text;
      }
      continue;
    }
    if (j.kind != Json::kObject)
      corrupt(path, "tensor '" + name + "' is not an object of dtype, shape and data_offsets");
    for (const auto& [key, v] : j.members)
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        corrupt(path, fmt::format("tensor '{}' has an unknown field '{}'", name, key));
    const Json* dtype = j.find("dtype");
    const Json* shape = j.find("shape");
    const Json* offsets = j.find("data_offsets");
    if (!dtype || !shape || !offsets)
      corrupt(path, "tensor '" + name + "' lacks dtype, shape or data_offsets");
    if (dtype->kind != Json::kString || dtype->text != "F32")
      corrupt(path,
              fmt::format("tensor '{}' has dtype {}; tandem writes only F32", name, dtype->text));
    if (shape->kind != Json::kArray || offsets->kind != Json::kArray || offsets->items.size() != 2)
      corrupt(path, "tensor '" + name + "' has a malformed shape or data_offsets");
    Entry e;
    e.name = name;
    std::vector<int64_t> dims;
    for (const Json& d : shape->items) {
      int64_t v = integer(d, path, "a dimension of '" + name + "'");
      if (v < 0) corrupt(path, fmt::format("tensor '{}' has a negative dimension {}", name, v));
      dims.push_back(v);
    }
    const int64_t numel = checked_numel(dims);
    if (numel < 0 || numel > INT64_MAX / 4)
      corrupt(path, fmt::format("tensor '{}' has a shape whose size overflows", name));
    e.shape = Shape(dims);
    const int64_t b = integer(offsets->items[0], path, "an offset of '" + name + "'");
    const int64_t en = integer(offsets->items[1], path, "an offset of '" + name + "'");
    if (b < 0 || en < b || static_cast<uint64_t>(en) > data_size)
      corrupt(path,
              fmt::format("tensor '{}' lies at bytes [{}, {}) but the data section has {} bytes",
                          name, b, en, data_size));
    e.begin = static_cast<uint64_t>(b);
    e.end = static_cast<uint64_t>(en);
    if (e.end - e.begin != static_cast<uint64_t>(numel) * 4)
      corrupt(path, fmt::format("tensor '{}' of shape {} needs {} bytes but has {}", name,
                                e.shape.str(), numel * 4, e.end - e.begin));
    h.entries.push_back(std::move(e));
  }
  // The tensors, in the order of their offsets, must cover the data section end to end: an
  // overlap would let two tensors share bytes, a hole or a tail would be bytes nobody owns.
  std::vector<const Entry*> order;
  for (const Entry& e : h.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t covered = 0;
  for (const Entry* e : order) {
    if (e->begin != covered)
      corrupt(path,
              fmt::format("tensor '{}' starts at byte {} of the data section, where {} "
                          "(the tensors must follow each other without gap or overlap)",
                          e->name, e->begin,
                          e->begin < covered ? fmt::format("bytes up to {} already belong "
                                                           "to another tensor",
                                                           covered)
                                             : fmt::format("the one before ends at {}", covered)));
    covered = e->end;
  }
  if (covered != data_size)
    corrupt(path,
            fmt::format("its tensors cover {} bytes of a data section of {}", covered, data_size));
  return h;
}

std::string major_of(const std::string& version) { return version.substr(0, version.find('.')); }

// Shortest round-trip text of each value, comma-separated.
std::string float_list(const std::vector<float>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{}", i ? "," : "", v[i]);
  return out;
}

uint64_t meta_int(const Header& h, const std::string& key, const std::string& path) {
  auto it = h.meta.find(key);
  uint64_t v = 0;
  if (it == h.meta.end() ||
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), v).ptr !=
          it->second.data() + it->second.size())
    corrupt(path, "metadata '" + key + "' is missing or not a number");
  return v;
}

// A count (epoch, batch, batch size): an integer of 0 or more that fits int64_t.
int64_t meta_count(const Header& h, const std::string& key, const std::string& path) {
  const uint64_t v = meta_int(h, key, path);
  if (v > static_cast<uint64_t>(INT64_MAX))
    corrupt(path, fmt::format("metadata '{}' is {}, more than any run counts", key, v));
  return static_cast<int64_t>(v);
}

// Comma-separated floats; absent (older checkpoints): none.
std::vector<float> meta_floats(const Header& h, const std::string& key, const std::string& path) {
  std::vector<float> out;
  auto it = h.meta.find(key);
  if (it == h.meta.end() || it->second.empty()) return out;
  std::stringstream ss(it->second);
  for (std::string item; std::getline(ss, item, ',');) {
    float v = 0;
    if (std::from_chars(item.data(), item.data() + item.size(), v).ptr != item.data() + item.size())
      corrupt(path, "metadata '" + key + "' is not a list of numbers: '" + it->second + "'");
    out.push_back(v);
  }
  return out;
}

// The run's epochs so far, one metadata string: CSV with a header line, the device and the peak
// memory, then the figures of the table (engine/epoch_figures.h) that a history carries, numbers
// as written by {}, which reads back exactly ("nan" and "inf" too).
std::string history_text(const std::vector<EpochStats>& epochs) {
  if (epochs.empty()) return "";
  std::string out = "device,peak_memory_bytes";
  for (const EpochFigure& f : epoch_figures())
    if (f.outputs & kHistory) out += fmt::format(",{}", f.name);
  for (const EpochStats& e : epochs) {
    out += fmt::format("\n{},{}", e.device, e.peak_memory_bytes);
    for (const EpochFigure& f : epoch_figures()) {
      if (!(f.outputs & kHistory)) continue;
      if (!has_figure(e, f))
        out += ",";
      else if (f.real)
        out += fmt::format(",{}", e.*f.real);
      else
        out += fmt::format(",{}", e.*f.count);
    }
  }
  return out;
}

std::vector<EpochStats> history_of(const std::string& text, const std::string& path) {
  std::vector<EpochStats> epochs;
  if (text.empty()) return epochs;
  const std::vector<std::string> lines = split(text, '\n');
  const std::vector<std::string> names = split(lines[0], ',');
  for (size_t row = 1; row < lines.size(); ++row) {
    const std::vector<std::string> cells = split(lines[row], ',');
    if (cells.size() != names.size())
      corrupt(path, fmt::format("metadata 'history' line {} has {} values for {} columns", row + 1,
                                cells.size(), names.size()));
    EpochStats e;
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string& cell = cells[k];
      const char* end = cell.data() + cell.size();
      auto bad = [&] {
        corrupt(path,
                fmt::format("metadata 'history' line {}: {} is '{}'", row + 1, names[k], cell));
      };
      if (names[k] == "device") {
        e.device = cell;
      } else if (names[k] == "peak_memory_bytes") {
        if (std::from_chars(cell.data(), end, e.peak_memory_bytes).ptr != end) bad();
      } else {
        auto f = std::find_if(
            epoch_figures().begin(), epoch_figures().end(),
            [&](const EpochFigure& f) { return (f.outputs & kHistory) && names[k] == f.name; });
        if (f == epoch_figures().end()) continue;  // a later version's column
        // An empty cell: the epoch had no such pass (a validation or test split).
        const bool val = f->when == EpochFigure::kWithValidation;
        const bool test = f->when == EpochFigure::kWithTest;
        if (cell.empty() && (val || test)) {
          if (test) e.has_test = false;
          continue;
        }
        if (val) e.has_val = true;
        if (f->real ? std::from_chars(cell.data(), end, e.*f->real).ptr != end
                    : std::from_chars(cell.data(), end, e.*f->count).ptr != end)
          bad();
      }
    }
    epochs.push_back(e);
  }
  return epochs;
}

// data.normalize as trained: one mean and one positive deviation per channel, all finite.
void check_normalize(const CheckpointMeta& m, const std::string& path) {
  if (m.normalize_mean.size() != m.normalize_std.size())
    corrupt(path, fmt::format("metadata 'normalize_mean' has {} values but 'normalize_std' {}",
                              m.normalize_mean.size(), m.normalize_std.size()));
  for (float v : m.normalize_mean)
    if (!std::isfinite(v)) corrupt(path, fmt::format("metadata 'normalize_mean' holds {}", v));
  for (float v : m.normalize_std)
    if (!std::isfinite(v) || v <= 0)
      corrupt(path, fmt::format("metadata 'normalize_std' holds {}; a deviation is positive", v));
}

CheckpointMeta meta_of(const Header& h, const std::string& path) {
  CheckpointMeta m;
  auto text = [&](const std::string& key) {
    auto it = h.meta.find(key);
    if (it == h.meta.end()) corrupt(path, "metadata '" + key + "' is missing");
    return it->second;
  };
  m.version = text("tandem_version");
  if (major_of(m.version) != major_of(TANDEM_VERSION))
    throw CheckpointError(
        fmt::format("checkpoint '{}' was written by tandem {}, this is tandem {} (another major "
                    "version)",
                    path, m.version, TANDEM_VERSION),
        "resume it with the tandem version that wrote it, or train from the start");
  m.config_text = text("config");
  if (auto it = h.meta.find("config_file"); it != h.meta.end()) m.config_file = it->second;
  m.device = text("device");
  m.epoch = meta_count(h, "epoch", path);
  m.batch = meta_count(h, "batch", path);
  m.step = meta_int(h, "step", path);
  m.updates = h.meta.count("updates") ? meta_int(h, "updates", path) : m.step;
  if (m.updates > m.step)
    corrupt(path, fmt::format("metadata 'updates' is {}, more than the {} steps of metadata 'step'",
                              m.updates, m.step));
  m.seed = meta_int(h, "seed", path);
  m.normalize_mean = meta_floats(h, "normalize_mean", path);
  m.normalize_std = meta_floats(h, "normalize_std", path);
  // Checkpoints of older versions lack these.
  if (auto it = h.meta.find("class_names"); it != h.meta.end()) {
    const Json names = checkpoint_json::read(it->second, "checkpoint '" + path + "' class_names");
    if (names.kind != Json::kArray) corrupt(path, "metadata 'class_names' is not a list");
    for (const Json& n : names.items) {
      if (n.kind != Json::kString) corrupt(path, "metadata 'class_names' holds a non-string");
      m.class_names.push_back(n.text);
    }
  }
  if (h.meta.count("batch_size")) m.batch_size = meta_count(h, "batch_size", path);
  if (h.meta.count("processes")) m.processes = meta_count(h, "processes", path);
  if (m.processes < 1) corrupt(path, "metadata 'processes' is 0; a run has one process or more");
  if (auto it = h.meta.find("best_metric"); it != h.meta.end() && !it->second.empty()) {
    m.best_metric = it->second;
    m.best_epoch = meta_count(h, "best_epoch", path);
    if (m.best_epoch > m.epoch)
      corrupt(path, fmt::format("metadata 'best_epoch' is {}, after the {} epochs of metadata "
                                "'epoch'",
                                m.best_epoch, m.epoch));
    auto v = h.meta.find("best_value");
    if (v == h.meta.end() ||
        std::from_chars(v->second.data(), v->second.data() + v->second.size(), m.best_value).ptr !=
            v->second.data() + v->second.size())
      corrupt(path, "metadata 'best_value' is missing or not a number");
    if (m.best_epoch > 0 && !std::isfinite(m.best_value))
      corrupt(path, fmt::format("metadata 'best_value' is {}, not a finite number", m.best_value));
  }
  check_normalize(m, path);
  if (auto it = h.meta.find("history"); it != h.meta.end())
    m.history = history_of(it->second, path);
  // The figures of epochs 1, 2, ... in order, none after the epochs done.
  int64_t last = 0;
  for (const EpochStats& e : m.history) {
    if (e.epoch <= last || e.epoch > m.epoch)
      corrupt(path, fmt::format("metadata 'history' holds epoch {} {}", e.epoch,
                                e.epoch <= last ? fmt::format("after epoch {}", last)
                                                : fmt::format("beyond the {} epochs of metadata "
                                                              "'epoch'",
                                                              m.epoch)));
    if (e.skipped_steps < 0 || e.seconds < 0 || e.images_per_second < 0)
      corrupt(path, fmt::format("metadata 'history' holds a negative count or time at epoch {}",
                                e.epoch));
    last = e.epoch;
  }
  if (auto it = h.meta.find("precision"); it != h.meta.end()) {
    if (it->second != "fp32" && it->second != "tf32" && it->second != "bf16" &&
        it->second != "fp16")
      corrupt(path, "metadata 'precision' is '" + it->second + "', none of fp32, tf32, bf16, fp16");
    m.precision = it->second;
  }
  if (auto it = h.meta.find("loss_scale"); it != h.meta.end())
    if (std::from_chars(it->second.data(), it->second.data() + it->second.size(), m.loss_scale)
                .ptr != it->second.data() + it->second.size() ||
        !(m.loss_scale >= 0))
      corrupt(path, "metadata 'loss_scale' is not a number of zero or more");
  if (h.meta.count("good_steps"))
    m.good_steps = static_cast<int64_t>(meta_int(h, "good_steps", path));
  return m;
}

}  // namespace

NamedTensors checkpoint_tensors(Graph& graph, const Optimizer& optimizer) {
  NamedTensors out;
  for (Param* p : graph.params()) out.emplace_back(p->name, p->value);
  for (auto& b : graph.buffers()) out.push_back(std::move(b));
  for (auto& s : optimizer.state()) out.push_back(s);
  return out;
}

void write_checkpoint(const std::string& path, const NamedTensors& tensors,
                      const CheckpointMeta& meta) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    std::string dims;
    for (int64_t d : t.shape().dims()) dims += fmt::format("{}{}", dims.empty() ? "" : ",", d);
    header += fmt::format("{}:{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{},{}]}},",
                          json_string(name), dims, offset, offset + t.bytes());
    offset += t.bytes();
  }
  header += "\"__metadata__\":{";
  // Metadata values are strings: the class names are a JSON list inside one (json.loads reads it).
  std::string names = "[";
  for (size_t i = 0; i < meta.class_names.size(); ++i)
    names += fmt::format("{}{}", i ? "," : "", json_string(meta.class_names[i]));
  names += "]";
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"format", "pt"},  // what other safetensors readers expect to find here
      {"tandem_version", meta.version.empty() ? TANDEM_VERSION : meta.version},
      {"config", meta.config_text},
      {"config_file", meta.config_file},
      {"device", meta.device},
      {"epoch", std::to_string(meta.epoch)},
      {"batch", std::to_string(meta.batch)},
      {"step", std::to_string(meta.step)},
      {"updates", std::to_string(meta.updates)},
      {"seed", std::to_string(meta.seed)},
      {"normalize_mean", float_list(meta.normalize_mean)},
      {"normalize_std", float_list(meta.normalize_std)},
      {"class_names", names},
      {"batch_size", std::to_string(meta.batch_size)},
      {"processes", std::to_string(meta.processes)},
      {"best_metric", meta.best_metric},
      {"best_value", fmt::format("{}", meta.best_value)},
      {"best_epoch", std::to_string(meta.best_epoch)},
      {"precision", meta.precision},
      {"loss_scale", fmt::format("{}", meta.loss_scale)},
      {"good_steps", std::to_string(meta.good_steps)},
      {"history", history_text(meta.history)}};
  for (size_t i = 0; i < fields.size(); ++i)
    header += fmt::format("{}{}:{}", i ? "," : "", json_string(fields[i].first),
                          json_string(fields[i].second));
  header += "}}";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  if (const std::string why = output_problem(path); !why.empty())
    throw CheckpointError(fmt::format("cannot write checkpoint '{}': it {}", path, why),
                          "remove it, or write the checkpoints to another folder");
  // Two runs writing one folder each commit a whole file; the last rename wins.
  const std::string failed = replace_file(path, [&](FILE* f) {
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(header.size() >> (8 * i));
    bool ok = std::fwrite(len, 1, 8, f) == 8 &&
              std::fwrite(header.data(), 1, header.size(), f) == header.size();
    std::vector<float> host;
    for (const auto& [name, t] : tensors) {
      if (!ok) break;
      host.resize(static_cast<size_t>(t.numel()));
      t.backend().download(host.data(), t);
      ok = std::fwrite(host.data(), 4, host.size(), f) == host.size();
    }
    return ok;
  });
  if (!failed.empty())
    throw CheckpointError(fmt::format("cannot write checkpoint '{}': {}", path, failed),
                          "check that the folder exists, is writable and has free space");
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  return meta_of(read_header(*open_checkpoint(path), path), path);
}

std::vector<std::string> checkpoint_tensor_names(const std::string& path) {
  std::vector<std::string> names;
  for (const Entry& e : read_header(*open_checkpoint(path), path).entries) names.push_back(e.name);
  return names;
}

CheckpointMeta read_checkpoint(const std::string& path, NamedTensors& tensors) {
  // One open file for the header and the data: a checkpoint renamed over this one meanwhile (by
  // another run writing the same folder) cannot mix its tensors with this header.
  const std::unique_ptr<ReadFile> file = open_checkpoint(path);
  const Header h = read_header(*file, path);
  CheckpointMeta meta = meta_of(h, path);
  std::map<std::string, const Entry*> by_name;
  for (const Entry& e : h.entries) by_name[e.name] = &e;
  std::vector<std::string> missing, extra, mismatched;
  std::set<std::string> wanted;
  for (const auto& [name, t] : tensors) {
    wanted.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end())
      missing.push_back(name);
    else if (it->second->shape != t.shape())
      mismatched.push_back(fmt::format("{} is {} in the file, {} in the model", name,
                                       it->second->shape.str(), t.shape().str()));
  }
  for (const Entry& e : h.entries)
    if (!wanted.count(e.name)) extra.push_back(e.name);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + v[i];
    return v.size() > 5 ? s + fmt::format(" and {} more", v.size() - 5) : s;
  };
  const std::string hint = "resume with the config (and optimizer) the checkpoint was trained with";
  if (!mismatched.empty())
    throw CheckpointError(
        fmt::format("checkpoint '{}' does not fit the model: {}", path, list(mismatched)), hint);
  if (!missing.empty())
    throw CheckpointError(
        fmt::format("checkpoint '{}' lacks tensors the model has: {}", path, list(missing)), hint);
  if (!extra.empty())
    throw CheckpointError(
        fmt::format("checkpoint '{}' has tensors the model lacks: {}", path, list(extra)), hint);

  // Everything fits: read all data to the host first, so a failed read leaves the model as it was.
  std::vector<std::vector<float>> data;
  for (const auto& [name, t] : tensors) {
    const Entry& e = *by_name[name];
    data.emplace_back(static_cast<size_t>(t.numel()));
    if (!file->read_at(h.data_start + e.begin, data.back().data(),
                       static_cast<size_t>(e.end - e.begin)))
      corrupt(path, "tensor '" + name + "' cannot be read");
    // tandem writes no checkpoint of non-finite weights (the run stops before): such values are
    // damage, which would show only as a NaN loss, or as an update gone wrong when resuming.
    const auto bad = std::count_if(data.back().begin(), data.back().end(),
                                   [](float v) { return !std::isfinite(v); });
    if (bad)
      throw CheckpointError(
          fmt::format("checkpoint '{}' holds {} non-finite value{} (NaN or infinity) in '{}'", path,
                      bad, bad == 1 ? "" : "s", name),
          "the file is corrupt, or not written by a tandem run (which never saves non-finite "
          "weights); use another checkpoint (e.g. an earlier epoch-E file)");
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor& t = tensors[i].second;
    t.backend().upload(t, data[i].data());
  }
  return meta;
}

CheckpointContents read_checkpoint_contents(const std::string& path) {
  const Header h = read_header(*open_checkpoint(path), path);
  CheckpointContents out;
  for (const Entry& e : h.entries) out.tensors.emplace_back(e.name, e.shape);
  out.meta = h.meta;
  return out;
}

std::vector<std::string> read_matching_tensors(const std::string& path, NamedTensors& tensors) {
  const std::unique_ptr<ReadFile> file = open_checkpoint(path);
  const Header h = read_header(*file, path);
  std::map<std::string, const Entry*> by_name;
  for (const Entry& e : h.entries) by_name[e.name] = &e;
  // All read and checked on the host first, so that a bad file leaves the model as it was.
  std::vector<std::pair<Tensor*, std::vector<float>>> data;
  std::vector<std::string> names;
  for (auto& [name, t] : tensors) {
    auto it = by_name.find(name);
    if (it == by_name.end() || it->second->shape != t.shape()) continue;
    const Entry& e = *it->second;
    std::vector<float> values(static_cast<size_t>(t.numel()));
    if (!file->read_at(h.data_start + e.begin, values.data(), static_cast<size_t>(e.end - e.begin)))
      corrupt(path, "tensor '" + name + "' cannot be read");
    const auto bad =
        std::count_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
    if (bad)
      throw CheckpointError(
          fmt::format("checkpoint '{}' holds {} non-finite value{} (NaN or infinity) in '{}'", path,
                      bad, bad == 1 ? "" : "s", name),
          "the file is corrupt, or its weights diverged; start from another checkpoint");
    data.emplace_back(&t, std::move(values));
    names.push_back(name);
  }
  for (auto& [t, values] : data) t->backend().upload(*t, values.data());
  return names;
}

void save_checkpoint(const std::string& path, Graph& graph, const Optimizer& optimizer,
                     const CheckpointMeta& meta) {
  CheckpointMeta m = meta;
  m.updates = static_cast<uint64_t>(optimizer.steps());
  write_checkpoint(path, checkpoint_tensors(graph, optimizer), m);
}

CheckpointMeta restore_checkpoint(const std::string& path, Graph& graph, Optimizer& optimizer) {
  NamedTensors tensors = checkpoint_tensors(graph, optimizer);
  CheckpointMeta meta = read_checkpoint(path, tensors);
  optimizer.set_steps(static_cast<int64_t>(meta.updates));
  return meta;
}

std::string find_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  fs::path best;
  fs::file_time_type best_time;
  auto newest_in = [&](const fs::path& folder) {
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      const fs::path& p = entry.path();
      // Temporaries (".NAME.tmp...") and anything not a regular file (a FIFO would hang the
      // read) are not checkpoints.
      if (p.extension() != ".safetensors" || p.filename().string().front() == '.' ||
          p.filename() == kBestCheckpoint || !entry.is_regular_file(ec))
        continue;
      auto t = entry.last_write_time(ec);
      if (best.empty() || t > best_time || (t == best_time && p > best)) {
        best = p;
        best_time = t;
      }
    }
  };
  newest_in(path);
  // A run over several devices writes a sub-folder each (runs/lenet/cpu, runs/lenet/gpu): the
  // newest of theirs.
  if (best.empty())
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_directory(ec)) newest_in(entry.path());
  if (best.empty())
    throw CheckpointError(
        fmt::format("folder '{}' holds no .safetensors checkpoint", path),
        "give the checkpoint file itself, or the folder given to --checkpoint-dir");
  return best.string();
}

}  // namespace tandem
