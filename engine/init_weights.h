// train.init (--init): a new run that starts from a checkpoint's weights, matched to the model's
// tensors by name (transfer learning: a trained model's layers, a new head).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/graph.h"

namespace tandem {

struct InitPlan {
  std::string path;  // the checkpoint file
  std::string from;  // where it was given: "FILE:LINE:COL: train.init" or "--init"
  // The model's parameters and running statistics: those the file holds with their shape
  // (taken), those it holds with another shape ("dense_2.weight [5, 500] here, [10, 500] in the
  // file": a new head; they start as drawn from the seed) and those it lacks (start as drawn).
  std::vector<std::string> taken, reshaped, fresh;
  int64_t model_tensors = 0;
  bool optimizer_state = false;  // the file holds optimizer state, which a new run leaves
  bool same_config = false;      // a checkpoint of this config: --resume would continue it
};

// Matches config.train.init against the model's tensors (Graph::tensor_shapes), reading the
// file's header only, before anything is allocated or trained. Throws ConfigError when the file
// does not exist or none of its tensors matches, CheckpointError when it is no checkpoint. A
// folder stands for its newest checkpoint. `config_text`: the config file's text, to tell a
// checkpoint of this very config (empty: not compared).
InitPlan plan_init(const Config& config, const Graph& graph, const std::string& config_text);

// Loads the plan's tensors into the allocated graph.
void load_init(const InitPlan& plan, Graph& graph);

// What the run takes, a few lines for the start-up summary ("Init   6 of the model's 8 tensors
// taken from FILE", what it skips, a note for a checkpoint of this config).
std::string init_report(const InitPlan& plan);

}  // namespace tandem
