// The processes of a run that an MPI launcher started (mpirun -np N trainer ...): MPI's world.
// Compiled only when CMake found MPI (TANDEM_WITH_MPI).
#if TANDEM_WITH_MPI
// MPI's C interface only: the C++ bindings (deprecated) would need their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "engine/communicator.h"

namespace tandem {
// MPI_Get_library_version may be called before MPI_Init (MPI 3).
std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<size_t>(std::max(0, length)));
  // "Open MPI v4.1.4, package: ..., repo rev: ...": the name and version are enough.
  return text.substr(0, text.find_first_of(",\n"));
}

namespace {

// MPI counts in int: a sum of more values goes in slices.
constexpr size_t kSlice = static_cast<size_t>(INT_MAX) / 2;

class MpiWorld : public Communicator {
 public:
  MpiWorld(int* argc, char*** argv) {
    int provided = 0;
    // Only the training thread calls MPI (data workers and library threads never do).
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    library_ = mpi_library_version();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  void sum(float* data, size_t n) override { sum_in_slices(data, n, MPI_FLOAT); }
  void sum(double* data, size_t n) override { sum_in_slices(data, n, MPI_DOUBLE); }
  void broadcast(void* data, size_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    for (size_t at = 0; at < bytes; at += kSlice)
      MPI_Bcast(p + at, static_cast<int>(std::min(kSlice, bytes - at)), MPI_BYTE, root,
                MPI_COMM_WORLD);
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, this process still ends
  }
  std::string library() const override { return library_; }

 private:
  template <typename T>
  void sum_in_slices(T* data, size_t n, MPI_Datatype type) {
    for (size_t at = 0; at < n; at += kSlice)
      MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(kSlice, n - at)), type,
                    MPI_SUM, MPI_COMM_WORLD);
  }
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string library_;
};

}  // namespace

std::unique_ptr<Communicator> start_mpi_world(int* argc, char*** argv) {
  return std::make_unique<MpiWorld>(argc, argv);
}

void end_mpi_world() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace tandem
#endif
