// trainer import: tandem's own export imports back to the same model and weights; bad files,
// opsets, external data, open input sizes and operators no layer computes are refused, each in
// one sentence, with nothing written. (PyTorch's own models: tests/tools/import_torchvision.py.)
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/checkpoint.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"
#include "tools/checkpoint_model.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using test::run_trainer;

// A small classifier as an ONNX model: Conv (8x3x3) -> Relu -> GlobalAveragePool -> Flatten ->
// Gemm (4 classes), input (1, 3, 8, 8), weights in the file.
onnx::ModelProto small_model(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("test");
  onnx::OperatorSetIdProto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("small");
  onnx::ValueInfoProto* in = g->add_input();
  in->set_name("x");
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 3, 8, 8}) t->mutable_shape()->add_dim()->set_dim_value(d);
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.f, 0.3f);
  auto weight = [&](const std::string& name, std::vector<int64_t> dims) {
    onnx::TensorProto* w = g->add_initializer();
    w->set_name(name);
    w->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) w->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) w->add_float_data(normal(gen));
  };
  weight("conv.weight", {8, 3, 3, 3});
  weight("conv.bias", {8});
  weight("fc.weight", {4, 8});
  weight("fc.bias", {4});
  auto node = [&](const std::string& op, const std::string& name, std::vector<std::string> inputs,
                  const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(out);
    return n;
  };
  onnx::NodeProto* conv = node("Conv", "/conv/Conv", {"x", "conv.weight", "conv.bias"}, "c");
  onnx::AttributeProto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int p : {1, 1, 1, 1}) pads->add_ints(p);
  node("Relu", "/relu/Relu", {"c"}, "r");
  node("GlobalAveragePool", "/pool/GlobalAveragePool", {"r"}, "p");
  node("Flatten", "/Flatten", {"p"}, "f");
  onnx::NodeProto* gemm = node("Gemm", "/fc/Gemm", {"f", "fc.weight", "fc.bias"}, "logits");
  onnx::AttributeProto* trans = gemm->add_attribute();
  trans->set_name("transB");
  trans->set_type(onnx::AttributeProto::INT);
  trans->set_i(1);
  onnx::ValueInfoProto* out = g->add_output();
  out->set_name("logits");
  return m;
}

std::string write_model(const std::string& name, const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  const std::string path = test::test_temp_dir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// `trainer import FILE --out DIR` of a model that must be refused: its exit status, the message
// holding `says`, and nothing written.
void expect_refused(const std::string& file, int status, const std::string& says,
                    const std::string& flags = "") {
  const std::string out = test::fresh_dir("out");
  const test::CliResult r = run_trainer("import " + file + " --out " + out + flags);
  EXPECT_EQ(r.status, status) << r.out;
  EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2)
      << "one sentence and a hint: " << r.out;
  EXPECT_FALSE(fs::exists(out)) << "written: " << out;
}

TEST(ImportOnnx, ASmallModelImportsAndPredicts) {
  const std::string file = write_model("small.onnx", small_model());
  const std::string out = test::fresh_dir("out");
  test::CliResult r = run_trainer("import " + file + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("5 layers"), std::string::npos) << r.out;
  const std::string yaml = out + "/small.yaml";
  std::ifstream f(yaml);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("{conv2d: {filters: 8, kernel: 3, padding: 1}, name: conv}"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("{dense: {units: 4}, name: fc}"), std::string::npos) << text.str();
  // The config trains as written (synthetic data until a data set is given).
  r = run_trainer("summary --config " + yaml);
  EXPECT_EQ(r.status, 0) << r.out;
  // Importing again is refused unless --force.
  r = run_trainer("import " + file + " --out " + out);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("already exists"), std::string::npos) << r.out;
  EXPECT_EQ(run_trainer("import " + file + " --out " + out + " --force").status, 0);
}

TEST(ImportOnnx, AFileThatIsNotOnnxOrIsTruncatedIsRefused) {
  const std::string text = test::write_temp_file("notes.onnx", "name: not a model\n");
  expect_refused(text, 7, "is not an ONNX model");
  std::string bytes;
  small_model().SerializeToString(&bytes);
  const std::string cut = test::test_temp_dir() + "cut.onnx";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_refused(cut, 7, "is not an ONNX model");
  expect_refused(test::test_temp_dir() + "absent.onnx", 2, "does not exist");
}

TEST(ImportOnnx, AnOpsetOutside13To17IsRefused) {
  expect_refused(write_model("old.onnx", small_model(12)), 3, "is of ONNX opset 12");
  expect_refused(write_model("new.onnx", small_model(18)), 3, "is of ONNX opset 18");
}

TEST(ImportOnnx, AnInitializerWhoseSizeDisagreesWithItsShapeIsRefused) {
  onnx::ModelProto m = small_model();
  m.mutable_graph()->mutable_initializer(1)->add_float_data(1.f);  // conv.bias: 9 values for 8
  expect_refused(write_model("bad_size.onnx", m), 7, "tensor 'conv.bias' of shape [8] holds 9");
}

// External data: a file beside the model is read; a missing one, or a location outside the
// model's folder (../, an absolute path) is refused before anything is read from it.
TEST(ImportOnnx, ExternalDataIsReadOnlyFromTheModelsFolder) {
  auto external = [](const std::string& location) {
    onnx::ModelProto m = small_model();
    onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_float_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    onnx::StringStringEntryProto* e = w->add_external_data();
    e->set_key("location");
    e->set_value(location);
    return m;
  };
  const std::string dir = test::test_temp_dir();
  {
    std::ofstream data(dir + "weights.bin", std::ios::binary);
    const std::vector<float> values(8 * 3 * 3 * 3, 0.25f);
    data.write(reinterpret_cast<const char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
  const std::string out = test::fresh_dir("out");
  const test::CliResult r =
      run_trainer("import " + write_model("ext.onnx", external("weights.bin")) + " --out " + out);
  EXPECT_EQ(r.status, 0) << r.out;
  expect_refused(write_model("ext_missing.onnx", external("absent.bin")), 7, "does not exist");
  expect_refused(write_model("ext_up.onnx", external("../weights.bin")), 7,
                 "outside the model's folder");
  expect_refused(write_model("ext_abs.onnx", external(dir + "weights.bin")), 7,
                 "outside the model's folder");
}

TEST(ImportOnnx, AnOpenInputSizeNeedsInputShape) {
  onnx::ModelProto m = small_model();
  auto* shape =
      m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(2)->set_dim_param("height");
  shape->mutable_dim(3)->set_dim_param("width");
  const std::string file = write_model("open.onnx", m);
  expect_refused(file, 3, "the input's size is left open (3, height, width)");
  const std::string out = test::fresh_dir("out");
  const test::CliResult r =
      run_trainer("import " + file + " --out " + out + " --input-shape 3,16,16");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("input [3, 16, 16]"), std::string::npos) << r.out;
}

TEST(ImportOnnx, OperatorsNoLayerComputesAreAllNamedWithTheirNodes) {
  onnx::ModelProto m = small_model();
  onnx::GraphProto* g = m.mutable_graph();
  // Relu -> Floor and Relu -> Ceil before the pooling: two operators, each named with its node.
  onnx::NodeProto* relu = g->mutable_node(1);
  relu->set_output(0, "r0");
  for (const auto& [op, in, out] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Floor", "r0", "r1"}, {"Ceil", "r1", "r"}}) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name("/odd/" + op);
    n->add_input(in);
    n->add_output(out);
  }
  // Nodes in topological order: the two new ones after the Relu.
  auto* nodes = g->mutable_node();
  std::rotate(nodes->begin() + 2, nodes->end() - 2, nodes->end());
  const std::string out = test::fresh_dir("out");
  const test::CliResult r = run_trainer("import " + write_model("odd.onnx", m) + " --out " + out);
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("Floor x1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/odd/Floor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Ceil x1"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ImportOnnx, NormalizeIsKeptInTheConfigAndTheCheckpoint) {
  const std::string file = write_model("norm.onnx", small_model());
  const std::string out = test::fresh_dir("out");
  test::CliResult r =
      run_trainer("import " + file + " --out " + out + " --normalize 0.5,0.25,0.75:0.2,0.3,0.4");
  ASSERT_EQ(r.status, 0) << r.out;
  const CheckpointMeta meta = read_checkpoint_meta(out + "/norm.safetensors");
  EXPECT_EQ(meta.normalize_mean, (std::vector<float>{0.5f, 0.25f, 0.75f}));
  EXPECT_EQ(meta.normalize_std, (std::vector<float>{0.2f, 0.3f, 0.4f}));
  EXPECT_NE(meta.config_text.find("normalize: {mean: [0.5, 0.25, 0.75], std: [0.2, 0.3, 0.4]}"),
            std::string::npos)
      << meta.config_text;
  r = run_trainer("import " + file + " --out " + test::fresh_dir("out2") + " --normalize 1,2");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--normalize '1,2' is not"), std::string::npos) << r.out;
}

// tandem's own export, imported: the same layers (types, names, shapes) and bit-identical
// weights and running statistics, so the same predictions.
class ImportRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ImportRoundTrip, ExportThenImportGivesTheSameModelAndWeights) {
  register_everything();
  const std::string name = GetParam();
  const std::string dir = test::fresh_dir("ckpt");
  std::string config_text;
  {
    std::ifstream f(test::source_path("configs/" + name + ".yaml"));
    std::stringstream s;
    s << f.rdbuf();
    config_text = s.str();
  }
  // Two steps on small synthetic data, so that batch normalization's statistics are not the
  // identity.
  const Config original = parse_config(config_text, "x.yaml");
  std::string shape;
  for (int64_t d : original.input.dims()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  const size_t data_at = config_text.find("\ndata:");
  const std::string small =
      config_text.substr(0, data_at) + "\ndata: {format: synthetic, shape: [" + shape +
      "], classes: 10, train_size: 32, test_size: 8, seed: 5}\n"
      "train: {epochs: 1, batch_size: 16, optimizer: {type: sgd, lr: 0.01, momentum: 0.9}}\n";
  const std::string config = test::write_temp_file(name + ".yaml", small);
  test::CliResult r = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_trainer("export --checkpoint " + dir + " --onnx " + dir + "/" + name + ".onnx");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string out = test::fresh_dir("imported");
  r = run_trainer("import " + dir + "/" + name + ".onnx --out " + out);
  ASSERT_EQ(r.status, 0) << r.out;

  RunRequest a, b;
  a.checkpoint = dir;
  b.checkpoint = out + "/" + name + ".safetensors";
  CheckpointModel trained = load_checkpoint_model(a, "predict");
  CheckpointModel imported = load_checkpoint_model(b, "predict");
  const auto& la = trained.graph->layers();
  const auto& lb = imported.graph->layers();
  ASSERT_EQ(la.size(), lb.size()) << r.out;
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_EQ(la[i]->type(), lb[i]->type()) << "layer " << i + 1;
    EXPECT_EQ(la[i]->name(), lb[i]->name()) << "layer " << i + 1;
    EXPECT_EQ(la[i]->output_shape(), lb[i]->output_shape()) << la[i]->name();
  }
  NamedTensors ta, tb;
  for (Param* p : trained.graph->params()) ta.emplace_back(p->name, p->value);
  for (auto& t : trained.graph->buffers()) ta.push_back(t);
  for (Param* p : imported.graph->params()) tb.emplace_back(p->name, p->value);
  for (auto& t : imported.graph->buffers()) tb.push_back(t);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t k = 0; k < ta.size(); ++k) {
    EXPECT_EQ(ta[k].first, tb[k].first);
    std::vector<float> va(static_cast<size_t>(ta[k].second.numel())),
        vb(static_cast<size_t>(tb[k].second.numel()));
    trained.backend->download(va.data(), ta[k].second);
    imported.backend->download(vb.data(), tb[k].second);
    EXPECT_EQ(va, vb) << ta[k].first;
  }
  EXPECT_EQ(imported.meta.normalize_mean, trained.config.data.mean);
  EXPECT_EQ(imported.meta.normalize_std, trained.config.data.std);
  std::vector<uint8_t> images(static_cast<size_t>(3 * original.input.numel()));
  std::mt19937 gen(7);
  for (uint8_t& v : images) v = static_cast<uint8_t>(gen() & 255);
  EXPECT_EQ(predict_logits(trained, images), predict_logits(imported, images));
}

INSTANTIATE_TEST_SUITE_P(Configs, ImportRoundTrip,
                         ::testing::Values("lenet", "mlp", "cifar_bn", "cifar_resnet"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A fuzz target's find: a tensor whose shape announces 2 billion values over 18 was sized by its
// shape first (16 GiB of doubles). It is refused by its data's size before anything is allocated:
// here with the trainer's address space held to 4 GiB (not under ASan, which reserves more).
TEST(ImportOnnx, ATensorWhoseShapeOutgrowsItsDataIsRefusedBeforeAllocating) {
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;
#else
  const std::string limit = "ulimit -v 4194304 &&";
#endif
  const std::string model =
      test::source_path("tests/fuzz/regressions/onnx/tensor-shape-larger-than-its-data.onnx");
  auto r = test::run_trainer_with(
      limit, "import " + model + " --force --out " + test::fresh_dir("outgrown"));
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("is damaged: tensor 'conv2d_1.weight' of shape [2, 1056914421] holds 18 "
                       "values, not 2113828842"),
            std::string::npos)
      << r.out;
}

// A fuzz target's find: a convolution of stride 0 divided by zero computing its output size. A
// window's kernel, strides, dilations and pads are checked first, and the node is refused.
TEST(ImportOnnx, AConvolutionOfStrideZeroIsRefusedByName) {
  const std::string model = test::source_path("tests/fuzz/regressions/onnx/conv-stride-zero.onnx");
  auto r = test::run_trainer("import " + model + " --force --out " + test::fresh_dir("stride0"));
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("its window (kernel [3, 3], strides [0, 1], dilations [1, 1]) is out of "
                       "range"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tandem
