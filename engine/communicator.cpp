// The run's processes: a single one, or MPI's (engine/mpi_world.cpp), and tensor sums over them.
#include "engine/communicator.h"

#include <fmt/format.h>

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

void sum_tensors(Communicator& comm, Backend& backend, const std::vector<Tensor*>& tensors,
                 std::vector<float>& staging, double weight) {
  size_t total = 0;
  for (const Tensor* t : tensors) {
    TANDEM_CHECK(t->dtype() == DType::kF32, "only float tensors are summed over processes");
    total += static_cast<size_t>(t->numel());
  }
  if (staging.size() < total) staging.resize(total);
  if (weight == 0) {
    // A process without samples this step adds nothing, whatever its buffers hold.
    std::fill(staging.begin(), staging.begin() + static_cast<std::ptrdiff_t>(total), 0.f);
  } else {
    size_t at = 0;
    for (const Tensor* t : tensors) {
      backend.download(staging.data() + at, *t);
      at += static_cast<size_t>(t->numel());
    }
    if (weight != 1)
      for (size_t i = 0; i < total; ++i) staging[i] = static_cast<float>(staging[i] * weight);
  }
  comm.sum(staging.data(), total);
  size_t at = 0;
  for (Tensor* t : tensors) {
    backend.upload(*t, staging.data() + at);
    at += static_cast<size_t>(t->numel());
  }
}

void broadcast_tensors(Communicator& comm, Backend& backend, const std::vector<Tensor*>& tensors) {
  if (comm.size() == 1) return;
  for (Tensor* t : tensors) {
    std::vector<char> host(t->bytes());
    backend.download(host.data(), *t);
    comm.broadcast(host.data(), host.size(), 0);
    backend.upload(*t, host.data());
  }
}

}  // namespace tandem
