// train.init: the checkpoint's header matched to the model by name, then its tensors loaded.
#include "engine/init_weights.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "engine/checkpoint.h"
#include "engine/error.h"

namespace tandem {
namespace fs = std::filesystem;

namespace {

// "a, b, c and 4 more".
std::string some_of(const std::vector<std::string>& names, size_t shown = 6) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < shown; ++i) s += (i ? ", " : "") + names[i];
  return names.size() > shown ? s + fmt::format(" and {} more", names.size() - shown) : s;
}

}  // namespace

InitPlan plan_init(const Config& config, const Graph& graph, const std::string& config_text) {
  InitPlan plan;
  plan.from = config.train.init_from.empty() ? "train.init" : config.train.init_from;
  std::error_code ec;
  if (!fs::exists(config.train.init, ec))
    throw ConfigError(
        fmt::format("{}: checkpoint '{}' does not exist", plan.from, config.train.init),
        plan.from == "--init"
            ? "give the .safetensors checkpoint to start from (a run writes them with "
              "--checkpoint-dir DIR)"
            : "give the .safetensors checkpoint to start from, relative to the config's folder "
              "(a run writes them with --checkpoint-dir DIR)");
  plan.path = find_checkpoint(config.train.init);  // a folder: its newest
  CheckpointContents file;
  try {
    file = read_checkpoint_contents(plan.path);
  } catch (const CheckpointError& e) {
    throw CheckpointError(plan.from + ": " + e.cause(),
                          "give a .safetensors checkpoint written by trainer (--checkpoint-dir) "
                          "to start from");
  }
  std::map<std::string, Shape> in_file;
  for (const auto& [name, shape] : file.tensors) {
    in_file.emplace(name, shape);
    plan.optimizer_state = plan.optimizer_state || name.starts_with("optimizer.");
  }
  const std::vector<std::pair<std::string, Shape>> model = graph.tensor_shapes();
  plan.model_tensors = static_cast<int64_t>(model.size());
  std::vector<std::string> model_names;
  for (const auto& [name, shape] : model) {
    model_names.push_back(name);
    auto it = in_file.find(name);
    if (it == in_file.end())
      plan.fresh.push_back(name);
    else if (it->second != shape)
      plan.reshaped.push_back(
          fmt::format("{} ({} here, {} in the file)", name, shape.str(), it->second.str()));
    else
      plan.taken.push_back(name);
  }
  if (plan.taken.empty()) {
    std::vector<std::string> file_names;
    for (const auto& [name, shape] : file.tensors)
      if (!name.starts_with("optimizer.")) file_names.push_back(name);
    throw ConfigError(
        fmt::format("{}: none of the tensors of '{}' fits the model by name and shape (the file "
                    "has {}; {})",
                    plan.from, plan.path, file_names.empty() ? "none" : some_of(file_names, 4),
                    plan.reshaped.empty()
                        ? "the model " + some_of(model_names, 4)
                        : "of the model's names, other shapes: " + some_of(plan.reshaped, 4)),
        "start from a checkpoint of a model whose layers have the same names ('name:' sets a "
        "layer's), or leave train.init out to start from the seed's weights");
  }
  auto meta = [&](const char* key) {
    auto it = file.meta.find(key);
    return it == file.meta.end() ? std::string() : it->second;
  };
  const std::string file_config = meta("config"), file_config_path = meta("config_file");
  // A run's checkpoint (it holds optimizer state), not weights alone (trainer import's).
  plan.same_config =
      plan.optimizer_state &&
      ((!config_text.empty() && file_config == config_text) ||
       (!file_config_path.empty() && file_config_path == fs::absolute(config.file, ec).string()));
  return plan;
}

void load_init(const InitPlan& plan, Graph& graph) {
  NamedTensors tensors;
  for (Param* p : graph.params()) tensors.emplace_back(p->name, p->value);
  for (auto& b : graph.buffers()) tensors.push_back(std::move(b));
  const std::vector<std::string> loaded = read_matching_tensors(plan.path, tensors);
  // The file was read twice: it may have been replaced in between (a run writing it).
  if (loaded != plan.taken)
    throw CheckpointError(
        fmt::format("{}: checkpoint '{}' changed while it was read", plan.from, plan.path),
        "start again once the run that writes it is done");
}

std::string init_report(const InitPlan& plan) {
  std::string out = fmt::format("Init   {} of the model's {} tensors taken from {}\n",
                                plan.taken.size(), plan.model_tensors, plan.path);
  if (!plan.reshaped.empty())
    out += fmt::format("       skipped, of another shape (drawn from the seed): {}\n",
                       some_of(plan.reshaped));
  if (!plan.fresh.empty())
    out += fmt::format("       not in the file (drawn from the seed): {}\n", some_of(plan.fresh));
  out += fmt::format("       a new run: epoch 1, a fresh optimizer{}\n",
                     plan.optimizer_state ? " (the file's optimizer state is not read)" : "");
  if (plan.same_config)
    out += fmt::format(
        "       note: it is a checkpoint of this config; to continue that run instead, "
        "--resume {}\n",
        plan.path);
  return out;
}

}  // namespace tandem
