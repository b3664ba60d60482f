// trainer export-images: writes the config's data set as an image folder of PNG files.
#include <fmt/format.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <filesystem>

#include "datasets/dataset.h"
#include "engine/atomic_file.h"
#include "engine/error.h"
#include "tools/app.h"

namespace tandem {

namespace fs = std::filesystem;

namespace {

// Folder names that sort like the labels, so that reading the folder back gives the same labels:
// the class names themselves when they already sort that way, else "07-name".
std::vector<std::string> class_folders(const std::vector<std::string>& names) {
  if (std::is_sorted(names.begin(), names.end()) &&
      std::adjacent_find(names.begin(), names.end()) == names.end())
    return names;
  const size_t width = std::to_string(names.size() - 1).size();
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i)
    out.push_back(fmt::format("{:0{}}-{}", i, width, names[i]));
  return out;
}

// Writes up to `limit` samples per class (every sample when limit <= 0) as DIR/CLASS/INDEX.png,
// INDEX the sample's position in the split, zero-padded so that file names sort in that order.
// Returns the count written.
int64_t write_split(const Dataset& d, const std::string& dir, int64_t limit) {
  const Shape& s = d.sample_shape;
  const int c = static_cast<int>(s[0]), h = static_cast<int>(s[1]), w = static_cast<int>(s[2]);
  const std::vector<std::string> folders = class_folders(d.class_names);
  const size_t width = std::max<size_t>(5, std::to_string(d.size()).size());
  const size_t numel = static_cast<size_t>(s.numel());
  std::vector<int64_t> per_class(folders.size(), 0);
  std::vector<uint8_t> chw(numel), hwc(numel);
  int64_t written = 0;
  for (int64_t i = 0; i < d.size(); ++i) {
    const int32_t label = d.labels[i];
    if (limit > 0 && per_class[label] >= limit) continue;
    read_samples(d, &i, 1, chw.data());
    // The engine holds planes (CHW); PNG rows interleave the channels (HWC).
    for (int k = 0; k < c; ++k)
      for (int p = 0; p < h * w; ++p)
        hwc[static_cast<size_t>(p) * c + k] = chw[static_cast<size_t>(k) * h * w + p];
    // A class folder only where the split has samples of it: an empty one would not read back.
    std::error_code ec;
    if (per_class[label] == 0) fs::create_directories(fs::path(dir) / folders[label], ec);
    if (ec)
      throw DataError("cannot create the folder '" + (fs::path(dir) / folders[label]).string() +
                          "': " + ec.message(),
                      "check that the folder is writable and the disk is not full");
    const std::string path =
        (fs::path(dir) / folders[label] / fmt::format("{:0{}}.png", i, width)).string();
    // Encoded in memory, then written under a temporary name and renamed: a run stopped while
    // exporting leaves no half-written image for a training run to read.
    std::string png;
    const auto append = [](void* to, void* data, int size) {
      static_cast<std::string*>(to)->append(static_cast<const char*>(data),
                                            static_cast<size_t>(size));
    };
    const std::string failed = stbi_write_png_to_func(append, &png, w, h, c, hwc.data(), w * c)
                                   ? replace_file_with(path, png, /*synced=*/false)
                                   : "encoding failed";
    if (!failed.empty())
      throw DataError("cannot write '" + path + "': " + failed,
                      "check that the folder is writable and the disk is not full");
    ++per_class[label];
    ++written;
  }
  return written;
}

}  // namespace

int run_export_images(const RunRequest& r) {
  if (r.out_dir.empty())
    throw UsageError("export-images needs --out DIR",
                     "e.g. trainer export-images --config configs/lenet.yaml --out my-images");
  if (r.limit_per_class < 0 || r.test_limit_per_class < 0)
    throw UsageError("--limit-per-class must be 0 (every sample) or more",
                     "e.g. --limit-per-class 30,10");
  std::error_code ec;
  if (fs::exists(r.out_dir, ec) && !fs::is_empty(r.out_dir, ec))
    throw UsageError("the output folder '" + r.out_dir + "' is not empty",
                     "give --out a new folder, or remove the old one first");
  const Config config = load_config_with_overrides(r);
  // Labels are written as they are: the model's class count does not matter here.
  const DataSplits data = load_data(config.data, config.input, 0);
  const Shape& s = data.train.sample_shape;
  if (s.rank() != 3 || s[0] < 1 || s[0] > 4)
    throw DataError("the " + data.train.name + " samples are " + s.str() +
                        ", not images of 1 to 4 channels (C, H, W)",
                    "set data.shape to [C, H, W] (synthetic data), or export an image data set");
  // Written into a temporary folder beside --out and renamed at the end, so that a failure
  // midway leaves no folder that looks like a whole export.
  fs::path out = fs::path(r.out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "dir/"
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const fs::path tmp = parent / fmt::format(".{}.export-tmp", out.filename().string());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec)
    throw UsageError("--out " + r.out_dir + ": cannot create a folder in " + parent.string() +
                         " (" + ec.message() + ")",
                     "give --out a folder in a writable place");
  int64_t train = 0, test = 0;
  try {
    train = write_split(data.train, (tmp / "train").string(), r.limit_per_class);
    test = write_split(data.test, (tmp / "test").string(), r.test_limit_per_class);
    // --out is new or empty (checked above), and may be the working directory itself.
    fs::create_directories(out, ec);
    for (const char* split : {"train", "test"})
      if (!ec && fs::exists(tmp / split)) fs::rename(tmp / split, out / split, ec);
    if (ec)
      throw UsageError(
          "--out " + r.out_dir + ": cannot move the images into place (" + ec.message() + ")",
          "give --out a new folder");
    fs::remove_all(tmp, ec);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fmt::print("wrote {} train and {} test images of {} ({} classes) to {}/train and {}/test\n",
             train, test, s.str(), data.train.class_names.size(), out.string(), out.string());
  return 0;
}

}  // namespace tandem
