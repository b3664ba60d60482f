// MNIST / Fashion-MNIST reader: the IDX image and label files of one split, gzipped or not.
//
// IDX layout (big-endian header): images = magic 2051, count, rows, cols, then count*rows*cols
// bytes; labels = magic 2049, count, then count bytes.
#include "datasets/mnist.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "datasets/data_path.h"
#include "datasets/file_io.h"
#include "engine/error.h"

namespace tandem {

namespace {

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension

const char* kHint =
    "download the MNIST IDX files (or Fashion-MNIST's, same layout) and point data.path at the "
    "folder holding train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
    "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz";
const char* kRedownload =
    "download the MNIST IDX files again and point data.path at the folder holding "
    "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
    "t10k-labels-idx1-ubyte.gz";

// The fix for a damaged file: the gzipped copy beside a raw file is read once the raw one is gone.
std::string redownload(const std::string& path) {
  std::error_code ec;
  if (!path.ends_with(".gz") && std::filesystem::exists(path + ".gz", ec))
    return "remove the damaged '" + path + "' to read '" + path + ".gz' beside it, or " +
           kRedownload;
  return kRedownload;
}

std::string find_idx(const std::string& folder, bool train, const std::string& kind,
                     const std::string& what) {
  std::vector<std::string> prefixes =
      train ? std::vector<std::string>{"train"} : std::vector<std::string>{"t10k", "test"};
  std::string stem = kind == "images" ? "-images-idx3-ubyte" : "-labels-idx1-ubyte";
  std::vector<std::string> names;
  std::string looked;
  for (const std::string& p : prefixes) {
    names.push_back(p + stem);
    names.push_back(p + stem + ".gz");
    looked += (looked.empty() ? "" : " or ") + p + stem + "[.gz]";
  }
  std::string path = data_io::find_first(folder, names);
  // An image folder (train/ and test/ of class folders) given to an MNIST config.
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool image_folder = fs::is_directory(fs::path(folder) / "train", ec) &&
                            fs::is_directory(fs::path(folder) / "test", ec);
  if (path.empty())
    throw DataError(
        "no MNIST " + what + " " + kind + " file in '" + folder + "': looked for " + looked +
            (image_folder ? "; the folder holds train/ and test/ folders, an image folder" : ""),
        image_folder ? "for images in class folders set data: {format: image_folder, path: " +
                           folder + "} (configs/lenet_png.yaml is LeNet on one)"
                     : kHint);
  return path;
}

std::string magic_str(uint32_t m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%u (0x%08X)", m, m);
  return buf;
}

// Throws unless `bytes` holds exactly header + payload bytes; a truncated file is reported with
// the record it ends in (records of `record` bytes after a `header`-byte header).
void check_length(const std::string& path, size_t actual, uint64_t expected, uint64_t header,
                  uint64_t record, const std::string& desc) {
  if (actual == expected) return;
  if (actual < expected)
    throw DataError("'" + path + "' is truncated: its header announces " + desc + ", " +
                        std::to_string(expected) + " bytes, but it holds " +
                        std::to_string(actual) + " bytes; it ends at byte offset " +
                        std::to_string(actual) + ", in record " +
                        std::to_string((actual - header) / record),
                    redownload(path));
  throw DataError("'" + path + "' is longer than its header says: " + desc + " make " +
                      std::to_string(expected) + " bytes, but it holds " + std::to_string(actual) +
                      " bytes",
                  redownload(path));
}

}  // namespace

Dataset load_mnist(const std::string& folder, bool train, const Shape& input_shape, int classes,
                   bool keep_pixels, const std::string& from) {
  const std::string what = train ? "train" : "test";
  data_io::require_folder(folder, "MNIST " + what, kHint, from);
  std::string images_path = find_idx(folder, train, "images", what);
  std::string labels_path = find_idx(folder, train, "labels", what);

  // Images: only the header and the length are checked here (every byte is a valid pixel); the
  // pixels are read at their offsets, all at once when kept.
  auto file = std::make_shared<const data_io::RecordFile>(images_path);
  if (file->size() < 16)
    throw DataError("'" + images_path +
                        "' is truncated: an IDX images header needs 16 bytes, it "
                        "holds " +
                        std::to_string(file->size()),
                    redownload(images_path));
  uint8_t img[16];
  file->read(0, 16, img);
  uint32_t magic = data_io::read_be32(img);
  if (magic != kImagesMagic)
    throw DataError("'" + images_path + "' is not an MNIST images file: its magic number is " +
                        magic_str(magic) + ", expected 2051 (IDX unsigned bytes, 3 dimensions)" +
                        (magic == kLabelsMagic ? "; it looks like a labels file" : ""),
                    kHint);
  uint32_t count = data_io::read_be32(img + 4);
  uint32_t rows = data_io::read_be32(img + 8);
  uint32_t cols = data_io::read_be32(img + 12);
  if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536)
    throw DataError("'" + images_path + "' announces images of " + std::to_string(rows) + "x" +
                        std::to_string(cols) + " pixels, which is not a valid image size",
                    redownload(images_path));
  uint64_t pixels = uint64_t{rows} * cols;
  check_length(
      images_path, file->size(), 16 + uint64_t{count} * pixels, 16, pixels,
      std::to_string(count) + " images of " + std::to_string(rows) + "x" + std::to_string(cols));

  Shape shape{1, rows, cols};
  bool flat_ok = input_shape.rank() == 1 && input_shape[0] == static_cast<int64_t>(pixels);
  if (input_shape != shape && !flat_ok)
    throw DataError("the MNIST images in '" + images_path + "' are " + shape.str() +
                        " (1 channel, " + std::to_string(rows) + "x" + std::to_string(cols) +
                        ") but the model's input is " + input_shape.str() +
                        channels_last_note(shape, input_shape),
                    "set the model's input to {shape: " + shape.str() +
                        "} or use a data set of the model's input size");

  // Labels.
  std::vector<uint8_t> lab = data_io::read_file(labels_path);
  if (lab.size() < 8)
    throw DataError("'" + labels_path +
                        "' is truncated: an IDX labels header needs 8 bytes, it "
                        "holds " +
                        std::to_string(lab.size()),
                    redownload(labels_path));
  magic = data_io::read_be32(lab.data());
  if (magic != kLabelsMagic)
    throw DataError("'" + labels_path + "' is not an MNIST labels file: its magic number is " +
                        magic_str(magic) + ", expected 2049 (IDX unsigned bytes, 1 dimension)" +
                        (magic == kImagesMagic ? "; it looks like an images file" : ""),
                    kHint);
  uint32_t label_count = data_io::read_be32(lab.data() + 4);
  check_length(labels_path, lab.size(), 8 + uint64_t{label_count}, 8, 1,
               std::to_string(label_count) + " labels");
  if (label_count != count)
    throw DataError("the MNIST " + what + " files disagree: '" + images_path + "' holds " +
                        std::to_string(count) + " images but '" + labels_path + "' holds " +
                        std::to_string(label_count) + " labels",
                    "use an images file and the labels file of the same split and release");

  Dataset d;
  d.name = "mnist " + what + " (" + folder + ")";
  d.sample_shape = shape;
  d.labels.resize(count);
  int max_label = 0;
  for (uint32_t i = 0; i < count; ++i) {
    int label = lab[8 + i];
    if (classes > 0 && label >= classes)
      throw DataError("label " + std::to_string(label) + " of record " + std::to_string(i) +
                          " (byte offset " + std::to_string(8 + uint64_t{i}) + ") in '" +
                          labels_path + "' is out of range: the model has " +
                          std::to_string(classes) + " classes (labels 0.." +
                          std::to_string(classes - 1) + ")",
                      "give the last dense layer as many units as the data set has classes, or "
                      "fix the labels file");
    d.labels[i] = label;
    max_label = std::max(max_label, label);
  }
  d.classes = std::max(10, max_label + 1);
  for (int c = 0; c < d.classes; ++c) d.class_names.push_back(std::to_string(c));
  d.read = [file, pixels](int64_t i, uint8_t* out) {
    file->read(16 + static_cast<uint64_t>(i) * pixels, pixels, out);
  };
  if (keep_pixels) cache_samples(d);
  return d;
}

}  // namespace tandem
