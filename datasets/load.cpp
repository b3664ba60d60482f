// load_data: picks the reader for data.format and checks both splits against the model.
#include <fmt/format.h>

#include <string>

#include "datasets/cifar10.h"
#include "datasets/data_path.h"
#include "datasets/dataset.h"
#include "datasets/image_folder.h"
#include "datasets/mnist.h"
#include "datasets/split.h"
#include "datasets/synthetic.h"
#include "engine/error.h"
#include "engine/progress.h"

namespace tandem {

namespace {

std::string at(const DataConfig& config) {
  return config.where.empty() ? "" : " (" + config.where + ")";
}

// The sample shape must be the model's input, or its flattening when the input is (features).
void check_against_model(const Dataset& d, const DataConfig& config, const Shape& input_shape,
                         int classes) {
  bool flat_ok = input_shape.rank() == 1 && input_shape[0] == d.sample_shape.numel();
  if (d.sample_shape != input_shape && !flat_ok)
    throw DataError("the " + d.name + " samples are " + d.sample_shape.str() +
                        " but the model's input is " + input_shape.str() +
                        channels_last_note(d.sample_shape, input_shape),
                    config.format == "synthetic"
                        ? "set data.shape" + at(config) + " to the model's input, or remove it"
                        : "set the model's input to {shape: " + d.sample_shape.str() +
                              "}, or use data of the model's input size");
  if (classes <= 0) return;
  for (int64_t i = 0; i < d.size(); ++i)
    if (d.labels[i] < 0 || d.labels[i] >= classes)
      throw DataError("label " + std::to_string(d.labels[i]) + " of sample " + std::to_string(i) +
                          " of the " + d.name + " data is out of range: the model has " +
                          std::to_string(classes) + " classes (labels 0.." +
                          std::to_string(classes - 1) + ")",
                      config.format == "synthetic"
                          ? "set data.classes" + at(config) + " to the last layer's units (" +
                                std::to_string(classes) + ")"
                          : "give the last dense layer as many units as the data has classes");
}

// uint8 bytes of both splits' pixels, decoded.
int64_t decoded_bytes(const DataSplits& s) {
  const Dataset& any = s.train.size() ? s.train : s.test;  // the test split alone for eval
  return (s.train.size() + s.test.size()) * any.sample_shape.numel();
}

}  // namespace

DataSplits load_data(const DataConfig& config, const Shape& input_shape, int classes,
                     bool with_train) {
  DataSplits s;
  const std::string& train = config.train_path;
  const std::string& test = config.test_path.empty() ? config.train_path : config.test_path;
  const std::string& test_from = config.test_path.empty() ? config.train_from : config.test_from;
  if (config.format == "synthetic") {
    Shape shape = config.shape.rank() ? config.shape : input_shape;
    if (with_train)
      s.train = make_synthetic(shape, config.classes, config.train_size, config.seed, true);
    s.test = make_synthetic(shape, config.classes, config.test_size, config.seed, false);
  } else if (config.format == "mnist" || config.format == "cifar10") {
    check_data_folder(config, train);
    if (train.empty())
      throw DataError("no folder is given for the " + config.format + " data" + at(config),
                      "set data.path to the folder holding the data set's files (or pass --data)");
    // The record files are checked and opened first; the pixels are read in when both splits fit.
    if (config.format == "mnist") {
      if (with_train)
        s.train = load_mnist(train, true, input_shape, classes, false, config.train_from);
      s.test = load_mnist(test, false, input_shape, classes, false, test_from);
    } else {
      if (with_train) s.train = load_cifar10(train, true, classes, false, config.train_from);
      s.test = load_cifar10(test, false, classes, false, test_from);
    }
    if (fits_cache(decoded_bytes(s), config.cache_mb)) {
      cache_samples(s.train);
      cache_samples(s.test);
    }
  } else if (config.format == "image_folder") {
    if (config.train_path.empty())
      throw DataError("no folder is given for the image_folder data" + at(config),
                      "set data.path to the folder holding train/ and test/ (or pass --data)");
    check_data_folder(config, config.train_path);
    // Counted first, so that the one pass that decodes (and checks) every image keeps the pixels
    // or not.
    const int64_t files =
        count_image_files(config.train_path) + count_image_files(config.test_path);
    const ImageFolderOptions options{config.resize, config.skip_bad,
                                     fits_cache(files * input_shape.numel(), config.cache_mb)};
    if (config.test_path.empty()) {
      // One folder of class sub-folders: the test split is a stratified share of it, drawn from
      // data.seed (not train.seed: runs of other seeds are tested on the same images).
      if (config.test_split <= 0)
        throw DataError(config.train_path +
                            " holds class sub-folders rather than train/ and "
                            "test/, and the config holds no test split out of it",
                        "set data.test_split, e.g. 0.2 for a fifth of each class");
      s.train = load_image_folder(config.train_path, "images", input_shape, classes, options, {},
                                  config.train_from);
      s.test = hold_out(s.train, config.test_split, config.seed, kTestStream, "test");
    } else {
      if (config.test_split > 0)
        throw DataError(fmt::format("data.test_split {:g} holds a test split out of one folder of "
                                    "class sub-folders, and {} gives the test split as {}",
                                    config.test_split, config.test_from, config.test_path),
                        "leave data.test_split out to test on " + config.test_path +
                            ", or point data.path at one folder of class sub-folders");
      s.train = load_image_folder(config.train_path, "train", input_shape, classes, options, {},
                                  config.train_from);
      s.test = load_image_folder(config.test_path, "test", input_shape, classes, options,
                                 s.train.class_names, config.test_from);
    }
  } else {
    throw DataError("unknown data format '" + config.format + "'" + at(config),
                    "use one of: mnist, cifar10, image_folder, synthetic");
  }
  if (with_train || config.format == "image_folder") {
    if (s.train.size() == 0)
      throw DataError("the " + s.train.name + " data holds no samples",
                      "point data.path (or data.train) at a data set with training samples");
    check_against_model(s.train, config, input_shape, classes);
  }
  check_against_model(s.test, config, input_shape, classes);
  s.decoded_bytes = decoded_bytes(s);
  s.cache_mb = config.cache_mb;
  return s;
}

bool fits_cache(int64_t bytes, int64_t cache_mb) {
  return cache_mb >= (INT64_MAX >> 20) || bytes <= (cache_mb << 20);  // no overflow in the shift
}

std::string cache_report(const DataSplits& splits) {
  if (!splits.train.on_the_fly()) return "";
  return fmt::format("Data: {} decoded does not fit data.cache_mb {}: decoding on the fly\n",
                     format_bytes(static_cast<size_t>(splits.decoded_bytes)), splits.cache_mb);
}

std::string class_mapping(const Dataset& data) {
  std::string line;
  bool named = false;
  for (size_t i = 0; i < data.class_names.size(); ++i) {
    named = named || data.class_names[i] != std::to_string(i);
    line += (i ? ", " : "") + std::to_string(i) + "=" + data.class_names[i];
  }
  return named ? "Labels " + line + "\n" : "";
}

std::string skipped_report(const DataSplits& splits) {
  std::string out;
  for (const Dataset* d : {&splits.train, &splits.test}) {
    if (!d->skipped) continue;
    out += "Skipped " + std::to_string(d->skipped) + " image" + (d->skipped == 1 ? "" : "s") +
           " of the " + d->name + " data that do not decode (data.skip_bad)" +
           (d->skipped > static_cast<int64_t>(d->skipped_examples.size())
                ? ", the first " + std::to_string(d->skipped_examples.size()) + ":\n"
                : ":\n");
    for (const std::string& e : d->skipped_examples) out += "  " + e + "\n";
  }
  return out;
}

}  // namespace tandem
