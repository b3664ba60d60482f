// The message for a data folder that is not there: where it was given, every place looked in,
// a near name, the files the format's loader takes, and the bundled sample.
#include "datasets/data_path.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "engine/config.h"
#include "engine/error.h"

namespace tandem {
namespace fs = std::filesystem;

namespace {

// What the format's loader reads in the folder.
std::string accepted_files(const std::string& format) {
  if (format == "mnist")
    return "MNIST's IDX files: train-images-idx3-ubyte and train-labels-idx1-ubyte, with "
           "t10k-* or test-* for the test split (gzipped or not)";
  if (format == "cifar10")
    return "CIFAR-10's binary files: data_batch_1.bin .. data_batch_5.bin and test_batch.bin "
           "(or their folder cifar-10-batches-bin/)";
  return "train/ and test/ folders with a sub-folder of images per class, or one folder of class "
         "sub-folders with data.test_split";
}

// The entry of `folder` whose name most likely misspells `name`, or "".
std::string near_name(const fs::path& folder, const std::string& name) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder.empty() ? fs::path(".") : folder, ec))
    if (e.is_directory(ec)) names.push_back(e.path().filename().string());
  return closest_name(name, names);
}

// The data sets bundled with tandem, found beside the trainer's build folder; "" when the
// trainer was copied elsewhere.
std::string bundled(const std::string& format) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::string sample = format == "image_folder" ? "mnist-png-sample" : "mnist-sample";
  for (const fs::path& root : {exe.parent_path().parent_path(), exe.parent_path()}) {
    const fs::path p = root / "datasets" / sample;
    if (fs::is_directory(p, ec)) {
      const fs::path rel = p.lexically_proximate(fs::current_path(ec));
      return rel.string().size() < p.string().size() ? rel.string() : p.string();
    }
  }
  return "";
}

}  // namespace

void check_data_folder(const DataConfig& config, const std::string& folder) {
  std::error_code ec;
  if (config.path_given.empty() || folder.empty() || fs::exists(folder, ec)) return;
  const fs::path given(config.path_given);
  std::vector<fs::path> tried;
  if (!config.path_at.empty() && given.is_relative()) {
    const std::string file = config.path_at.substr(0, config.path_at.find(':'));
    tried.push_back((fs::path(file).parent_path() / given).lexically_normal());
  }
  tried.push_back(given.lexically_normal());
  if (tried.size() == 2 && tried[0] == tried[1]) tried.pop_back();
  for (const fs::path& t : tried)
    if (fs::exists(t, ec)) return;  // there, but without this split: the loader says what lacks
  std::string places;
  for (size_t i = 0; i < tried.size(); ++i) {
    const bool beside = i == 0 && tried.size() == 2;
    places += fmt::format("{}{} ({})", i == 0 ? "" : " and ", tried[i].string(),
                          beside ? "beside the config"
                          : given.is_absolute()
                              ? "as given"
                              : "from the working folder " + fs::current_path(ec).string());
  }
  std::string guess;
  for (const fs::path& t : tried) {
    const std::string name = t.filename().string();
    if (const std::string near = near_name(t.parent_path(), name); !near.empty()) {
      guess = (t.parent_path() / near).string();
      break;
    }
  }
  const std::string where =
      config.path_at.empty() ? "--data" : "data.path (" + config.path_at + ")";
  const std::string sample = bundled(config.format);
  throw DataError(
      fmt::format("{} '{}' is no folder here: looked in {}{}", where, config.path_given, places,
                  did_you_mean(guess)),
      fmt::format("give the folder that holds {}{}", accepted_files(config.format),
                  sample.empty() ? "" : fmt::format("; the bundled sample is {}", sample)));
}

std::string channels_last_note(const Shape& samples, const Shape& input) {
  const Shape& s = samples;
  if (input.rank() != 3 || s.rank() != 3 || s[0] == s[2] || input != Shape{s[1], s[2], s[0]})
    return "";
  return ", which looks channels-last (Keras' [H, W, C]); tandem takes [C, H, W]";
}

}  // namespace tandem
