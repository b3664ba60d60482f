// trainer eval: a checkpoint's test loss and accuracy equal the run's last epoch; per-class table
// and confusion matrix; bad checkpoints refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

using test::run_trainer;

std::string eval_config() {
  return test::write_dense_config(
      "eval_small",
      {.hidden = {16},
       .classes = 3,
       .data = "train_size: 96, test_size: 60, seed: 2",
       .train = "epochs: 2, batch_size: 16, optimizer: {type: adam, lr: 0.01}, seed: 4"});
}

// Trains eval_config() for one epoch, its checkpoint epoch-1.safetensors in `dir`.
void train_one_epoch(const std::string& dir) {
  const auto r =
      run_trainer("--config " + eval_config() + " --epochs 1 --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.out;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(Eval, ReproducesTheLastEpochsTestFiguresWithPerClassTables) {
  const std::string dir = ::testing::TempDir() + "eval_ckpt";
  std::filesystem::remove_all(dir);
  auto train = run_trainer("--config " + eval_config() + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(train.out, m, std::regex(R"(test accuracy ([0-9.]+)% \(loss ([0-9.]+)\))")))
      << train.out;
  auto eval = run_trainer("eval --checkpoint " + dir);
  ASSERT_EQ(eval.status, 0) << eval.out;
  EXPECT_NE(eval.out.find("epoch-2.safetensors (epoch 2, step 12, trained on cpu"),
            std::string::npos)
      << eval.out;
  EXPECT_NE(eval.out.find("loss " + m[2].str() + "  accuracy " + m[1].str() + "%"),
            std::string::npos)
      << eval.out;
  EXPECT_NE(eval.out.find("Per class:"), std::string::npos);
  EXPECT_NE(eval.out.find("true \\ predicted"), std::string::npos);
  // The confusion matrix's rows hold every test sample once: 60 in all.
  std::smatch row;
  int64_t total = 0;
  std::string rest = eval.out.substr(eval.out.find("Confusion matrix"));
  std::regex line(R"(\n([0-9]+) +([0-9]+) +([0-9]+) +([0-9]+))");
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), line); it != std::sregex_iterator();
       ++it)
    total += std::stoll((*it)[2]) + std::stoll((*it)[3]) + std::stoll((*it)[4]);
  EXPECT_EQ(total, 60) << eval.out;
  // --quiet: the heading and the figures, no tables.
  auto quiet = run_trainer("eval --quiet --checkpoint " + dir);
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  EXPECT_EQ(quiet.out, eval.out.substr(0, eval.out.find("\nPer class:")));
}

// Evaluation reads the test split only: a folder of MNIST's test files alone will do.
TEST(Eval, NeedsOnlyTheTestSplitsFiles) {
  namespace fs = std::filesystem;
  const std::string sample = std::string(TANDEM_SOURCE_DIR) + "/datasets/mnist-sample";
  const std::string config = test::write_temp_file("eval_mnist.yaml", R"(name: eval_mnist
input: {shape: [1, 28, 28]}
layers: [flatten, {dense: {units: 10}}]
data: {format: mnist, path: )" + sample + R"(}
train: {epochs: 1, batch_size: 256, optimizer: {type: adam, lr: 0.01}}
)");
  const std::string dir = ::testing::TempDir() + "eval_mnist_ckpt";
  const std::string test_only = ::testing::TempDir() + "eval_mnist_test_only";
  fs::remove_all(dir);
  fs::remove_all(test_only);
  fs::create_directories(test_only);
  for (const char* f : {"test-images-idx3-ubyte.gz", "test-labels-idx1-ubyte.gz"})
    fs::copy_file(sample + "/" + f, test_only + "/" + f);
  auto train = run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  auto eval = run_trainer("eval --checkpoint " + dir + " --data " + test_only);
  EXPECT_EQ(eval.status, 0) << eval.out;
  EXPECT_NE(eval.out.find("2,000"), std::string::npos) << eval.out;
}

TEST(Eval, ACorruptCheckpointIsRefusedWithExitSeven) {
  const std::string path = test::write_temp_file("eval_bad.safetensors", "not a checkpoint at all");
  auto r = run_trainer("eval --checkpoint " + path);
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("eval_bad.safetensors"), std::string::npos) << r.out;
}

TEST(Eval, NeedsACheckpoint) {
  auto r = run_trainer("eval");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--checkpoint FILE"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// A learning rate that makes the weights overflow at once: the run stops with exit 6, the step,
// the lowered learning rate to try, and the last good checkpoint. (A rate that makes the loss
// grow step by step stops the run as diverging first: tests/tools/run_controls_cli_test.cpp.)
TEST(NanLoss, StopsWithTheStepTheHintAndTheLastGoodCheckpoint) {
  const std::string dir = ::testing::TempDir() + "nan_ckpt";
  std::filesystem::remove_all(dir);
  const std::string config = test::write_dense_config(
      "nan", {.hidden = {16},
              .classes = 3,
              .data = "train_size: 96, test_size: 16, seed: 2",
              .train = "epochs: 30, batch_size: 16, optimizer: {type: sgd, lr: 0.01, momentum: "
                       "0.9}, seed: 4, schedule: {type: step, step: 1, gamma: 1.0e+45}"});
  auto r = test::run_trainer("--config " + config + " --quiet --checkpoint-dir " + dir);
  EXPECT_EQ(r.status, 6) << r.out;
  EXPECT_NE(r.out.find("error: the training loss became"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" at step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: lower the learning rate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the last good checkpoint is " + dir + "/epoch-"), std::string::npos)
      << r.out;
  // The second epoch's first update overflowed the weights; the message names them.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(; the weights dense_[12]\.(weight|bias) hold )"
                                                  R"([0-9]+ non-finite values?: an earlier )"
                                                  R"(update made them so\n)")))
      << r.out;
}

// LeNet on the MNIST sample with a learning rate so high that the first update overflows (at
// --lr 50 the loss grows to 1e11 first, and the run stops as diverging): the error names a layer
// or its weights.
TEST(NanLoss, LeNetNamesWhereTheFirstNonFiniteValueAppeared) {
  auto r = test::run_trainer("--config " + test::source_path("configs/lenet.yaml") +
                             " --quiet --epochs 1 --lr 1e43");
  EXPECT_EQ(r.status, 6) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(error: the training loss became (NaN|infinite) at step [0-9]+ )"
                 R"(\(epoch 1, batch [0-9]+ of [0-9]+\); )"
                 R"((the weights (conv2d|dense)_[12]\.(weight|bias) hold|)"
                 R"(first non-finite value: (output|gradient) of (conv2d|dense|relu|maxpool)_))")))
      << r.out;
  EXPECT_NE(r.out.find("hint: lower the learning rate (it was 1e+43; try --lr 0.01, usual for sgd "
                       "with momentum 0.9)"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

TEST(Predict, GivesTheTopClassesOfEachImage) {
  const std::string dir = ::testing::TempDir() + "predict_ckpt";
  std::filesystem::remove_all(dir);
  auto train = test::run_trainer("--config " + test::source_path("configs/lenet_png.yaml") +
                                 " --epochs 3 --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  std::string images;
  int count = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(test::source_path("datasets/mnist-png-sample/test/1")))
    images.append(" ").append(e.path().string()), ++count;
  auto r = test::run_trainer("predict --checkpoint " + dir + " --top-k 3" + images);
  ASSERT_EQ(r.status, 0) << r.out;
  std::regex line(R"(\.png: (\S+) ([0-9.]+)%, (\S+) ([0-9.]+)%, (\S+) ([0-9.]+)%)");
  int lines = 0, ones = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line);
       it != std::sregex_iterator(); ++it) {
    ++lines;
    ones += (*it)[1] == "1";
    const double p1 = std::stod((*it)[2]), p2 = std::stod((*it)[4]), p3 = std::stod((*it)[6]);
    EXPECT_GE(p1, p2);
    EXPECT_GE(p2, p3);
    EXPECT_LE(p1 + p2 + p3, 100.01);
  }
  EXPECT_EQ(lines, count) << r.out;
  EXPECT_GE(ones, count * 6 / 10) << "most images of a 1 should be called 1:\n" << r.out;
}

// A folder stands for the image files directly in it, by name (byte order), whatever the case of
// their extension; other files and sub-folders are left out. Its line gives the count, then each
// image follows, indented.
TEST(Predict, AFolderPredictsEachImageInIt) {
  namespace fs = std::filesystem;
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  const std::string images = test::fresh_dir("digits");
  fs::create_directories(images + "/more");
  const std::string digit = test::source_path("datasets/mnist-png-sample/test/3/00015.png");
  // c.jpg holds PNG bytes: stb_image goes by the bytes, not the name.
  for (const char* name : {"b.png", "A.PNG", "c.jpg", "more/d.png"})
    fs::copy_file(digit, images + "/" + name);
  std::ofstream(images + "/notes.txt") << "not an image";
  auto r = test::run_trainer("predict --checkpoint " + dir + " --top-k 2 " + images);
  ASSERT_EQ(r.status, 0) << r.out;
  const size_t at = r.out.find(images + "/: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string header =
      r.out.substr(at + images.size(), r.out.find('\n', at) - at - images.size());
  EXPECT_TRUE(std::regex_match(header, std::regex(R"(/: 3 images; top class \S+ for 3)")))
      << header;
  const std::regex line(R"(\n  (\S+): \S+ [0-9.]+%, \S+ [0-9.]+%)");
  std::vector<std::string> listed;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line);
       it != std::sregex_iterator(); ++it)
    listed.push_back((*it)[1]);
  EXPECT_EQ(listed, (std::vector<std::string>{"A.PNG", "b.png", "c.jpg"})) << r.out;
}

// One bad image among good ones: the others' predictions first, then the bad one named with its
// reason, exit status 4. The bad one is the PGM whose height field is not a number, which once
// aborted the process inside the resizer.
TEST(Predict, AFolderWithOneBadImagePrintsTheOthersThenNamesItAndExitsFour) {
  namespace fs = std::filesystem;
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  const std::string images = test::fresh_dir("mixed");
  fs::create_directories(images);
  const std::string digit = test::source_path("datasets/mnist-png-sample/test/3/00015.png");
  for (const char* name : {"a.png", "c.png"}) fs::copy_file(digit, images + "/" + name);
  fs::copy_file(test::source_path("tests/fuzz/regressions/image/pgm-height-not-a-number.pgm"),
                images + "/b.pgm");
  auto r = test::run_trainer("predict --checkpoint " + dir + " " + images);
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find(images + "/: 3 images, 1 not decoded; top class"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n  a.png: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  c.png: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n  b.pgm: "), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("error: the image '" + images + "/b.pgm' has no pixels (its header says 9x0)"),
      std::string::npos)
      << r.out;
}

// A checkpoint whose stored config is damaged is the checkpoint's fault: named, exit status 7.
TEST(Predict, ACheckpointWhoseStoredConfigIsDamagedIsNamed) {
  namespace fs = std::filesystem;
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  const std::string file = dir + "/epoch-1.safetensors";
  std::string bytes = file_bytes(file);
  const size_t at = bytes.find("\\nlayers:");  // in the header's config text, escaped
  ASSERT_NE(at, std::string::npos);
  bytes[at + 7] = 'z';  // "layerz": the same length, so the header stays well-formed
  std::ofstream(file, std::ios::binary) << bytes;
  auto r = test::run_trainer("predict --checkpoint " + file + " " +
                             test::source_path("datasets/mnist-png-sample/test/3/00015.png"));
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(
      r.out.find("error: checkpoint '" + file + "' is unusable: the config it stores is refused: "),
      std::string::npos)
      << r.out;
}

// A stored config that describes a model far larger than the file (16 million units where it had
// 16) is refused before memory is allocated for the model.
TEST(Predict, ACheckpointWhoseStoredModelOutgrowsTheFileIsRefusedBeforeAllocating) {
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  const std::string file = dir + "/epoch-1.safetensors";
  std::string bytes = file_bytes(file);
  // The header: its length (8 bytes, little-endian), then its JSON; tensor offsets count from
  // its end, so a longer header keeps them.
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header = bytes.substr(8, n);
  const size_t at = header.find("units: 16}");
  ASSERT_NE(at, std::string::npos) << header;
  header.replace(at, 10, "units: 16000000}");
  n = header.size();
  std::ofstream(file, std::ios::binary)
      << std::string(reinterpret_cast<const char*>(&n), 8) << header << bytes.substr(8 + n - 6);
  auto r = test::run_trainer("predict --checkpoint " + file + " " +
                             test::source_path("datasets/mnist-png-sample/test/3/00015.png"));
  EXPECT_EQ(r.status, 7) << r.out;
  EXPECT_NE(r.out.find("error: checkpoint '" + file +
                       "' is unusable: the model its config "
                       "describes has "),
            std::string::npos)
      << r.out;
}

TEST(Predict, AFolderWithoutImagesIsADataError) {
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  const std::string empty = test::fresh_dir("empty");
  std::filesystem::create_directories(empty + "/3");
  std::ofstream(empty + "/notes.txt") << "not an image";
  auto r = test::run_trainer("predict --checkpoint " + dir + " " + empty);
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("error: the folder '" + empty + "' has no image files"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: predict reads the images directly in a folder, not those in its "
                       "sub-folders: give a sub-folder, e.g. " +
                       empty + "/3"),
            std::string::npos)
      << r.out;
}

TEST(Predict, AMissingInputIsADataError) {
  const std::string dir = test::fresh_dir("ckpt");
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  auto r = test::run_trainer("predict --checkpoint " + dir + " no-such-digit.png");
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("error: 'no-such-digit.png' does not exist"), std::string::npos) << r.out;
}

TEST(Predict, ANonImageIsADataError) {
  const std::string dir = ::testing::TempDir() + "predict_bad_ckpt";
  std::filesystem::remove_all(dir);
  ASSERT_NO_FATAL_FAILURE(train_one_epoch(dir));
  const std::string text = test::write_temp_file("not_an_image.png", "plain text");
  auto r = test::run_trainer("predict --checkpoint " + dir + " " + text);
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("not_an_image.png"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
