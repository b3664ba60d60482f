// trainer predict: the top classes of image files under a checkpoint's model.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "datasets/dataset.h"
#include "datasets/image_folder.h"
#include "engine/error.h"
#include "tools/checkpoint_model.h"

namespace tandem {

int run_predict(const RunRequest& r) {
  if (r.inputs.empty())
    throw UsageError("predict needs images",
                     "trainer predict --checkpoint FILE image.png [more images]");
  if (r.top_k < 1) throw UsageError("--top-k must be at least 1", "e.g. --top-k 3");
  const int64_t n = static_cast<int64_t>(r.inputs.size());
  CheckpointModel m = load_checkpoint_model(r, "predict", n);
  const Config& config = m.config;
  Graph& graph = *m.graph;
  Backend& backend = *m.backend;
  const int64_t classes = graph.classes();
  // Class names from the checkpoint; for older checkpoints from the data set when it is at hand;
  // else the class indices.
  std::vector<std::string> names = m.meta.class_names;
  if (names.empty()) {
    try {
      names = load_data(config.data, config.input, static_cast<int>(classes)).train.class_names;
    } catch (const DataError&) {
    }
  }
  for (int64_t c = static_cast<int64_t>(names.size()); c < classes; ++c) names.push_back(std::to_string(c));

  // Decoded like the training data, then normalised by the same Batcher.
  Dataset images;
  images.name = "images";
  images.sample_shape = graph.input_shape();
  images.classes = static_cast<int>(classes);
  const int64_t numel = images.sample_shape.numel();
  images.images.resize(static_cast<size_t>(n * numel));
  for (int64_t i = 0; i < n; ++i) decode_image(r.inputs[i], images.sample_shape, images.images.data() + i * numel);
  images.labels.assign(static_cast<size_t>(n), 0);
  Batcher src(images, n, false, 0, config.data.mean, config.data.std);
  std::vector<float> x(static_cast<size_t>(n * numel)), logits(static_cast<size_t>(n * classes));
  std::vector<int32_t> unused(static_cast<size_t>(n));
  src.fill(0, x.data(), unused.data());
  Tensor input = graph.input().prefix(n);
  backend.upload(input, x.data());
  Context ctx{backend, false, config.train.seed, 0};
  backend.download(logits.data(), graph.forward(ctx, n));

  const int64_t k = std::min<int64_t>(r.top_k, classes);
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * classes;
    const double top = *std::max_element(z, z + classes);
    std::vector<double> p(static_cast<size_t>(classes));
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += p[c] = std::exp(static_cast<double>(z[c]) - top);
    std::vector<int64_t> order(static_cast<size_t>(classes));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::string line = r.inputs[i] + ":";
    for (int64_t j = 0; j < k; ++j)
      line += fmt::format("{} {} {:.2f}%", j ? "," : "", names[order[j]], 100 * p[order[j]] / sum);
    fmt::print("{}\n", line);
  }
  return 0;
}

}  // namespace tandem
