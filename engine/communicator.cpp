// The run's processes: a single one, or MPI's (engine/mpi_world.cpp), and tensor sums over them.
#include "engine/communicator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace tandem {

#if TANDEM_WITH_MPI
std::unique_ptr<Communicator> start_mpi_world(int* argc, char*** argv);  // engine/mpi_world.cpp
void end_mpi_world();
std::string mpi_library_version();
#endif

std::string mpi_library() {
#if TANDEM_WITH_MPI
  return mpi_library_version();
#else
  return "";
#endif
}

namespace {

std::unique_ptr<Communicator>& world_slot() {
  static std::unique_ptr<Communicator> w = std::make_unique<SingleProcess>();
  return w;
}

// The processes a launcher started this one among, from the environment it gives each (Open
// MPI's mpirun; MPICH's, Intel MPI's and Slurm's PMI; a PMIx launcher such as srun --mpi=pmix,
// which names the count only through Slurm); 0 when no launcher started it, 1 when it did and
// the count is unknown (MPI then tells it).
int launched_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  if (std::getenv("PMIX_RANK")) {
    const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
    return tasks ? std::max(1, std::atoi(tasks)) : 1;
  }
  return 0;
}

void warn_host_sums(const Communicator& comm, const std::string& why) {
  spdlog::warn("{}sums over the processes go through host memory: {}",
               comm.rank() ? fmt::format("process {}: ", comm.rank()) : "", why);
}

}  // namespace

void SingleProcess::abort(int code) { std::exit(code); }

Communicator& world() { return *world_slot(); }

void join_world(int* argc, char*** argv) {
  const int launched = launched_processes();
  if (launched == 0) return;
#if TANDEM_WITH_MPI
  world_slot() = start_mpi_world(argc, argv);
#else
  (void)argc, (void)argv;
  if (launched > 1)
    throw UsageError(fmt::format("started by an MPI launcher as one of {} processes, but this "
                                 "build has no MPI: each process would train alone",
                                 launched),
                     "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and rebuild "
                     "tandem, or run the trainer without mpirun");
#endif
}

void leave_world() {
#if TANDEM_WITH_MPI
  if (!world().library().empty()) end_mpi_world();
#endif
  world_slot() = std::make_unique<SingleProcess>();
}

TensorSums::TensorSums(Communicator& comm, Backend& backend) : comm_(comm), backend_(backend) {
  if (comm.size() == 1) return;
  // Every process must take the same path, or the sums would wait for each other forever.
  std::string why_not;
  const bool able = backend.device_sums_available(comm, &why_not);
  double counts[2] = {able ? 1.0 : 0.0, comm.rank() == 0 && able ? 1.0 : 0.0};
  comm.sum(counts, 2);
  if (counts[0] < comm.size()) {
    // Process 0 tells its own reason; another process tells its own when process 0 had none.
    fallback_reason_ = !why_not.empty() ? why_not
                       : able ? "another process cannot sum in device memory (its log says why)"
                              : "";
    if (!fallback_reason_.empty() && (comm.rank() == 0 || (!why_not.empty() && counts[1] > 0)))
      warn_host_sums(comm, fallback_reason_);
    return;
  }
  std::string error;
  try {
    device_ = backend.start_device_sums(comm);
  } catch (const Error& e) {
    error = e.what();
  }
  double started = device_ ? 1 : 0;
  comm.sum(&started, 1);
  if (started < comm.size()) {
    device_.reset();
    fallback_reason_ = !error.empty() ? error
                                      : "the device library could not connect another process "
                                        "(its log says why)";
    if (comm.rank() == 0 || !error.empty()) warn_host_sums(comm, fallback_reason_);
  }
}

TensorSums::~TensorSums() = default;

std::string TensorSums::path() const {
  if (device_) return device_->library() + ", in device memory";
  const std::string library = comm_.library().empty() ? "the communicator" : comm_.library();
  return fallback_reason_.empty() ? library : library + ", through host memory";
}

void TensorSums::sum(const std::vector<Tensor*>& tensors, double weight) {
  if (comm_.size() == 1) return;
  size_t total = 0;
  for (const Tensor* t : tensors) {
    TANDEM_CHECK(t->dtype() == DType::kF32, "only float tensors are summed over processes");
    total += static_cast<size_t>(t->numel());
  }
  if (device_) {
    device_->sum(tensors, weight);
    return;
  }
  if (staging_.size() < total) staging_.resize(total);
  if (weight == 0) {
    // A process without samples this step adds nothing, whatever its buffers hold.
    std::fill(staging_.begin(), staging_.begin() + static_cast<std::ptrdiff_t>(total), 0.f);
  } else {
    size_t at = 0;
    for (const Tensor* t : tensors) {
      backend_.download(staging_.data() + at, *t);
      at += static_cast<size_t>(t->numel());
    }
    if (weight != 1)
      for (size_t i = 0; i < total; ++i) staging_[i] = static_cast<float>(staging_[i] * weight);
  }
  comm_.sum(staging_.data(), total);
  size_t at = 0;
  for (Tensor* t : tensors) {
    backend_.upload(*t, staging_.data() + at);
    at += static_cast<size_t>(t->numel());
  }
}

void TensorSums::broadcast(const std::vector<Tensor*>& tensors) {
  if (comm_.size() == 1) return;
  if (device_) {
    device_->broadcast(tensors, 0);
    return;
  }
  for (Tensor* t : tensors) {
    std::vector<char> host(t->bytes());
    backend_.download(host.data(), *t);
    comm_.broadcast(host.data(), host.size(), 0);
    backend_.upload(*t, host.data());
  }
}

}  // namespace tandem
