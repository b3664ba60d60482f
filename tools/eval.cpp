// trainer eval: a checkpoint's loss, accuracy, per-class accuracy and confusion matrix on the
// test split, on any device (the weights are host-side in the file).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "datasets/dataset.h"
#include "engine/error.h"
#include "engine/progress.h"
#include "engine/report.h"
#include "tools/checkpoint_model.h"

namespace tandem {

int run_eval(const RunRequest& r) {
  CheckpointModel m = load_checkpoint_model(r, "eval");
  const std::string& path = m.path;
  const CheckpointMeta& meta = m.meta;
  const Config& config = m.config;
  Graph& graph = *m.graph;
  Backend& backend = *m.backend;
  const DeviceSpec& device = m.device;
  const int64_t classes = graph.classes();
  DataSplits data;
  try {
    data = load_data(config.data, config.input, static_cast<int>(classes), /*with_train=*/false);
  } catch (const DataError& e) {
    throw DataError(e.cause(), e.hint() + (e.hint().empty() ? "" : "; ") +
                                   "give the data with --data DIR, or the config with --config FILE");
  }
  const Dataset& test = data.test.size() > 0 ? data.test : data.train;

  const int64_t batch = config.train.batch_size;
  Batcher src(test, batch, false, config.train.seed, config.data.mean, config.data.std);
  const int64_t sample = graph.input_shape().numel();
  std::vector<float> images(static_cast<size_t>(batch * sample));
  std::vector<float> logits(static_cast<size_t>(batch * classes));
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<int64_t> confusion(static_cast<size_t>(classes * classes), 0);  // [true][predicted]
  double loss_sum = 0;
  int64_t seen = 0, correct = 0;
  Context ctx{backend, false, config.train.seed, 0};
  src.start_epoch(0);
  for (int64_t b = 0; b < src.batches_per_epoch(); ++b) {
    const int64_t n = src.fill(b, images.data(), labels.data());
    Tensor x = graph.input().prefix(n);
    backend.upload(x, images.data());
    Tensor out = graph.forward(ctx, n);
    backend.download(logits.data(), out);
    for (int64_t k = 0; k < n; ++k) {
      const float* z = logits.data() + k * classes;
      const int64_t pred = std::max_element(z, z + classes) - z;
      const double top = z[pred];
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c]) - top);
      loss_sum += std::log(sum) + top - z[labels[k]];  // softmax cross-entropy, stable
      ++confusion[static_cast<size_t>(labels[k] * classes + pred)];
      correct += pred == labels[k];
    }
    seen += n;
  }
  if (seen == 0) throw DataError("the test split of " + test.name + " is empty");

  auto name_of = [&](int64_t c) {
    return c < static_cast<int64_t>(test.class_names.size()) ? test.class_names[c] : std::to_string(c);
  };
  fmt::print("{} (epoch {}, step {}, trained on {}, tandem {}) on {}, {}: {} sample{}\n", path,
             meta.epoch, format_count(static_cast<double>(meta.step)), meta.device, meta.version,
             device.label, test.name, format_count(static_cast<double>(seen)),
             seen == 1 ? "" : "s");
  fmt::print("loss {}  accuracy {} ({} of {})\n", format_loss(loss_sum / static_cast<double>(seen)),
             format_accuracy(static_cast<double>(correct) / static_cast<double>(seen)),
             format_count(static_cast<double>(correct)), format_count(static_cast<double>(seen)));
  if (r.quiet) return 0;
  std::vector<Row> per_class;
  Row header{"true \\ predicted"};
  for (int64_t c = 0; c < classes; ++c) header.push_back(name_of(c));
  std::vector<Row> matrix;
  for (int64_t t = 0; t < classes; ++t) {
    int64_t total = 0;
    Row row{name_of(t)};
    for (int64_t p = 0; p < classes; ++p) {
      const int64_t v = confusion[static_cast<size_t>(t * classes + p)];
      total += v;
      row.push_back(format_count(static_cast<double>(v)));
    }
    matrix.push_back(row);
    const int64_t hit = confusion[static_cast<size_t>(t * classes + t)];
    per_class.push_back(
        {name_of(t), format_count(static_cast<double>(total)),
         total ? format_accuracy(static_cast<double>(hit) / static_cast<double>(total)) : "-"});
  }
  fmt::print("\nPer class:\n{}\nConfusion matrix (rows: true class, columns: predicted):\n{}",
             format_table({"class", "samples", "accuracy"}, per_class),
             format_table(header, matrix));
  return 0;
}

}  // namespace tandem
