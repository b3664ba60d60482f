// Where a training step's first non-finite value (NaN or Inf) appeared, for the error that stops
// the run and the line that reports a skipped step.
#pragma once

#include <cstdint>
#include <string>

#include "engine/error.h"

namespace tandem {

struct OptimizerConfig;

class Backend;
class Graph;
class TrainStep;

// True when every parameter gradient of the last backward is finite (one pass over them).
bool gradients_finite(Graph& graph, Backend& backend);
// "" when every weight is finite; else names the first that is not: "the weights dense_1.weight
// hold 12 non-finite values".
std::string nonfinite_weights(Graph& graph, Backend& backend);

// Diagnoses the step that TrainStep::compute(n, step) has just run, before any update, while its
// batch is still in the buffers: the input batch, then every weight, then the step run again
// (the same masks) with the first non-finite layer output or gradient named in pass order.
// Returns a phrase for a message: "the input batch holds 3 non-finite values (check
// data.normalize)", "the weights dense_1.weight hold 12 non-finite values: an earlier update made
// them so", "first non-finite value: output of dense_2 (layer 4, dense), 48 of 48 values".
std::string locate_nonfinite(TrainStep& step, int64_t n, uint64_t step_id);

// How locate_nonfinite's phrase starts when the input batch itself holds the value: the data or
// its normalisation is at fault, not the learning rate.
inline constexpr const char* kNonfiniteInput = "the input batch holds";

// The error of a non-finite step that stops the run: its cause, and what to try: a tenth of the
// learning rate `lr` the step had (and no more than the optimizer's usual one), or a finite
// data.normalize where the input itself was not finite.
NumericsError nonfinite_error(const OptimizerConfig& opt, double lr, std::string cause);

// A loss in a message: "NaN", "infinite" or "2.3026".
std::string loss_text(double loss);

}  // namespace tandem
