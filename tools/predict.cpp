// trainer predict: the top classes of image files, and of folders of them, under a checkpoint.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>

#include "datasets/dataset.h"
#include "datasets/image_folder.h"
#include "engine/error.h"
#include "engine/file_check.h"
#include "engine/json_text.h"
#include "tools/checkpoint_model.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// One command-line input: an image file, or a folder and the images directly in it.
struct Input {
  std::string folder;  // empty for an image file
  std::vector<std::string> files;
};

// An image file as it is; a folder as the image files directly in it, sorted by name (its
// sub-folders are not read: an image folder data set holds one per class).
Input expand(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    throw DataError("'" + path + "' does not exist",
                    std::string("check the path; predict takes image files (") + kImageKinds +
                        ") and folders of them");
  if (!fs::is_directory(st)) {
    // Refused here, by name, before any image is read: a FIFO would hang the read, a device such
    // as /dev/zero would be read without end.
    if (const std::string why = file_problem(path, kMaxImageBytes); !why.empty())
      throw DataError("the image '" + path + "' " + why,
                      std::string("give image files (") + kImageKinds + ") and folders of them");
    return {"", {path}};
  }
  Input in{path, {}};
  std::vector<std::string> sub_folders;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    if (e.is_directory(ec))
      sub_folders.push_back(e.path().filename().string());
    else if (e.is_regular_file(ec) && has_image_extension(e.path().string()))
      in.files.push_back(e.path().string());
  }
  if (ec) throw DataError("the folder '" + path + "' cannot be read: " + ec.message());
  if (in.files.empty()) {
    std::sort(sub_folders.begin(), sub_folders.end());
    throw DataError("the folder '" + path + "' has no image files",
                    sub_folders.empty()
                        ? std::string("predict reads the ") + kImageKinds + " files in a folder"
                        : "predict reads the images directly in a folder, not those in its "
                          "sub-folders: give a sub-folder, e.g. " +
                              (fs::path(path) / sub_folders.front()).string());
  }
  std::sort(in.files.begin(), in.files.end());
  return in;
}

// "3 for 8, 5 for 1": how often each class came first, the most frequent first.
std::string tally(const std::vector<int64_t>& top, const std::vector<std::string>& names) {
  std::map<int64_t, int64_t> count;
  for (int64_t c : top) ++count[c];
  std::vector<std::pair<int64_t, int64_t>> order(count.begin(), count.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [c, n] : order)
    out += fmt::format("{}{} for {}", out.empty() ? "" : ", ", names[c], n);
  return out;
}

// An image file on a line of its own; a folder on a line with its count and how often each class
// came first, then its images by name, indented. Images that did not decode are left out here
// and counted on their folder's line (refuse_failed names them).
void print_results(const std::vector<Input>& inputs, const std::vector<std::string>& results,
                   const std::vector<int64_t>& best, const std::vector<std::string>& failed,
                   const std::vector<std::string>& names) {
  size_t i = 0;
  for (const Input& in : inputs) {
    if (in.folder.empty()) {
      if (failed[i].empty()) fmt::print("{}:{}\n", in.files.front(), results[i]);
      ++i;
      continue;
    }
    const size_t count = in.files.size();
    std::vector<int64_t> tops;
    for (size_t j = i; j < i + count; ++j)
      if (failed[j].empty()) tops.push_back(best[j]);
    const size_t bad = count - tops.size();
    fmt::print("{}{}: {} image{}{}{}\n", in.folder, in.folder.back() == '/' ? "" : "/", count,
               count == 1 ? "" : "s", bad ? fmt::format(", {} not decoded", bad) : "",
               count > 1 && !tops.empty() ? "; top class " + tally(tops, names) : "");
    for (const std::string& file : in.files) {
      if (failed[i].empty())
        fmt::print("  {}:{}\n", fs::path(file).filename().string(), results[i]);
      ++i;
    }
  }
}

// After the others' predictions: the images that did not decode, each with its reason (exit
// status 4, as any bad data).
void refuse_failed(const std::vector<std::string>& files, const std::vector<std::string>& failed) {
  std::vector<size_t> bad;
  for (size_t i = 0; i < files.size(); ++i)
    if (!failed[i].empty()) bad.push_back(i);
  if (bad.empty()) return;
  const std::string hint = std::string("replace or remove ") +
                           (bad.size() == 1 ? "the file" : "those files") + "; predict reads " +
                           kImageKinds + " images";
  if (bad.size() == 1)
    throw DataError("the image '" + files[bad[0]] + "' " + failed[bad[0]] +
                        (files.size() > 1 ? " (the other images' predictions are above)" : ""),
                    hint);
  std::string list;
  for (size_t i : bad) list += fmt::format("\n  '{}' {}", files[i], failed[i]);
  throw DataError(
      fmt::format("{} of {} images did not decode{}:{}", bad.size(), files.size(),
                  bad.size() < files.size() ? " (the others' predictions are above)" : "", list),
      hint);
}

}  // namespace

int run_predict(const RunRequest& r) {
  if (r.inputs.empty())
    throw UsageError(
        "predict needs images",
        "trainer predict --checkpoint FILE image.png [more images or folders of them]");
  if (r.top_k < 1) throw UsageError("--top-k must be at least 1", "e.g. --top-k 3");
  // Batches of the training batch size: a size the model is known to fit in memory.
  CheckpointModel m = load_checkpoint_model(r, "predict");
  std::vector<Input> inputs;
  std::vector<std::string> files;  // every image, in the order printed
  for (const std::string& path : r.inputs) {
    inputs.push_back(expand(path));
    files.insert(files.end(), inputs.back().files.begin(), inputs.back().files.end());
  }
  const int64_t n = static_cast<int64_t>(files.size());
  const Config& config = m.config;
  Graph& graph = *m.graph;
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
  for (int64_t c = static_cast<int64_t>(names.size()); c < classes; ++c)
    names.push_back(std::to_string(c));

  // Each image's top classes, as printed after its name, and the best of them.
  const int64_t k = std::min<int64_t>(r.top_k, classes);
  std::vector<std::string> results(static_cast<size_t>(n));
  std::vector<int64_t> best(static_cast<size_t>(n));
  std::vector<std::string> json(r.json ? static_cast<size_t>(n) : 0);  // --json: a line each
  const int64_t batch = std::min<int64_t>(n, config.train.batch_size);
  const Shape shape = graph.input_shape();
  const int64_t numel = shape.numel();
  check_image_input(shape);
  std::vector<std::string> failed(static_cast<size_t>(n));  // why an image did not decode, or ""
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t b = std::min(batch, n - begin);
    // Decoded like the training data (on every core, as image folders are), then normalised by
    // the same Batcher. An image that does not decode is told after the others' predictions.
    std::vector<uint8_t> images(static_cast<size_t>(b * numel));
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < b; ++i)
      failed[begin + i] = image_problem(files[begin + i], shape, images.data() + i * numel);
    std::vector<int64_t> decoded;  // indices into files
    for (int64_t i = 0; i < b; ++i) {
      if (!failed[begin + i].empty()) continue;
      std::copy_n(images.begin() + i * numel, numel, images.begin() + decoded.size() * numel);
      decoded.push_back(begin + i);
    }
    if (decoded.empty()) continue;
    images.resize(decoded.size() * static_cast<size_t>(numel));
    const std::vector<float> logits = predict_logits(m, images);
    for (size_t i = 0; i < decoded.size(); ++i) {
      const size_t at = static_cast<size_t>(decoded[i]);
      const float* z = logits.data() + i * classes;
      const double top = *std::max_element(z, z + classes);
      std::vector<double> p(static_cast<size_t>(classes));
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += p[c] = std::exp(static_cast<double>(z[c]) - top);
      std::vector<int64_t> order(static_cast<size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int64_t u, int64_t v) { return p[u] > p[v]; });
      std::string& line = results[at];
      for (int64_t j = 0; j < k; ++j)
        line +=
            fmt::format("{} {} {:.2f}%", j ? "," : "", names[order[j]], 100 * p[order[j]] / sum);
      best[at] = order[0];
      if (r.json) {
        // Full float precision (%.9g), so that scripts compare with other frameworks exactly.
        std::string top_k, probs, raw;
        for (int64_t j = 0; j < k; ++j)
          top_k +=
              fmt::format("{}{{\"class\":{},\"index\":{},\"probability\":{:.9g}}}", j ? "," : "",
                          json_string(names[order[j]]), order[j], p[order[j]] / sum);
        for (int64_t c = 0; c < classes; ++c) {
          probs += fmt::format("{}{:.9g}", c ? "," : "", p[c] / sum);
          raw += fmt::format("{}{:.9g}", c ? "," : "", z[c]);
        }
        json[at] =
            fmt::format("{{\"file\":{},\"top\":[{}],\"probabilities\":[{}],\"logits\":[{}]}}",
                        json_string(files[at]), top_k, probs, raw);
      }
    }
  }

  if (r.json) {
    for (size_t i = 0; i < json.size(); ++i)
      if (failed[i].empty()) fmt::print("{}\n", json[i]);
  } else {
    print_results(inputs, results, best, failed, names);
  }
  refuse_failed(files, failed);
  return 0;
}

}  // namespace tandem
