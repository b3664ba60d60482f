// trainer export: a checkpoint's model as an ONNX file, built and checked with the ONNX library.
#pragma once

#include <string>

#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/graph.h"

namespace tandem {

// The opsets written: 13 (read by every ONNX Runtime since 1.8) up to 17, the newest the ONNX
// library tandem builds with (1.12) can check. The IR version is 8 whatever the opset.
constexpr int kOnnxMinOpset = 13, kOnnxMaxOpset = 17, kOnnxDefaultOpset = 13;
constexpr int kOnnxIrVersion = 8;

struct OnnxExportOptions {
  int opset = kOnnxDefaultOpset;
  bool softmax = false;  // output "probabilities" (softmax of the logits) instead of "logits"
  // The graph takes pixels in [0,1] and applies data.normalize itself (Sub, Div); otherwise it
  // takes what tandem's layers take, (pixel - mean) / std, and the metadata says so.
  bool fold_normalization = false;
};

// The ONNX model of `graph` (allocated on `backend`, its weights and running statistics read back
// from there) as serialized bytes, after onnx::checker and strict shape inference accepted it.
// `config` gives the name and data.normalize (the checkpoint's values where it computed them),
// `meta` the class names and where the weights came from. A layer ONNX cannot express exactly as
// tandem computes it throws ConfigError naming it.
std::string onnx_model_bytes(Graph& graph, Backend& backend, const Config& config,
                             const CheckpointMeta& meta, const OnnxExportOptions& options);

}  // namespace tandem
