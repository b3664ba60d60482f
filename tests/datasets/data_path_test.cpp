// A data folder that is not there: where it was given, each place looked in, a near name, the
// files the loader takes and the bundled sample.
#include "datasets/data_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "datasets/dataset.h"
#include "engine/config.h"
#include "engine/error.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string load_error(const std::string& config_path) {
  try {
    Config c = load_config(config_path);
    load_data(c.data, c.input, 10);
  } catch (const DataError& e) {
    return e.cause() + "\nhint: " + e.hint();
  }
  return "";
}

TEST(DataPath, AMissingFolderNamesTheLineEveryPlaceTriedAndANearName) {
  const std::string dir = test::fresh_dir("data_path");
  fs::create_directories(dir + "/mnist-data");
  const std::string config = dir + "/x.yaml";
  std::ofstream(config) << "name: x\ninput: {shape: [1, 28, 28]}\nlayers: [flatten, "
                           "dense: {units: 10}]\ndata:\n  format: mnist\n  path: mnist-dta\n";
  const std::string e = load_error(config);
  EXPECT_NE(e.find("data.path (" + config + ":6:9) 'mnist-dta' is no folder here: looked in " +
                   dir + "/mnist-dta (beside the config) and mnist-dta (from the working folder "),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("; did you mean '" + dir + "/mnist-data'?"), std::string::npos) << e;
  EXPECT_NE(e.find("hint: give the folder that holds MNIST's IDX files: train-images-idx3-ubyte "
                   "and train-labels-idx1-ubyte, with t10k-* or test-* for the test split"),
            std::string::npos)
      << e;
}

TEST(DataPath, TheHintNamesTheBundledSampleBesideTheTrainer) {
  const std::string dir = test::fresh_dir("data_path_sample");
  fs::create_directories(dir);
  const std::string config = dir + "/x.yaml";
  std::ofstream(config) << "name: x\ninput: {shape: [1, 28, 28]}\nlayers: [flatten, "
                           "dense: {units: 10}]\ndata: {format: mnist, path: nowhere}\n";
  const test::CliResult r = test::run_trainer("--config " + config);
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("the bundled sample is "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("datasets/mnist-sample"), std::string::npos) << r.out;
}

TEST(DataPath, AFolderThatIsThereIsTheLoadersToCheck) {
  const std::string here = fs::current_path().string();
  DataConfig c;
  c.format = "mnist";
  c.path_given = here;
  EXPECT_NO_THROW(check_data_folder(c, here));
}

}  // namespace
}  // namespace tandem
