// Communicator: the processes of one data-parallel run, each with its own device and its own
// share of every epoch's batches, and the sums that keep their weights equal.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/backend.h"

namespace tandem {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;        // 0 .. size()-1; rank 0 prints and writes the files
  virtual int size() const = 0;        // processes in the run
  virtual int local_rank() const = 0;  // among the processes on this host (picks the GPU)
  virtual int local_size() const = 0;
  // In place: data[i] becomes the sum of data[i] over every process, the same on each.
  virtual void sum(float* data, size_t n) = 0;
  virtual void sum(double* data, size_t n) = 0;
  // Root's `bytes` bytes at data, copied to every other process's data.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Ends every process of the run with `code` (one process failed while the others may wait).
  [[noreturn]] virtual void abort(int code) = 0;
  // What starts and connects the processes ("Open MPI 4.1.4"); empty for a single process.
  virtual std::string library() const { return {}; }
};

// The run of one process: every sum is the value itself.
class SingleProcess : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void sum(float*, size_t) override {}
  void sum(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  [[noreturn]] void abort(int code) override;
};

// This process's run: the processes mpirun (or another MPI launcher) started, or this one alone.
Communicator& world();

// Joins the run this process was started in: MPI when a launcher started it (its environment
// says so) and the build has MPI; else a single process. Throws UsageError when a launcher
// started several processes and this build has no MPI (each would train alone). Call once, first.
void join_world(int* argc, char*** argv);
// Leaves the run cleanly (MPI_Finalize), after the last collective of every process.
void leave_world();
// The MPI this build runs data-parallel training with ("Open MPI v4.1.4"); empty: none.
std::string mpi_library();

// The sums and broadcasts of one run's tensors (gradients, batch-norm statistics, weights) over
// its processes: by the backend's own library in device memory when every process's backend has
// one (NCCL between GPUs), else through host memory and the communicator. Construction is
// collective: every process of comm makes one, at the same point of the run.
class TensorSums {
 public:
  TensorSums(Communicator& comm, Backend& backend);
  ~TensorSums();
  TensorSums(const TensorSums&) = delete;
  TensorSums& operator=(const TensorSums&) = delete;
  // In place: every tensor (fp32) becomes the sum over the processes of its values times that
  // process's `weight` (its samples over the step's; 0 adds nothing, whatever the tensor holds).
  void sum(const std::vector<Tensor*>& tensors, double weight = 1.0);
  // Process 0's values of the tensors, on every process.
  void broadcast(const std::vector<Tensor*>& tensors);
  // What carries them: "NCCL 2.28.9, in device memory"; "Open MPI v4.1.4" (a CPU's); "Open MPI
  // v4.1.4, through host memory" (a device's, for fallback_reason()).
  std::string path() const;
  // Why the backend's own library does not (empty when it does, or the backend has none).
  const std::string& fallback_reason() const { return fallback_reason_; }

 private:
  Communicator& comm_;
  Backend& backend_;
  std::unique_ptr<DeviceSums> device_;
  std::string fallback_reason_;
  std::vector<float> staging_;  // the host side of the sums without device_
};

}  // namespace tandem
