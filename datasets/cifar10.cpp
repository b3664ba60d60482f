// CIFAR-10 reader: the binary batches (3073-byte records: a label byte, then 3x32x32 CHW bytes).
#include "datasets/cifar10.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "datasets/file_io.h"
#include "engine/error.h"

namespace tandem {

namespace {

constexpr int64_t kPixels = 3 * 32 * 32;
constexpr int64_t kRecord = 1 + kPixels;

const char* kHint =
    "download the CIFAR-10 binary version and point data.path at the folder holding "
    "data_batch_1.bin .. data_batch_5.bin and test_batch.bin";

}  // namespace

Dataset load_cifar10(const std::string& folder, bool train, int classes, bool keep_pixels,
                     const std::string& from) {
  const std::string what = train ? "train" : "test";
  data_io::require_folder(folder, "CIFAR-10 " + what, kHint, from);
  std::vector<std::string> names;
  if (train)
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  else
    names.push_back("test_batch.bin");

  // The archive unpacks into cifar-10-batches-bin/: accept the folder above it too.
  std::string dir = folder;
  std::string nested = data_io::join(folder, "cifar-10-batches-bin");
  std::error_code ec;
  if (data_io::find_first(folder, {names[0]}).empty() && std::filesystem::is_directory(nested, ec))
    dir = nested;

  std::string missing;
  int n_missing = 0;
  for (const std::string& name : names)
    if (data_io::find_first(dir, {name}).empty()) {
      missing += (missing.empty() ? "" : ", ") + name;
      ++n_missing;
    }
  // An image folder (train/ and test/ of class folders) given to a CIFAR-10 config.
  const bool image_folder = std::filesystem::is_directory(data_io::join(folder, "train"), ec) &&
                            std::filesystem::is_directory(data_io::join(folder, "test"), ec);
  if (n_missing)
    throw DataError(
        "the CIFAR-10 " + what + " data in '" + dir +
            "' is incomplete: " + (n_missing == 1 ? "batch " : "batches ") + missing +
            (n_missing == 1 ? " is" : " are") + " missing" +
            (image_folder ? "; the folder holds train/ and test/ folders, an image folder" : ""),
        image_folder
            ? "for images in class folders set data: {format: image_folder, path: " + folder + "}"
            : kHint);

  Dataset d;
  d.name = "cifar10 " + what + " (" + folder + ")";
  d.sample_shape = Shape{3, 32, 32};
  d.classes = 10;
  d.class_names = {"airplane", "automobile", "bird",  "cat",  "deer",
                   "dog",      "frog",       "horse", "ship", "truck"};
  // Each file's records are checked here; the pixels are read at their offsets, all at once
  // when kept. first[k]: the index of file k's first sample.
  std::vector<std::shared_ptr<const data_io::RecordFile>> files;
  std::vector<int64_t> first;
  std::vector<uint8_t> chunk;
  for (const std::string& name : names) {
    std::string path = data_io::join(dir, name);
    auto file = std::make_shared<const data_io::RecordFile>(path);
    int64_t size = static_cast<int64_t>(file->size());
    if (size == 0 || size % kRecord != 0)
      throw DataError("'" + path + "' holds " + std::to_string(size) + " bytes, not a whole " +
                          "number of 3073-byte CIFAR-10 records (" +
                          std::to_string(size / kRecord) + " records and " +
                          std::to_string(size % kRecord) + " bytes over; record " +
                          std::to_string(size / kRecord) + " is cut short at byte offset " +
                          std::to_string(size) + ")",
                      std::string("download the file again (it is truncated or not a CIFAR-10 "
                                  "binary batch); ") +
                          kHint);
    int64_t n = size / kRecord;
    constexpr int64_t kChunkRecords = 1024;
    for (int64_t r = 0; r < n; ++r) {
      if (r % kChunkRecords == 0) {
        chunk.resize(static_cast<size_t>(std::min(kChunkRecords, n - r) * kRecord));
        file->read(static_cast<uint64_t>(r * kRecord), chunk.size(), chunk.data());
      }
      const uint8_t* rec = chunk.data() + (r % kChunkRecords) * kRecord;
      int label = rec[0];
      int limit = classes > 0 && classes < 10 ? classes : 10;
      if (label >= limit)
        throw DataError(
            "label " + std::to_string(label) + " of record " + std::to_string(r) +
                " (byte offset " + std::to_string(r * kRecord) + ") in '" + path +
                "' is out of range: " +
                (label >= 10 ? std::string("CIFAR-10 labels are 0..9")
                             : "the model has " + std::to_string(classes) + " classes (labels 0.." +
                                   std::to_string(classes - 1) + ")"),
            label >= 10 ? std::string("the file is corrupt or not CIFAR-10 (CIFAR-100 "
                                      "records are 3074 bytes); ") +
                              kHint
                        : "give the last dense layer 10 units");
      d.labels.push_back(label);
    }
    first.push_back(d.size() - n);
    files.push_back(std::move(file));
  }
  d.read = [files, first](int64_t i, uint8_t* out) {
    const size_t k =
        static_cast<size_t>(std::upper_bound(first.begin(), first.end(), i) - first.begin() - 1);
    files[k]->read(static_cast<uint64_t>((i - first[k]) * kRecord + 1), kPixels, out);
  };
  if (keep_pixels) cache_samples(d);
  return d;
}

}  // namespace tandem
