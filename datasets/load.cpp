// load_data: picks the reader for data.format and checks both splits against the model.
#include <string>

#include "datasets/cifar10.h"
#include "datasets/dataset.h"
#include "datasets/mnist.h"
#include "datasets/synthetic.h"
#include "engine/error.h"

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
                        " but the model's input is " + input_shape.str(),
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

}  // namespace

DataSplits load_data(const DataConfig& config, const Shape& input_shape, int classes) {
  DataSplits s;
  const std::string& train = config.train_path;
  const std::string& test = config.test_path.empty() ? config.train_path : config.test_path;
  if (config.format == "synthetic") {
    Shape shape = config.shape.rank() ? config.shape : input_shape;
    s.train = make_synthetic(shape, config.classes, config.train_size, config.seed, true);
    s.test = make_synthetic(shape, config.classes, config.test_size, config.seed, false);
  } else if (config.format == "mnist" || config.format == "cifar10") {
    if (train.empty())
      throw DataError("no folder is given for the " + config.format + " data" + at(config),
                      "set data.path to the folder holding the data set's files (or pass --data)");
    if (config.format == "mnist") {
      s.train = load_mnist(train, true, input_shape, classes);
      s.test = load_mnist(test, false, input_shape, classes);
    } else {
      s.train = load_cifar10(train, true, classes);
      s.test = load_cifar10(test, false, classes);
    }
  } else if (config.format == "image_folder") {
    throw DataError("data format image_folder is not supported yet" + at(config),
                    "convert the images to the MNIST IDX or CIFAR-10 binary layout, or use "
                    "format: synthetic");
  } else {
    throw DataError("unknown data format '" + config.format + "'" + at(config),
                    "use one of: mnist, cifar10, image_folder, synthetic");
  }
  check_against_model(s.train, config, input_shape, classes);
  check_against_model(s.test, config, input_shape, classes);
  return s;
}

}  // namespace tandem
