// The trainer on image folders as a user meets it: the bundled PNG sample trains, a corrupt image
// stops the run with its path and exit status 4, export-images refuses a used folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/tools/cli_util.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

TEST(ImageFolderCli, BundledPngSampleTrainsLeNet) {
  CliResult r = run_trainer("--config " + source_path("configs/lenet_png.yaml") +
                            " --epochs 2 --threads 2 --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  // The sample's 10 classes learnt from its PNGs: far above the 10% of scrambled pixels.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("test accuracy ([0-9.]+)%"))) << r.out;
  EXPECT_GT(std::stod(m[1]), 50.0) << r.out;
}

// The PNG sample given to the MNIST config: the error says what the folder is and which format
// reads it.
TEST(ImageFolderCli, AnImageFolderGivenToAnMnistConfigNamesTheFormatThatReadsIt) {
  const std::string png = source_path("datasets/mnist-png-sample");
  CliResult r =
      run_trainer("--config " + source_path("configs/lenet.yaml") + " --data " + png + " --quiet");
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("; the folder holds train/ and test/ folders, an image folder"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: for images in class folders set data: {format: image_folder, path: " +
                       png + "} (configs/lenet_png.yaml is LeNet on one)"),
            std::string::npos)
      << r.out;
}

TEST(ImageFolderCli, CorruptImageStopsTheRunNamingItWithExitStatusFour) {
  const fs::path dir = fs::path(::testing::TempDir()) / "tandem_bad_pngs";
  fs::remove_all(dir);
  fs::copy(source_path("datasets/mnist-png-sample"), dir, fs::copy_options::recursive);
  std::ofstream(dir / "test" / "7" / "broken.png") << "not an image";
  CliResult r = run_trainer("--config " + source_path("configs/lenet_png.yaml") + " --data " +
                            dir.string() + " --epochs 1 --quiet");
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("error: the image '" + (dir / "test" / "7" / "broken.png").string()),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hint: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Epoch"), std::string::npos) << "training started: " << r.out;
  fs::remove_all(dir);
}

TEST(ImageFolderCli, ExportImagesRefusesAFolderInUse) {
  CliResult r = run_trainer("export-images --config " + source_path("configs/lenet.yaml") +
                            " --out " + source_path("datasets/mnist-png-sample"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is not empty"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem::test
