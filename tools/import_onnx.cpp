// trainer import: an ONNX classification CNN (as PyTorch's torch.onnx.export writes it, opsets 13
// to 17) as a tandem config and a checkpoint of its weights. Every node becomes the tandem layer
// that computes the same, or the import refuses the model, naming each operator it cannot take;
// nothing is approximated and nothing is written before the whole graph is understood.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/atomic_file.h"
#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/progress.h"
#include "engine/text.h"
#include "tools/app.h"

namespace tandem {

namespace {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little);  // ONNX's raw data is little-endian

constexpr int kMinOpset = 13, kMaxOpset = 17;

// A constant of the graph: an initializer, a Constant node's value, or what folding computed.
struct Const {
  std::vector<int64_t> dims;
  std::vector<double> values;  // floats and integers alike (shapes and indices fit exactly)
  bool integer = false;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// A value of the graph on its way through: a layer's output (or the model's input), a constant,
// or the batch-size-dependent shape PyTorch leaves before a Reshape.
struct Value {
  int layer = -2;  // -1: the model's input; >= 0: the k-th layer's output; -2: a constant
  Shape shape;     // per sample (a layer's output)
  std::optional<Const> constant;
};

// One tandem layer of the config being written.
struct OutLayer {
  std::string type;
  std::vector<std::pair<std::string, std::string>> args;  // key, YAML value
  std::string name;
  std::vector<int> inputs;                             // -1: the model's input
  std::vector<std::pair<std::string, Const>> tensors;  // "weight", "running_mean", ...
  std::string node;                                    // the ONNX node it came from
};

[[noreturn]] void file_error(const std::string& path, const std::string& what,
                             const std::string& hint) {
  throw CheckpointError("'" + path + "' " + what, hint);
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += fmt::format("{}{}", s.empty() ? "" : ", ", x);
  return "[" + s + "]";
}

std::string float_text(double v) {
  std::string s = fmt::format("{}", static_cast<float>(v));
  // YAML reads "1e-05" as a string in some readers; a '.' keeps it a number in all.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (s.find('.') == std::string::npos) s.insert(s.find('e'), ".0");
  return s;
}

// The ONNX file as read: the model proto, and where its external data may lie.
class OnnxFile {
 public:
  explicit OnnxFile(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw UsageError("'" + path + "' does not exist", "give the path of an .onnx file");
    if (fs::is_directory(path, ec))
      throw UsageError("'" + path + "' is a folder", "give the path of an .onnx file");
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    if (!in.good() && !in.eof()) file_error(path, "cannot be read", "check the file's permissions");
    const std::string bytes = buf.str();
    const std::string not_onnx_hint =
        "give a model written by torch.onnx.export (or another ONNX exporter); a truncated "
        "download is a common cause";
    if (bytes.empty()) file_error(path, "is empty, not an ONNX model", not_onnx_hint);
    if (!model_.ParseFromString(bytes))
      file_error(path, "is not an ONNX model (its bytes do not parse as one, or it is truncated)",
                 not_onnx_hint);
    if (model_.ir_version() <= 0 || !model_.has_graph() || model_.graph().node_size() == 0)
      file_error(path, "is not an ONNX model (no IR version or no graph)", not_onnx_hint);
    folder_ = fs::absolute(fs::path(path)).parent_path();
  }

  const onnx::ModelProto& model() const { return model_; }

  // A tensor's values (float, double, int32, int64), from the proto or its external file.
  Const read(const onnx::TensorProto& t) const {
    Const c;
    // The shape is checked before anything is sized by it: its product must not overflow (nor
    // pass 2^40 values, far beyond what a file holds), and the data must hold that many values.
    int64_t n = 1;
    for (int64_t d : t.dims()) {
      if (d < 0)
        file_error(path_, fmt::format("is damaged: tensor '{}' has a negative dimension", t.name()),
                   "export the model again");
      if (d > 0 && n > (int64_t{1} << 40) / d)
        file_error(
            path_,
            fmt::format("is damaged: tensor '{}' has a shape of more than 2^40 values", t.name()),
            "export the model again");
      n *= d;
      c.dims.push_back(d);
    }
    size_t width = 0;
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
        width = 4;
        break;
      case onnx::TensorProto::DOUBLE:
        width = 8;
        break;
      case onnx::TensorProto::INT32:
        width = 4;
        c.integer = true;
        break;
      case onnx::TensorProto::INT64:
        width = 8;
        c.integer = true;
        break;
      default:
        throw ConfigError(fmt::format("'{}': tensor '{}' is of ONNX data type {}; trainer import "
                                      "reads float, double and integer tensors",
                                      path_, t.name(), t.data_type()),
                          "export the model in fp32");
    }
    std::string raw;
    bool have_raw = false;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      raw = external(t, static_cast<uint64_t>(n) * width);
      have_raw = true;
    } else if (t.has_raw_data()) {
      raw = t.raw_data();
      have_raw = true;
    }
    auto size_error = [&](size_t got) {
      file_error(path_,
                 fmt::format("is damaged: tensor '{}' of shape {} holds {} values, not {}",
                             t.name(), ints_text(c.dims), got, n),
                 "export the model again; the file may be truncated");
    };
    if (have_raw) {
      if (raw.size() != static_cast<size_t>(n) * width) size_error(raw.size() / width);
      c.values.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const char* p = raw.data() + i * static_cast<int64_t>(width);
        switch (t.data_type()) {
          case onnx::TensorProto::FLOAT:
            c.values[i] = load<float>(p);
            break;
          case onnx::TensorProto::DOUBLE:
            c.values[i] = load<double>(p);
            break;
          case onnx::TensorProto::INT32:
            c.values[i] = load<int32_t>(p);
            break;
          default:
            c.values[i] = static_cast<double>(load<int64_t>(p));
            break;
        }
      }
      return c;
    }
    auto take = [&](const auto& field) {
      if (field.size() != n) size_error(static_cast<size_t>(field.size()));
      c.values.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) c.values[i] = static_cast<double>(field.Get(i));
    };
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
        take(t.float_data());
        break;
      case onnx::TensorProto::DOUBLE:
        take(t.double_data());
        break;
      case onnx::TensorProto::INT32:
        take(t.int32_data());
        break;
      default:
        take(t.int64_data());
        break;
    }
    return c;
  }

 private:
  template <typename T>
  static T load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  // External data: `location` relative to the model's folder and inside it (an absolute path or
  // one that climbs out with ../ is refused: a model file must not make the importer read
  // elsewhere), `offset` and `length` within it.
  std::string external(const onnx::TensorProto& t, uint64_t bytes) const {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      try {
        if (kv.key() == "offset") offset = std::stoull(kv.value());
        if (kv.key() == "length") length = std::stoull(kv.value());
      } catch (const std::exception&) {
        file_error(path_,
                   fmt::format("is damaged: tensor '{}' has external data {} '{}', not a number",
                               t.name(), kv.key(), kv.value()),
                   "export the model again");
      }
    }
    if (location.empty())
      file_error(path_,
                 fmt::format("is damaged: tensor '{}' keeps its data in another file but names "
                             "none (no 'location')",
                             t.name()),
                 "export the model again");
    const fs::path loc(location);
    bool climbs = loc.is_absolute() || loc.has_root_name();
    for (const auto& part : loc)
      if (part == "..") climbs = true;
    if (climbs)
      throw CheckpointError(
          fmt::format("'{}': tensor '{}' has its data at '{}', outside the model's folder; "
                      "trainer import reads external data only from the model's own folder",
                      path_, t.name(), location),
          "keep the data file beside the .onnx file and its location a plain name");
    const fs::path file = folder_ / loc;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
      throw CheckpointError(
          fmt::format("'{}': tensor '{}' has its data in '{}', which {}", path_, t.name(),
                      file.string(), fs::exists(file, ec) ? "is not a file" : "does not exist"),
          "copy the model's data file beside the .onnx file");
    // Symbolic links are followed only to a file inside the folder too.
    const fs::path real = fs::weakly_canonical(file, ec), base = fs::weakly_canonical(folder_, ec);
    if (std::mismatch(base.begin(), base.end(), real.begin(), real.end()).first != base.end())
      throw CheckpointError(
          fmt::format("'{}': tensor '{}' has its data in '{}', which leads outside the model's "
                      "folder (to {})",
                      path_, t.name(), location, real.string()),
          "copy the data file itself beside the .onnx file");
    const uint64_t size = fs::file_size(file, ec);
    if (length && *length != bytes)
      file_error(
          path_,
          fmt::format("is damaged: tensor '{}' of shape {} needs {} bytes, its external "
                      "data gives {}",
                      t.name(), ints_text(std::vector<int64_t>(t.dims().begin(), t.dims().end())),
                      bytes, *length),
          "export the model again");
    if (ec || offset > size || size - offset < bytes)
      file_error(file.string(),
                 fmt::format("is too short for tensor '{}' ({} bytes from offset {}, the file has "
                             "{})",
                             t.name(), bytes, offset, size),
                 "the data file is truncated or another model's: copy it again");
    std::ifstream in(file, std::ios::binary);
    std::string raw(bytes, '\0');
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in.read(raw.data(), static_cast<std::streamsize>(bytes)))
      file_error(file.string(), "cannot be read", "check the file's permissions");
    return raw;
  }

  std::string path_;
  fs::path folder_;
  onnx::ModelProto model_;
};

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const auto* a = attribute(n, name);
  return a ? a->i() : fallback;
}
double float_attr(const onnx::NodeProto& n, const std::string& name, double fallback) {
  const auto* a = attribute(n, name);
  return a ? a->f() : fallback;
}
std::vector<int64_t> ints_attr(const onnx::NodeProto& n, const std::string& name,
                               std::vector<int64_t> fallback) {
  const auto* a = attribute(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}
std::string string_attr(const onnx::NodeProto& n, const std::string& name,
                        const std::string& fallback) {
  const auto* a = attribute(n, name);
  return a ? a->s() : fallback;
}

// A layer name from PyTorch's scoped node names ("/layer1/layer1.0/conv1/Conv" -> the module
// path "layer1.0.conv1", as its state_dict calls it); empty where the node has none.
std::string scope_of(const std::string& node_name) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(node_name);
  while (std::getline(in, part, '/'))
    if (!part.empty()) parts.push_back(part);
  if (parts.size() < 2) return "";
  parts.pop_back();  // the operator: "Conv", "Relu_1"
  std::string path;
  for (const std::string& p : parts) {
    // Children of a Sequential are scoped with their parent's name: "layer1" then "layer1.0".
    if (!path.empty() && (p.starts_with(path + ".") || p == path)) {
      path = p;
      continue;
    }
    const size_t dot = path.rfind('.');
    const std::string last = dot == std::string::npos ? path : path.substr(dot + 1);
    if (!last.empty() && p.starts_with(last + ".")) {
      path = path.substr(0, path.size() - last.size()) + p;
      continue;
    }
    path += (path.empty() ? "" : ".") + p;
  }
  return path;
}

// What YAML and tandem take as a name: letters, digits, '.', '_' and '-'.
std::string clean_name(const std::string& s) {
  std::string out;
  for (char ch : s)
    out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'
               ? ch
               : '_';
  while (!out.empty() && (out.front() == '.' || out.front() == '-')) out.erase(0, 1);
  return out;
}

struct Unsupported {
  int count = 0;
  std::vector<std::string> nodes;
  std::string why;
};

class Importer {
 public:
  Importer(const OnnxFile& file, const std::string& path, std::optional<Shape> input_shape)
      : file_(file), path_(path) {
    const onnx::GraphProto& g = file.model().graph();
    opset_ = check_opset();
    for (const auto& t : g.initializer()) {
      Value v;
      v.constant = file.read(t);
      values_[t.name()] = std::move(v);
    }
    // The model's input: the graph input that is not an initializer.
    std::vector<const onnx::ValueInfoProto*> inputs;
    for (const auto& in : g.input())
      if (!values_.count(in.name())) inputs.push_back(&in);
    if (inputs.size() != 1)
      throw ConfigError(fmt::format("'{}' has {} inputs; trainer import takes models of one "
                                    "input (an image batch)",
                                    path, inputs.size()),
                        "export a model whose forward takes one tensor");
    read_input(*inputs.front(), input_shape);
    if (g.output_size() != 1)
      throw ConfigError(fmt::format("'{}' has {} outputs; trainer import takes models of one "
                                    "output (the class scores)",
                                    path, g.output_size()),
                        "export the model in eval mode, without auxiliary outputs (e.g. "
                        "googlenet(aux_logits=False))");
    output_ = g.output(0).name();
  }

  void run() {
    const onnx::GraphProto& g = file_.model().graph();
    // Only what the output depends on: PyTorch leaves unused constants behind.
    std::map<std::string, int> producer;
    for (int i = 0; i < g.node_size(); ++i)
      for (const auto& o : g.node(i).output()) producer[o] = i;
    std::vector<bool> live(static_cast<size_t>(g.node_size()), false);
    std::vector<std::string> todo{output_};
    while (!todo.empty()) {
      const std::string v = todo.back();
      todo.pop_back();
      auto it = producer.find(v);
      if (it == producer.end() || live[static_cast<size_t>(it->second)]) continue;
      live[static_cast<size_t>(it->second)] = true;
      for (const auto& in : g.node(it->second).input())
        if (!in.empty()) todo.push_back(in);
    }
    for (int i = 0; i < g.node_size(); ++i)
      if (live[static_cast<size_t>(i)])
        for (const auto& in : g.node(i).input()) ++consumers_[in];
    ++consumers_[output_];
    for (int i = 0; i < g.node_size(); ++i) {
      if (!live[static_cast<size_t>(i)]) continue;
      const onnx::NodeProto& n = g.node(i);
      producer_[n.output(0)] = &n;
      if (absorbed_.count(&n)) continue;
      try {
        convert(n);
      } catch (const Downstream& d) {
        mark(n, d.state);
        if (d.state == kPending) pending_.push_back(&n);
      } catch (const NotTaken& e) {
        const std::string why = e.what();
        if (why.empty() && (n.op_type() == "Div" || n.op_type() == "Erf")) {
          mark(n, kPending);  // perhaps a part of GELU, which its last Mul takes back
          pending_.push_back(&n);
        } else {
          record(n, why);
          mark(n, kRefused);
        }
      }
    }
    for (const onnx::NodeProto* n : pending_) record(*n, "");
    if (!unsupported_.empty()) throw_unsupported();
    const Value& out = get(output_);
    if (out.layer < 0)
      throw ConfigError("'" + path_ + "': the model's output is its input or a constant",
                        "export a model that computes its output");
    // tandem's model outputs its last layer's value: an ONNX graph that computes more after its
    // output (left unused) has nothing tandem could list after it.
    if (out.layer != static_cast<int>(layers_.size()) - 1)
      throw ConfigError("'" + path_ + "': the model's output is not its last computed value",
                        "export the model with its output computed last");
    if (out.shape.rank() != 1)
      throw ConfigError(fmt::format("'{}': the model's output is {} per sample; trainer import "
                                    "takes classifiers, whose output is one score per class",
                                    path_, out.shape.str()),
                        "export the model with its classifier head");
  }

  const std::vector<OutLayer>& layers() const { return layers_; }
  const Shape& input_shape() const { return input_; }
  int opset() const { return opset_; }
  const std::vector<std::string>& notes() const { return notes_; }
  int folded_convs() const { return folded_convs_; }
  int64_t classes() const { return get(output_).shape[0]; }

 private:
  struct NotTaken : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  // A node that takes a refused or pending value: it shares that state.
  struct Downstream {
    int state;
  };
  static constexpr int kPending = -3, kRefused = -4;

  int check_opset() const {
    int opset = -1;
    for (const auto& o : file_.model().opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
    if (opset < kMinOpset || opset > kMaxOpset)
      throw ConfigError(
          fmt::format("'{}' is of ONNX opset {}; trainer import reads opsets {} to {}", path_,
                      opset < 0 ? std::string("(none given)") : std::to_string(opset), kMinOpset,
                      kMaxOpset),
          fmt::format("export it again with opset_version={} (torch.onnx.export's argument)",
                      kMinOpset));
    return opset;
  }

  void read_input(const onnx::ValueInfoProto& in, const std::optional<Shape>& given) {
    const auto& dims = in.type().tensor_type().shape().dim();
    if (in.type().tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      throw ConfigError(fmt::format("'{}': the input '{}' is not of float type", path_, in.name()),
                        "export a model that takes a float tensor");
    if (dims.size() != 4 && dims.size() != 2)
      throw ConfigError(fmt::format("'{}': the input '{}' has {} dimensions; trainer import takes "
                                    "(batch, channels, height, width) or (batch, features)",
                                    path_, in.name(), dims.size()),
                        "export a model of an image input");
    std::vector<int64_t> sample;
    bool open = false;
    for (int k = 1; k < dims.size(); ++k) {
      const int64_t d = dims[k].has_dim_value() ? dims[k].dim_value() : 0;
      if (d <= 0) open = true;
      sample.push_back(d);
    }
    if (given) {
      if (given->rank() != static_cast<int>(sample.size()))
        throw UsageError(fmt::format("--input-shape {} has {} dimensions, the model's input {}",
                                     given->str(), given->rank(), sample.size()),
                         "give one value per dimension after the batch, e.g. 3,224,224");
      for (size_t k = 0; k < sample.size(); ++k)
        if (sample[k] > 0 && sample[k] != (*given)[static_cast<int>(k)])
          throw UsageError(fmt::format("--input-shape {} disagrees with the model's input, {}",
                                       given->str(), ints_text(sample)),
                           "leave --input-shape out: the model fixes its input's size");
      input_ = *given;
    } else if (open) {
      std::string text;
      for (int k = 1; k < dims.size(); ++k)
        text += (k > 1 ? ", " : "") +
                (dims[k].has_dim_value() && dims[k].dim_value() > 0
                     ? std::to_string(dims[k].dim_value())
                     : (dims[k].dim_param().empty() ? std::string("?") : dims[k].dim_param()));
      throw ConfigError(
          fmt::format("'{}': the input's size is left open ({}), and tandem builds a model for "
                      "one size",
                      path_, text),
          "give it with --input-shape, e.g. --input-shape 3,224,224");
    } else {
      input_ = Shape(sample);
    }
    export_batch_ = dims[0].has_dim_value() ? dims[0].dim_value() : -1;
    Value v;
    v.layer = -1;
    v.shape = input_;
    values_[in.name()] = v;
  }

  const Value& get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end())
      throw ConfigError(
          fmt::format("'{}' is damaged: value '{}' is used before it is computed", path_, name),
          "export the model again");
    return it->second;
  }
  const Const* constant(const std::string& name) const {
    if (name.empty()) return nullptr;
    const Value& v = get(name);
    return v.constant ? &*v.constant : nullptr;
  }
  // The value a node's k-th input is, when it is a layer's output (or the model's input).
  const Value& tensor(const onnx::NodeProto& n, int k) const {
    if (k >= n.input_size() || n.input(k).empty())
      throw NotTaken(fmt::format("its input {} is missing", k + 1));
    const Value& v = get(n.input(k));
    if (v.layer == kPending || v.layer == kRefused) throw Downstream{v.layer};
    if (v.constant) throw NotTaken("it takes a constant where a computed value is needed");
    return v;
  }
  const Const& weight(const onnx::NodeProto& n, int k) const {
    if (k >= n.input_size() || n.input(k).empty())
      throw NotTaken(fmt::format("its input {} is missing", k + 1));
    const Const* c = constant(n.input(k));
    if (!c) throw NotTaken(fmt::format("its input {} is computed, not a constant weight", k + 1));
    return *c;
  }

  void alias(const onnx::NodeProto& n, const std::string& from) {
    values_[n.output(0)] = get(from);
  }
  void set_const(const onnx::NodeProto& n, Const c) {
    Value v;
    v.constant = std::move(c);
    values_[n.output(0)] = std::move(v);
  }

  // Adds a layer computing node n's first output from `inputs`.
  OutLayer& add_layer(const onnx::NodeProto& n, const std::string& type, std::vector<int> inputs,
                      Shape out, const std::string& weight_name = "") {
    OutLayer l;
    l.type = type;
    l.inputs = std::move(inputs);
    l.node = n.name().empty() ? n.op_type() : n.name();
    std::string base = base_name(n, type, weight_name);
    base = clean_name(base);
    if (base.empty() || base == "input") base = type;
    std::string name = base;
    for (int k = 2; used_names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    used_names_.insert(name);
    l.name = name;
    layers_.push_back(std::move(l));
    Value v;
    v.layer = static_cast<int>(layers_.size()) - 1;
    v.shape = std::move(out);
    values_[n.output(0)] = v;
    return layers_.back();
  }

  // Named after the weight's name where PyTorch kept it ("layer1.0.conv1.weight"), else after
  // the node's module scope ("/layer1/layer1.0/relu/Relu": layer1.0.relu), else the node's
  // own name where it has no scope (tandem's export: "relu_1"), else the layer type.
  static std::string base_name(const onnx::NodeProto& n, const std::string& type,
                               const std::string& weight_name) {
    if (!weight_name.empty() && !weight_name.starts_with("onnx::")) {
      std::string base = weight_name;
      for (const char* suffix : {".weight", ".bias", ".scale"})
        if (base.ends_with(suffix)) return base.substr(0, base.size() - std::strlen(suffix));
      return base;
    }
    const std::string scope = scope_of(n.name());
    if (scope.empty())
      return n.name().empty() || n.name().find('/') != std::string::npos ? type : n.name();
    std::string last =
        scope.substr(scope.rfind('.') == std::string::npos ? 0 : scope.rfind('.') + 1);
    while (!last.empty() &&
           (std::isdigit(static_cast<unsigned char>(last.back())) || last.back() == '_'))
      last.pop_back();
    const std::string op = lower(n.op_type());
    const bool pools =
        type.find("pool") != std::string::npos && last.find("pool") != std::string::npos;
    return last == type || last == op || pools ? scope : scope + "." + type;
  }

  std::vector<int64_t> pads_of(const onnx::NodeProto& n, const Shape& in,
                               const std::vector<int64_t>& kernel,
                               const std::vector<int64_t>& strides,
                               const std::vector<int64_t>& dilations) const {
    // A damaged file can hold any numbers: a stride of 0 would divide by zero below.
    constexpr int64_t kMax = int64_t{1} << 16;
    auto in_range = [&](const std::vector<int64_t>& v, int64_t lo) {
      return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x >= lo && x <= kMax; });
    };
    if (!in_range(kernel, 1) || !in_range(strides, 1) || !in_range(dilations, 1))
      throw NotTaken(fmt::format("its window (kernel {}, strides {}, dilations {}) is out of range",
                                 ints_text(kernel), ints_text(strides), ints_text(dilations)));
    const std::string auto_pad = string_attr(n, "auto_pad", "NOTSET");
    std::vector<int64_t> pads = ints_attr(n, "pads", {0, 0, 0, 0});
    if (pads.size() != 4) throw NotTaken("its pads are not 4 values (top, left, bottom, right)");
    if (!in_range(pads, 0)) throw NotTaken("its pads " + ints_text(pads) + " are out of range");
    if (auto_pad == "VALID") pads = {0, 0, 0, 0};
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (int a = 0; a < 2; ++a) {
        const int64_t size = in[a + 1], out = (size + strides[a] - 1) / strides[a];
        const int64_t total = std::max<int64_t>(
            0, (out - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1 - size);
        pads[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[a + 2] = total - pads[a];
      }
    } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
      throw NotTaken("its auto_pad is '" + auto_pad + "'");
    }
    if (pads[0] != pads[2] || pads[1] != pads[3])
      throw NotTaken(
          fmt::format("it pads unevenly (top {}, left {}, bottom {}, right {}); "
                      "tandem pads both sides alike",
                      pads[0], pads[1], pads[2], pads[3]));
    for (int a = 0; a < 2; ++a)
      if (in[a + 1] + 2 * pads[a] < (kernel[a] - 1) * dilations[a] + 1)
        throw NotTaken("its window is larger than its padded " + in.str() + " input");
    return {pads[0], pads[1]};
  }

  void convert(const onnx::NodeProto& n) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      throw NotTaken("an operator of domain '" + n.domain() + "'");
    const std::string& op = n.op_type();
    // What takes a refused value is not reported again; what takes a pending one waits with it
    // (GELU's last Mul takes its pending parts itself).
    // An operator import never takes is reported all the same.
    if (op != "Mul")
      for (const auto& in : n.input())
        if (!in.empty())
          if (const int state = get(in).layer; state == kPending || state == kRefused) {
            if (!known(op)) throw NotTaken(describe(n));
            throw Downstream{state};
          }
    if (op == "Constant") return convert_constant(n);
    if (op == "Identity" || op == "Dropout") return alias(n, n.input(0));
    if (op == "Shape" || op == "Gather" || op == "Unsqueeze" || op == "Squeeze" || op == "Cast" ||
        ((op == "Concat" || op == "Slice" || arithmetic(op)) && all_constant(n)))
      return fold(n);
    if (op == "Conv") return convert_conv(n);
    if (op == "Gemm") return convert_gemm(n);
    if (op == "MatMul") return convert_matmul(n);
    if (op == "BatchNormalization") return convert_batchnorm(n);
    if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish" || op == "Softplus") {
      activation(n, op == "Relu"        ? "relu"
                    : op == "Sigmoid"   ? "sigmoid"
                    : op == "Tanh"      ? "tanh"
                    : op == "HardSwish" ? "hardswish"
                                        : "softplus");
      return;
    }
    if (op == "LeakyRelu" || op == "Elu") {
      OutLayer& l = activation(n, op == "LeakyRelu" ? "leaky_relu" : "elu");
      l.args.emplace_back("alpha", float_text(float_attr(n, "alpha", op == "Elu" ? 1.0 : 0.01)));
      return;
    }
    if (op == "HardSigmoid") {
      check_hardsigmoid(n);
      activation(n, "hardsigmoid");
      return;
    }
    if (op == "Clip") return convert_clip(n);
    if (op == "Mul") return convert_mul(n);
    if (op == "Add") return convert_add(n);
    if (op == "Concat") return convert_concat(n);
    if (op == "MaxPool" || op == "AveragePool") return convert_pool(n);
    if (op == "GlobalAveragePool") {
      const Value& x = image(n);
      add_layer(n, "global_avgpool", {x.layer}, Shape{x.shape[0], 1, 1});
      return;
    }
    if (op == "Flatten") {
      if (int_attr(n, "axis", 1) != 1) throw NotTaken("it flattens from an axis other than 1");
      const Value& x = tensor(n, 0);
      if (x.shape.rank() == 1) return alias(n, n.input(0));
      add_layer(n, "flatten", {x.layer}, Shape{x.shape.numel()});
      return;
    }
    if (op == "Reshape") return convert_reshape(n);
    if (op == "Pad") return convert_pad(n);
    if (op == "Softmax" && n.output(0) == output_) {
      notes_.push_back(
          "the model's final Softmax is left out: tandem's models output logits (softmax "
          "cross-entropy takes them; predict prints probabilities)");
      return alias(n, n.input(0));
    }
    throw NotTaken("");
  }

  // The operators convert() takes (some only in some forms).
  static bool known(const std::string& op) {
    static const std::set<std::string> ops = {
        "Constant", "Identity",    "Dropout", "Shape",     "Gather",      "Unsqueeze",
        "Squeeze",  "Cast",        "Concat",  "Slice",     "Add",         "Sub",
        "Mul",      "Div",         "Conv",    "Gemm",      "MatMul",      "BatchNormalization",
        "Relu",     "Sigmoid",     "Tanh",    "HardSwish", "Softplus",    "LeakyRelu",
        "Elu",      "HardSigmoid", "Clip",    "MaxPool",   "AveragePool", "GlobalAveragePool",
        "Flatten",  "Reshape",     "Pad",     "Softmax",   "Erf"};
    return ops.count(op) > 0;
  }

  static bool arithmetic(const std::string& op) {
    return op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
  }

  bool all_constant(const onnx::NodeProto& n) const {
    for (const auto& in : n.input())
      if (!in.empty() && !constant(in)) return false;
    return true;
  }

  void convert_constant(const onnx::NodeProto& n) {
    Const c;
    if (const auto* a = attribute(n, "value")) {
      c = file_.read(a->t());
    } else if (const auto* f = attribute(n, "value_float")) {
      c.values = {f->f()};
    } else if (const auto* i = attribute(n, "value_int")) {
      c.values = {static_cast<double>(i->i())};
      c.integer = true;
    } else if (const auto* is = attribute(n, "value_ints")) {
      for (int64_t v : is->ints()) c.values.push_back(static_cast<double>(v));
      c.dims = {static_cast<int64_t>(c.values.size())};
      c.integer = true;
    } else if (const auto* fs = attribute(n, "value_floats")) {
      for (float v : fs->floats()) c.values.push_back(v);
      c.dims = {static_cast<int64_t>(c.values.size())};
    } else {
      throw NotTaken("a Constant of a kind other than a tensor or numbers");
    }
    set_const(n, std::move(c));
  }

  // Shape arithmetic PyTorch leaves in the graph, folded: Shape, Gather, Unsqueeze, Squeeze,
  // Cast and Concat of constants.
  void fold(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    if (op == "Shape") {
      const Value& x = get(n.input(0));
      if (x.layer == kPending || x.layer == kRefused) throw Downstream{x.layer};
      Const c;
      c.integer = true;
      if (x.constant) {
        for (int64_t d : x.constant->dims) c.values.push_back(static_cast<double>(d));
      } else {
        c.values.push_back(kBatch);
        for (int64_t d : x.shape.dims()) c.values.push_back(static_cast<double>(d));
      }
      c.dims = {static_cast<int64_t>(c.values.size())};
      return set_const(n, std::move(c));
    }
    if (!all_constant(n)) throw NotTaken("it computes a shape from run-time values");
    const Const& x = *constant(n.input(0));
    Const c = x;
    if (op == "Gather") {
      const Const& idx = *constant(n.input(1));
      if (int_attr(n, "axis", 0) != 0 || x.dims.size() != 1)
        throw NotTaken("it gathers along an axis other than a shape's");
      c.values.clear();
      for (double i : idx.values) {
        const auto k = static_cast<int64_t>(i < 0 ? i + static_cast<double>(x.values.size()) : i);
        if (k < 0 || k >= static_cast<int64_t>(x.values.size()))
          throw NotTaken("it gathers outside its input");
        c.values.push_back(x.values[static_cast<size_t>(k)]);
      }
      c.dims = idx.dims;
    } else if (op == "Unsqueeze" || op == "Squeeze") {
      // Only the rank changes; a shape's folding needs no more.
      if (op == "Unsqueeze")
        c.dims.insert(c.dims.begin(), 1);
      else
        c.dims = {c.numel()};
      if (op == "Unsqueeze" && x.dims.empty()) c.dims = {1};
    } else if (op == "Cast") {
      const int64_t to = int_attr(n, "to", onnx::TensorProto::FLOAT);
      c.integer = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
    } else if (arithmetic(op)) {
      // Of a shape's numbers (ShuffleNet's channels / 2), with a scalar broadcast.
      const Const& y = *constant(n.input(1));
      if (x.numel() != y.numel() && x.numel() != 1 && y.numel() != 1)
        throw NotTaken("it computes on constants of shapes that do not broadcast");
      if (x.numel() == 1) c = y;
      for (size_t i = 0; i < c.values.size(); ++i) {
        const double a = x.values[x.numel() == 1 ? 0 : i], b = y.values[y.numel() == 1 ? 0 : i];
        double v = op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : a / b;
        if (x.integer && y.integer && op == "Div") v = std::trunc(v);
        c.values[i] = v;
      }
      c.integer = x.integer && y.integer;
    } else if (op == "Slice") {
      const Const* starts = constant(n.input(1));
      const Const* ends = constant(n.input(2));
      if (x.dims.size() != 1 || starts->numel() != 1 || ends->numel() != 1 ||
          (n.input_size() > 4 && constant(n.input(4))->values.at(0) != 1))
        throw NotTaken("it slices a constant other than a shape");
      const auto size = static_cast<double>(x.values.size());
      auto clamp = [&](double v) { return std::clamp(v < 0 ? v + size : v, 0.0, size); };
      const auto b = static_cast<size_t>(clamp(starts->values[0]));
      const auto e = static_cast<size_t>(clamp(ends->values[0]));
      c.values.assign(x.values.begin() + static_cast<std::ptrdiff_t>(b),
                      x.values.begin() + static_cast<std::ptrdiff_t>(std::max(b, e)));
      c.dims = {static_cast<int64_t>(c.values.size())};
    } else {  // Concat
      c.values.clear();
      for (const auto& in : n.input())
        for (double v : constant(in)->values) c.values.push_back(v);
      c.dims = {static_cast<int64_t>(c.values.size())};
    }
    set_const(n, std::move(c));
  }

  const Value& image(const onnx::NodeProto& n) const {
    const Value& x = tensor(n, 0);
    if (x.shape.rank() != 3)
      throw NotTaken("it takes a " + x.shape.str() + " input where an image (C,H,W) is needed");
    return x;
  }

  void convert_conv(const onnx::NodeProto& n) {
    const Value& x = image(n);
    const Const& w = weight(n, 1);
    const Const* b = n.input_size() > 2 ? &weight(n, 2) : nullptr;
    if (w.dims.size() != 4) throw NotTaken("its weight is not (filters, channels, height, width)");
    const int64_t groups = int_attr(n, "group", 1);
    const std::vector<int64_t> kernel = {w.dims[2], w.dims[3]};
    const std::vector<int64_t> strides = ints_attr(n, "strides", {1, 1});
    const std::vector<int64_t> dilations = ints_attr(n, "dilations", {1, 1});
    if (strides.size() != 2 || dilations.size() != 2) throw NotTaken("it is not 2-D");
    if (groups < 1 || groups > x.shape[0] || x.shape[0] != w.dims[1] * groups)
      throw NotTaken(fmt::format("its weight {} does not fit its {} input in {} groups",
                                 ints_text(w.dims), x.shape.str(), groups));
    const std::vector<int64_t> pads = pads_of(n, x.shape, kernel, strides, dilations);
    Shape out{w.dims[0],
              conv_out_size(x.shape[1], static_cast<int>(dilations[0] * (kernel[0] - 1) + 1),
                            static_cast<int>(strides[0]), static_cast<int>(pads[0])),
              conv_out_size(x.shape[2], static_cast<int>(dilations[1] * (kernel[1] - 1) + 1),
                            static_cast<int>(strides[1]), static_cast<int>(pads[1]))};
    OutLayer& l = add_layer(n, "conv2d", {x.layer}, out, n.input(1));
    l.args = {{"filters", std::to_string(w.dims[0])}, {"kernel", pair_text(kernel)}};
    if (strides != std::vector<int64_t>{1, 1}) l.args.emplace_back("stride", pair_text(strides));
    if (pads != std::vector<int64_t>{0, 0}) l.args.emplace_back("padding", pair_text(pads));
    if (dilations != std::vector<int64_t>{1, 1})
      l.args.emplace_back("dilation", pair_text(dilations));
    if (groups != 1) l.args.emplace_back("groups", std::to_string(groups));
    if (!b) l.args.emplace_back("bias", "false");
    l.tensors.emplace_back("weight", w);
    if (b) l.tensors.emplace_back("bias", *b);
    if (b && n.input(1).starts_with("onnx::")) ++folded_convs_;
  }

  static std::string pair_text(const std::vector<int64_t>& v) {
    return v[0] == v[1] ? std::to_string(v[0]) : ints_text(v);
  }

  // A dense layer of weight (units, features) and an optional bias.
  void dense(const onnx::NodeProto& n, const Value& x, Const w, const Const* b,
             const std::string& weight_name) {
    if (x.shape.rank() != 1)
      throw NotTaken("it takes a " + x.shape.str() + " input where a flat one is needed");
    if (w.dims.size() != 2 || w.dims[1] != x.shape[0])
      throw NotTaken(
          fmt::format("its weight {} does not fit its {} input", ints_text(w.dims), x.shape.str()));
    const int64_t units = w.dims[0];
    if (b && b->numel() != units)
      throw NotTaken(
          fmt::format("its bias of {} values does not fit {} outputs", b->numel(), units));
    OutLayer& l = add_layer(n, "dense", {x.layer}, Shape{units}, weight_name);
    l.args = {{"units", std::to_string(units)}};
    if (!b) l.args.emplace_back("bias", "false");
    l.tensors.emplace_back("weight", std::move(w));
    if (b) {
      Const bias = *b;
      bias.dims = {units};
      l.tensors.emplace_back("bias", std::move(bias));
    }
  }

  static Const transposed(const Const& w) {
    Const t = w;
    const int64_t r = w.dims[0], c = w.dims[1];
    t.dims = {c, r};
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) t.values[j * r + i] = w.values[i * c + j];
    return t;
  }

  void convert_gemm(const onnx::NodeProto& n) {
    const Value& x = tensor(n, 0);
    const Const& b = weight(n, 1);
    if (int_attr(n, "transA", 0) != 0) throw NotTaken("it transposes its input (transA)");
    if (float_attr(n, "alpha", 1.0) != 1.0 || float_attr(n, "beta", 1.0) != 1.0)
      throw NotTaken("it scales its product (alpha or beta other than 1)");
    if (b.dims.size() != 2) throw NotTaken("its weight is not a matrix");
    const Const w = int_attr(n, "transB", 0) ? b : transposed(b);
    dense(n, x, w, n.input_size() > 2 ? &weight(n, 2) : nullptr, n.input(1));
  }

  // MatMul by a constant, and the Add of a constant after it: a dense layer (PyTorch's Linear
  // without Gemm).
  void convert_matmul(const onnx::NodeProto& n) {
    const Value& x = tensor(n, 0);
    const Const& w = weight(n, 1);
    if (w.dims.size() != 2) throw NotTaken("its weight is not a matrix");
    const onnx::NodeProto* add = only_consumer(n.output(0), "Add");
    const Const* bias = nullptr;
    if (add) {
      const std::string other = add->input(0) == n.output(0) ? add->input(1) : add->input(0);
      bias = constant(other);
      if (bias) absorbed_.insert(add);
    }
    dense(n, x, transposed(w), bias, n.input(1));
    if (bias) values_[add->output(0)] = values_[n.output(0)];
  }

  // The node that alone takes `value`, when it is an `op`; else null.
  const onnx::NodeProto* only_consumer(const std::string& value, const std::string& op) const {
    if (consumers_.count(value) == 0 || consumers_.at(value) != 1) return nullptr;
    for (const auto& m : file_.model().graph().node())
      for (const auto& in : m.input())
        if (in == value) return m.op_type() == op ? &m : nullptr;
    return nullptr;
  }

  void convert_batchnorm(const onnx::NodeProto& n) {
    const Value& x = tensor(n, 0);
    const int64_t c = x.shape[0];
    for (int k = 1; k <= 4; ++k)
      if (weight(n, k).numel() != c)
        throw NotTaken(
            fmt::format("its input {} does not have one value per channel ({})", k + 1, c));
    OutLayer& l = add_layer(n, "batchnorm", {x.layer}, x.shape, n.input(1));
    // ONNX's momentum weighs the old statistic (0.9), tandem's (as PyTorch's) the batch's (0.1).
    // Printed to float's 6 digits: 1 - 0.9f is 0.100000024, PyTorch's momentum 0.1.
    l.args = {{"eps", float_text(float_attr(n, "epsilon", 1e-5))},
              {"momentum",
               float_text(std::stod(fmt::format("{:.6g}", 1.0 - float_attr(n, "momentum", 0.9))))}};
    l.tensors = {{"weight", weight(n, 1)},
                 {"bias", weight(n, 2)},
                 {"running_mean", weight(n, 3)},
                 {"running_var", weight(n, 4)}};
  }

  OutLayer& activation(const onnx::NodeProto& n, const std::string& type) {
    const Value& x = tensor(n, 0);
    return add_layer(n, type, {x.layer}, x.shape);
  }

  void check_hardsigmoid(const onnx::NodeProto& n) const {
    if (std::abs(float_attr(n, "alpha", 0.2) - 1.0 / 6) > 1e-6 || float_attr(n, "beta", 0.5) != 0.5)
      throw NotTaken(fmt::format("its slope {} and offset {} are not PyTorch's (1/6, 0.5)",
                                 float_attr(n, "alpha", 0.2), float_attr(n, "beta", 0.5)));
  }

  void convert_clip(const onnx::NodeProto& n) {
    const Const* lo = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
    const Const* hi = n.input_size() > 2 ? constant(n.input(2)) : nullptr;
    if ((n.input_size() > 1 && !n.input(1).empty() && !lo) ||
        (n.input_size() > 2 && !n.input(2).empty() && !hi))
      throw NotTaken("its bounds are computed at run time");
    const double min = lo ? lo->values.at(0) : -INFINITY, max = hi ? hi->values.at(0) : INFINITY;
    if (min == 0 && max == 6) {
      activation(n, "relu6");
    } else if (min == 0 && std::isinf(max)) {
      activation(n, "relu");
    } else {
      throw NotTaken(
          fmt::format("it clips to [{}, {}]; tandem has relu6 ([0, 6]) and relu", min, max));
    }
  }

  // x·sigmoid(x) is silu, x·hardsigmoid(x) hardswish (PyTorch's export of SiLU and of Hardswish
  // before opset 14); (x·(erf(x/√2) + 1))·0.5 is gelu; else the product of two layers' outputs.
  void convert_mul(const onnx::NodeProto& n) {
    for (int k = 0; k < 2; ++k) {
      const onnx::NodeProto* gate = producer(n.input(k));
      const std::string& x = n.input(1 - k);
      if (gate && (gate->op_type() == "Sigmoid" || gate->op_type() == "HardSigmoid") &&
          gate->input(0) == x && consumers_.at(n.input(k)) == 1 && layer_of(gate)) {
        OutLayer& l = layers_[static_cast<size_t>(*layer_of(gate))];
        l.type = gate->op_type() == "Sigmoid" ? "silu" : "hardswish";
        retitle(l, n);
        values_[n.output(0)] = values_[gate->output(0)];
        return;
      }
    }
    if (gelu(n)) return;
    const Value& a = tensor(n, 0);
    const Value& b = tensor(n, 1);
    add_layer(n, "multiply", {a.layer, b.layer},
              a.shape.numel() >= b.shape.numel() ? a.shape : b.shape);
  }

  // A layer renamed after the node that completes it (the Mul of silu), where its first name
  // came from the scope of a part (the Sigmoid's).
  void retitle(OutLayer& l, const onnx::NodeProto& n) {
    const std::string name = clean_name(base_name(n, l.type, ""));
    if (name.empty() || name == l.type || used_names_.count(name)) return;
    used_names_.erase(l.name);
    l.name = name;
    used_names_.insert(name);
  }

  const onnx::NodeProto* producer(const std::string& value) const {
    auto it = producer_.find(value);
    return it == producer_.end() ? nullptr : it->second;
  }
  std::optional<int> layer_of(const onnx::NodeProto* n) const {
    auto it = values_.find(n->output(0));
    if (it == values_.end() || it->second.layer < 0) return std::nullopt;
    return it->second.layer;
  }
  bool is_constant(const std::string& value, double want, double tol) const {
    const Const* c = constant(value);
    return c && c->numel() == 1 && std::abs(c->values[0] - want) <= tol;
  }

  // PyTorch's exact GELU at opsets 13 to 17: Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5). The
  // inner nodes became no layer (Div and Erf are refused alone): they are taken back here.
  bool gelu(const onnx::NodeProto& n) {
    for (int k = 0; k < 2; ++k) {
      if (!is_constant(n.input(1 - k), 0.5, 1e-7)) continue;
      const onnx::NodeProto* mul = producer(n.input(k));
      if (!mul || mul->op_type() != "Mul") continue;
      for (int j = 0; j < 2; ++j) {
        const onnx::NodeProto* add = producer(mul->input(j));
        const std::string& x = mul->input(1 - j);
        if (!add || add->op_type() != "Add") continue;
        for (int i = 0; i < 2; ++i) {
          const onnx::NodeProto* erf = producer(add->input(i));
          if (!erf || erf->op_type() != "Erf" || !is_constant(add->input(1 - i), 1.0, 0)) continue;
          const onnx::NodeProto* div = producer(erf->input(0));
          if (!div || div->input(0) != x) continue;
          const bool scaled =
              (div->op_type() == "Div" && is_constant(div->input(1), M_SQRT2, 1e-6)) ||
              (div->op_type() == "Mul" && is_constant(div->input(1), M_SQRT1_2, 1e-6));
          if (!scaled) continue;
          for (const onnx::NodeProto* part : {div, erf, add, mul}) unrefuse(*part);
          const Value& in = get(x);
          if (in.constant) return false;
          add_layer(n, "gelu", {in.layer}, in.shape);
          return true;
        }
      }
    }
    return false;
  }

  void convert_add(const onnx::NodeProto& n) {
    const Value& a = tensor(n, 0);
    const Value& b = tensor(n, 1);
    if (a.shape != b.shape)
      throw NotTaken(fmt::format("it adds a {} and a {} (tandem's add takes one shape)",
                                 a.shape.str(), b.shape.str()));
    add_layer(n, "add", {a.layer, b.layer}, a.shape);
  }

  void convert_concat(const onnx::NodeProto& n) {
    if (n.input_size() == 1) return alias(n, n.input(0));
    std::vector<int> ins;
    const Value& first = tensor(n, 0);
    const int rank = first.shape.rank() + 1;
    int64_t axis = int_attr(n, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis != 1) throw NotTaken("it joins along an axis other than the channels'");
    std::vector<int64_t> out = first.shape.dims();
    out[0] = 0;
    for (int k = 0; k < n.input_size(); ++k) {
      const Value& v = tensor(n, k);
      ins.push_back(v.layer);
      out[0] += v.shape[0];
    }
    add_layer(n, "concat", ins, Shape(out));
  }

  void convert_pool(const onnx::NodeProto& n) {
    const bool max = n.op_type() == "MaxPool";
    const Value& x = image(n);
    const std::vector<int64_t> kernel = ints_attr(n, "kernel_shape", {});
    const std::vector<int64_t> strides = ints_attr(n, "strides", {1, 1});
    if (kernel.size() != 2 || strides.size() != 2) throw NotTaken("it is not 2-D");
    if (ints_attr(n, "dilations", {1, 1}) != std::vector<int64_t>{1, 1})
      throw NotTaken("it dilates its window");
    if (max && int_attr(n, "storage_order", 0) != 0) throw NotTaken("its storage_order is 1");
    if (max && n.output_size() > 1 && consumers_.count(n.output(1)))
      throw NotTaken("its indices output is used");
    const std::vector<int64_t> pads = pads_of(n, x.shape, kernel, strides, {1, 1});
    if (!max && int_attr(n, "count_include_pad", 0) != 0 && (pads[0] || pads[1]))
      throw NotTaken("its average counts the padding (count_include_pad); tandem's leaves it out");
    if (pads[0] * 2 > kernel[0] || pads[1] * 2 > kernel[1])
      throw NotTaken("it pads more than half its window");
    const bool ceil = int_attr(n, "ceil_mode", 0) != 0;
    std::vector<int64_t> out{x.shape[0], 0, 0};
    for (int a = 0; a < 2; ++a) {
      const int64_t size =
          pool_out_size(x.shape[a + 1], static_cast<int>(kernel[a]), static_cast<int>(strides[a]),
                        static_cast<int>(pads[a]), ceil);
      // ONNX's rule keeps a last window that starts in the end padding, PyTorch's (and tandem's)
      // drops it; where they differ the model is ambiguous.
      const int64_t span = x.shape[a + 1] + 2 * pads[a] - kernel[a];
      const int64_t onnx_size =
          (ceil ? (span + strides[a] - 1) / strides[a] : span / strides[a]) + 1;
      if (size != onnx_size)
        throw NotTaken("its ceil_mode window count differs between ONNX's rule and PyTorch's");
      out[static_cast<size_t>(a + 1)] = size;
    }
    OutLayer& l = add_layer(n, max ? "maxpool" : "avgpool", {x.layer}, Shape(out));
    l.args = {{"kernel", pair_text(kernel)}, {"stride", pair_text(strides)}};
    if (pads != std::vector<int64_t>{0, 0}) l.args.emplace_back("padding", pair_text(pads));
    if (ceil) l.args.emplace_back("ceil_mode", "true");
  }

  // (N, -1) after pooling (x.view(x.size(0), -1)): a flatten.
  void convert_reshape(const onnx::NodeProto& n) {
    const Value& x = tensor(n, 0);
    const Const* s = constant(n.input(1));
    if (!s) throw NotTaken("its shape is computed at run time");
    const std::vector<double>& v = s->values;
    const bool batch_first =
        v.size() == 2 && (v[0] == kBatch || v[0] == 0 || (v[0] == -1 && v[1] != -1) ||
                          (export_batch_ > 0 && v[0] == static_cast<double>(export_batch_)));
    if (!batch_first || !(v[1] == -1 || v[1] == static_cast<double>(x.shape.numel())))
      throw NotTaken("it reshapes other than to (batch, -1), a flatten");
    if (x.shape.rank() == 1) return alias(n, n.input(0));
    add_layer(n, "flatten", {x.layer}, Shape{x.shape.numel()});
  }

  void convert_pad(const onnx::NodeProto& n) {
    const Const* pads = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
    if (!pads) throw NotTaken("its pads are computed at run time");
    for (double p : pads->values)
      if (p != 0) throw NotTaken("it pads its input (as a separate node; tandem pads in layers)");
    alias(n, n.input(0));
  }

  void record(const onnx::NodeProto& n, const std::string& why) {
    Unsupported& u = unsupported_[n.op_type()];
    ++u.count;
    if (u.nodes.size() < 3) u.nodes.push_back(n.name().empty() ? n.output(0) : n.name());
    if (u.why.empty()) u.why = why.empty() ? describe(n) : why;
  }
  // A node's outputs as no layer's: refused (and what takes them is not reported again) or
  // pending (a part of a pattern a later node may take back, else refused at the end).
  void mark(const onnx::NodeProto& n, int state) {
    for (const auto& o : n.output()) {
      Value v;
      v.layer = state;
      values_[o] = v;
    }
  }
  void unrefuse(const onnx::NodeProto& n) {
    pending_.erase(std::remove(pending_.begin(), pending_.end(), &n), pending_.end());
  }

  void throw_unsupported() {
    std::string list;
    int total = 0;
    for (const auto& [op, u] : unsupported_) {
      total += u.count;
      std::string at;
      for (size_t k = 0; k < u.nodes.size(); ++k) at += (k ? ", " : "") + u.nodes[k];
      if (u.count > static_cast<int>(u.nodes.size())) at += ", ...";
      list += fmt::format("\n  {} x{}: {} (at {})", op, u.count, u.why, at);
    }
    throw ConfigError(
        fmt::format("'{}' cannot be imported: {} node{} compute{} what no tandem layer does "
                    "(nothing was written):{}",
                    path_, total, total == 1 ? "" : "s", total == 1 ? "s" : "", list),
        "trainer import takes the operators of classification CNNs that README.md lists");
  }

 private:
  // Why an operator is not taken, in words, with the common cases named.
  std::string describe(const onnx::NodeProto& n) const {
    if (n.op_type() == "Slice") return "a slice of a tensor (e.g. torch.chunk's channel split)";
    const std::string& op = n.op_type();
    if (op == "Transpose") {
      const onnx::NodeProto* before = producer(n.input(0));
      if (before && before->op_type() == "Reshape")
        return "ShuffleNet's channel shuffle (Reshape, Transpose, Reshape)";
      return "a transpose of the tensor's axes";
    }
    if (op == "Softmax") return "a softmax before the model's end";
    return "no tandem layer computes it";
  }

  static constexpr double kBatch = -1e18;  // the batch size, in a folded shape

  const OnnxFile& file_;
  std::string path_;
  int opset_ = 0;
  Shape input_;
  int64_t export_batch_ = -1;
  std::string output_;
  std::map<std::string, Value> values_;
  std::map<std::string, int> consumers_;
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::set<const onnx::NodeProto*> absorbed_;
  std::vector<const onnx::NodeProto*> pending_;
  std::set<std::string> used_names_;
  std::vector<OutLayer> layers_;
  std::map<std::string, Unsupported> unsupported_;
  std::vector<std::string> notes_;
  int folded_convs_ = 0;
};

// The model's metadata where tandem's own export wrote it: its classes and normalization.
std::string metadata(const onnx::ModelProto& m, const std::string& key) {
  for (const auto& e : m.metadata_props())
    if (e.key() == key) return e.value();
  return "";
}

// "0.5,0.25,1": comma-separated numbers, each read whole and finite; nullopt where one is not.
std::optional<std::vector<double>> numbers(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : split(text, ',')) {
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(item, &used);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used != item.size() || !std::isfinite(x)) return std::nullopt;
    out.push_back(x);
  }
  return out;
}

// "[0.5, 0.25]" (export's JSON lists of numbers) -> values; empty where it is not one.
std::vector<float> number_list(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return {};
  const auto v = numbers(text.substr(1, text.size() - 2));
  return v ? std::vector<float>(v->begin(), v->end()) : std::vector<float>{};
}

std::string floats_text(const std::vector<float>& v) {
  std::string s;
  for (float x : v) s += (s.empty() ? "" : ", ") + float_text(x);
  return "[" + s + "]";
}

// --normalize: "imagenet", or "MEAN,...:STD,..." (one value per channel, or one for all).
void parse_normalize(const std::string& text, int64_t channels, std::vector<float>& mean,
                     std::vector<float>& std) {
  if (text == "imagenet") {
    if (channels != 3)
      throw UsageError(fmt::format("--normalize imagenet is for RGB images; the model takes {} "
                                   "channel{}",
                                   channels, channels == 1 ? "" : "s"),
                       "give --normalize MEAN:STD with the model's own values");
    mean = {0.485f, 0.456f, 0.406f};
    std = {0.229f, 0.224f, 0.225f};
    return;
  }
  const size_t colon = text.find(':');
  auto values = [&](const std::string& part) {
    const auto v = numbers(part);
    return v ? std::vector<float>(v->begin(), v->end()) : std::vector<float>{NAN};
  };
  if (colon != std::string::npos) {
    mean = values(text.substr(0, colon));
    std = values(text.substr(colon + 1));
  }
  const auto fits = [&](const std::vector<float>& v) {
    return (v.size() == 1 || static_cast<int64_t>(v.size()) == channels) &&
           std::none_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
  };
  if (colon == std::string::npos || !fits(mean) || !fits(std) ||
      std::any_of(std.begin(), std.end(), [](float x) { return x <= 0; }))
    throw UsageError(
        "--normalize '" + text +
            "' is not 'imagenet' nor MEAN,...:STD,... of one value per "
            "channel (" +
            std::to_string(channels) + ") with every std above 0",
        "e.g. --normalize imagenet, or --normalize 0.5,0.5,0.5:0.25,0.25,0.25 (pixels in [0,1])");
}

std::string config_text(const Importer& im, const std::string& name, const std::string& source,
                        const std::string& producer, const std::vector<float>& mean,
                        const std::vector<float>& std, int64_t classes) {
  std::string y;
  y += fmt::format("# {}: imported by trainer import from {} ({}ONNX opset {}).\n", name, source,
                   producer.empty() ? "" : producer + ", ", im.opset());
  y += fmt::format(
      "# Its weights are in {0}.safetensors beside this file: trainer eval, predict and export\n"
      "# take it with --checkpoint, and training starts from it (train.init below).\n",
      name);
  y += fmt::format("name: {}\n", name);
  y += fmt::format("input: {{shape: {}}}\n", ints_text(im.input_shape().dims()));
  y += "layers:\n";
  const auto& layers = im.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    const OutLayer& l = layers[i];
    std::string args;
    for (const auto& [k, v] : l.args)
      args += fmt::format("{}{}: {}", args.empty() ? "" : ", ", k, v);
    std::string item = fmt::format("{{{}: {{{}}}, name: {}", l.type, args, l.name);
    const bool after_previous = l.inputs.size() == 1 && l.inputs[0] == static_cast<int>(i) - 1;
    if (!after_previous) {
      std::string ins;
      for (int k : l.inputs)
        ins += (ins.empty() ? "" : ", ") +
               (k < 0 ? std::string("input") : layers[static_cast<size_t>(k)].name);
      item += ", inputs: [" + ins + "]";
    }
    y += "  - " + item + "}\n";
  }
  y += "loss: softmax_cross_entropy\n";
  y += "data:\n";
  y +=
      "  # The images to train on: format image_folder with a path (a folder of train/ and test/,\n"
      "  # each of one folder per class), cifar10 or mnist. Until then, random samples of the\n"
      "  # model's input.\n";
  y += "  format: synthetic\n";
  y += fmt::format("  classes: {}\n", classes);
  y += "  train_size: 256\n  test_size: 64\n";
  if (!mean.empty())
    y += fmt::format(
        "  # The normalization the model was trained with, on pixels in [0,1].\n"
        "  normalize: {{mean: {}, std: {}}}\n",
        floats_text(mean), floats_text(std));
  else
    y += "  # No normalization given at import: the model takes pixels in [0,1]. Its training's\n"
         "  # goes here, e.g. normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, "
         "0.225]}\n";
  y += "train:\n";
  y += fmt::format(
      "  # Fine-tuning: from the imported weights, with a small learning rate; train.freeze keeps\n"
      "  # chosen layers as they are (e.g. freeze: {{up_to: NAME}}), and a head of another number\n"
      "  # of classes (a last layer of other units) starts from the seed.\n"
      "  init: {}.safetensors\n",
      name);
  y += "  epochs: 5\n  batch_size: 32\n";
  y += "  optimizer: {type: sgd, lr: 0.001, momentum: 0.9}\n";
  y += "  seed: 42\n";
  return y;
}

}  // namespace

int run_import(const RunRequest& r) {
  if (r.inputs.size() != 1)
    throw UsageError(r.inputs.empty()
                         ? "import needs the ONNX file to read"
                         : "import reads one ONNX file, got " + std::to_string(r.inputs.size()),
                     "e.g. trainer import resnet18.onnx --out models");
  if (r.out_dir.empty())
    throw UsageError("import needs --out DIR, the folder to write the config and weights in",
                     "e.g. trainer import " + r.inputs[0] + " --out models");
  const std::string& path = r.inputs[0];
  std::optional<Shape> shape;
  if (!r.input_shape.empty()) {
    const auto v = numbers(r.input_shape);
    std::vector<int64_t> dims;
    for (double d : v ? *v : std::vector<double>{0}) {
      if (d <= 0 || d != std::floor(d) || d > 1e9)
        throw UsageError("--input-shape '" + r.input_shape + "' is not positive whole numbers",
                         "e.g. --input-shape 3,224,224 (channels, height, width)");
      dims.push_back(static_cast<int64_t>(d));
    }
    shape = Shape(dims);
  }
  const OnnxFile file(path);
  Importer im(file, path, shape);
  im.run();

  const onnx::ModelProto& model = file.model();
  const std::string name = clean_name(fs::path(path).stem().string()).empty()
                               ? std::string("model")
                               : clean_name(fs::path(path).stem().string());
  const int64_t channels = im.input_shape().rank() == 3 ? im.input_shape()[0] : 1;
  std::vector<float> mean, std;
  if (!r.normalize.empty()) {
    parse_normalize(r.normalize, channels, mean, std);
  } else if (model.producer_name() == "tandem" &&
             metadata(model, "normalization") == "before_input") {
    // tandem's own export: the normalization it trained with, as its metadata records.
    mean = number_list(metadata(model, "normalize_mean"));
    std = number_list(metadata(model, "normalize_std"));
    if (mean.size() != std.size()) mean.clear(), std.clear();
    const bool identity = std::all_of(mean.begin(), mean.end(), [](float m) { return m == 0; }) &&
                          std::all_of(std.begin(), std.end(), [](float s) { return s == 1; });
    if (identity) mean.clear(), std.clear();
  }

  const fs::path out(r.out_dir);
  const fs::path yaml = out / (name + ".yaml"), weights = out / (name + ".safetensors");
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw UsageError("--out '" + r.out_dir + "' is a file", "give a folder (new or existing)");
  for (const fs::path& p : {yaml, weights})
    if (fs::exists(p, ec) && !r.force)
      throw UsageError("'" + p.string() + "' already exists",
                       "pass --force to overwrite it, or give another --out folder");

  // The config is checked by building its graph, which also takes the weights.
  const std::string producer =
      model.producer_name().empty()
          ? ""
          : model.producer_name() +
                (model.producer_version().empty() ? "" : " " + model.producer_version());
  const int64_t n_classes = im.classes();
  const std::string text =
      config_text(im, name, fs::path(path).filename().string(), producer, mean, std, n_classes);
  Config config = parse_config(text, fs::absolute(yaml).string());
  Graph graph(config);
  auto backend = create_backend("cpu", BackendOptions{});
  graph.allocate(*backend, 1, config.train.seed);

  std::map<std::string, const Const*> given;
  for (const OutLayer& l : im.layers())
    for (const auto& [suffix, c] : l.tensors) given[l.name + "." + suffix] = &c;
  NamedTensors tensors;
  for (Param* p : graph.params()) tensors.emplace_back(p->name, p->value);
  for (auto& b : graph.buffers()) tensors.push_back(std::move(b));
  for (auto& [tname, t] : tensors) {
    auto it = given.find(tname);
    TANDEM_CHECK(it != given.end(), "import: no weights for " + tname);
    const Const& c = *it->second;
    TANDEM_CHECK(c.numel() == t.numel(), "import: " + tname + " has " + std::to_string(c.numel()) +
                                             " values for " + t.shape().str());
    std::vector<float> host(c.values.begin(), c.values.end());
    for (float v : host)
      if (!std::isfinite(v))
        throw CheckpointError(
            "'" + path + "': weight '" + tname + "' holds a non-finite value (NaN or infinity)",
            "export the model from weights that are all finite");
    backend->upload(t, host.data());
    given.erase(it);
  }
  TANDEM_CHECK(given.empty(), "import: weights of no parameter: " + given.begin()->first);

  if (!fs::exists(out, ec) && !fs::create_directories(out, ec))
    throw UsageError("cannot create the folder '" + r.out_dir + "' (" + ec.message() + ")",
                     "give a folder in a writable place");
  CheckpointMeta meta;
  meta.config_text = text;
  meta.config_file = fs::absolute(yaml).string();
  meta.device = "cpu";
  meta.seed = config.train.seed;
  meta.normalize_mean = mean;
  meta.normalize_std = std;
  meta.batch_size = config.train.batch_size;
  write_checkpoint(weights.string(), tensors, meta);
  if (const std::string failed = replace_file_with(yaml.string(), text); !failed.empty()) {
    fs::remove(weights, ec);
    throw UsageError("cannot write '" + yaml.string() + "': " + failed,
                     "check that the folder is writable and the disk is not full");
  }

  int64_t nodes = model.graph().node_size();
  fmt::print("{}: {}ONNX opset {}, {} nodes\n", path, producer.empty() ? "" : producer + ", ",
             im.opset(), nodes);
  fmt::print("  {} layers, {} parameters, input {}, {} classes\n", graph.layers().size(),
             format_count(static_cast<double>(graph.parameter_count())), im.input_shape().str(),
             n_classes);
  if (!mean.empty())
    fmt::print("  normalization: mean {}, std {} (on pixels in [0,1])\n", floats_text(mean),
               floats_text(std));
  else
    fmt::print("  normalization: none (the model takes pixels in [0,1]; --normalize sets it)\n");
  for (const std::string& note : im.notes()) fmt::print("  note: {}\n", note);
  if (im.folded_convs() > 0)
    fmt::print(
        "  note: {} convolution{} carry a batch normalization folded in by PyTorch's eval-mode "
        "export;\n        to fine-tune with the normalization learning, export with "
        "training=torch.onnx.TrainingMode.PRESERVE\n        and do_constant_folding=False\n",
        im.folded_convs(), im.folded_convs() == 1 ? "" : "s");
  fmt::print("wrote {} and {}\n", yaml.string(), weights.string());
  return 0;
}

}  // namespace tandem
