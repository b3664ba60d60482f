// What the train and bench runners (tools/app.cpp, tools/bench.cpp) share: the cores a process
// may use, device lists and their GPUs started ahead, and a few ways of saying things.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/trainer.h"
#include "tools/app.h"

namespace tandem {

int host_cores();
// The cores this process may run on (a launcher such as mpirun may bind it to fewer).
int allowed_cores();
// The 1-minute load average, or -1 where the system does not say.
double load_average();
// Before timed work (bench, training side by side): other work on the cores (a `load` average of
// half the `cores` or more) and more CPU threads than cores make its figures low and noisy.
std::vector<std::string> machine_warnings(const Config& config,
                                          const std::vector<DeviceSpec>& devices, double load,
                                          int cores);
// After the devices of a list trained: "" on a quiet machine, else a note that the side-by-side
// times were measured under a `load` average of half the `cores` or more.
std::string load_note(double load, int cores);
// The cores of this host over the run's processes on it (all of them for a single process), and
// no more than the process is bound to.
int cores_per_process();
// data.workers: auto: the cores that `compute` threads leave free (0: they take every core), up
// to 8.
int free_cores(int compute);

// A count in SI units for tables: "1.2M", "340".
std::string si(double v);

// Pairs --precision's list with the devices: one precision is every run's (the config's, set by
// load_config_with_overrides); several run the one device in each, or pair with as many devices.
// In a list of several precisions each label names its run's ("cpu bf16").
std::vector<DeviceSpec> with_precisions(std::vector<DeviceSpec> devices,
                                        const std::vector<std::string>& precisions);
// The --device list, then its precisions (with_precisions). "all" is the CPU, then each GPU when
// the GPU backend can run here, else the CPU alone and the one line that says why there is none.
std::vector<DeviceSpec> parse_devices(const RunRequest& r);

// The cause of a failure on one device of a list, with its hint, for the table's notes.
std::string reason_of(const Error& e);

// A device list's GPUs start before any device runs, and every device's precision (its own, else
// `config_precision`) is checked, so that one that cannot run here is told at once rather than
// after the devices before it (a CPU run of many epochs). By list position: the started backend,
// or why it cannot run; CPU entries stay empty (each starts in its turn).
struct Started {
  std::unique_ptr<Backend> backend;
  std::string reason;  // not empty: it cannot run
};
std::vector<Started> start_gpus(const std::vector<DeviceSpec>& devices,
                                const std::function<BackendOptions(const DeviceSpec&)>& options,
                                const std::string& config_precision);

// A run's "Device" rows: the backend's, less a "bf16: no" row where the run is not in bf16 (that
// row is for trainer devices, and for a run that asks for bf16).
InfoRows run_device_rows(const Backend& backend, const std::string& precision);

// --log-placement's table: the library primitive or algorithm behind each layer's ops.
void print_placement(const std::vector<LayerProfile>& rows, const Backend& backend,
                     const std::string& device);

// The model table a run starts with: each layer's name, output shape, parameters and FLOPs per
// sample (and its inputs in a branching model), and the total.
std::string model_table(const Graph& g);
// "Params 431,080 trainable, 0 non-trainable; 1.64 MiB (fp32)", under the model table.
std::string parameter_line(const Graph& g);

// A device list's exit status: 0 when every device ran, else partial (some ran) or device.
int exit_status(size_t ran, size_t total);

}  // namespace tandem
