// NCCL sums of GPU tensors (cuda/nccl_sums.h): the library opened with dlopen, its functions
// taken by name, with the types of the toolkit's nccl.h.
#include "cuda/nccl_sums.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <vector>

#include "cuda/check.h"
#include "engine/communicator.h"
#include "engine/error.h"

namespace tandem {
namespace {

constexpr const char* kNcclFile = "libnccl.so.2";
constexpr const char* kNcclInstall =
    "install NCCL 2 (e.g. apt install libnccl2), or add the folder that holds libnccl.so.2 to "
    "LD_LIBRARY_PATH (PyTorch's wheels carry one in nvidia/nccl/lib)";

// The functions of NCCL this file calls, taken from the library it opened.
struct NcclApi {
  std::string version;  // "2.28.9"; empty: not loaded, and why_not says why
  std::string why_not;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;  // NCCL 2.13 and later; may stay null
};

// The folder of the CUDA runtime this process loaded ("" when unknown): NCCL usually sits beside
// it, in a toolkit that the loader's own search may not cover.
std::string cudart_folder() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &info) || !info.dli_fname) return "";
  const std::string file = info.dli_fname;
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? "" : file.substr(0, slash + 1);
}

template <typename F>
bool take(void* library, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(library, name));
  return *fn != nullptr;
}

NcclApi load_nccl() {
  NcclApi api;
  void* library = dlopen(kNcclFile, RTLD_NOW | RTLD_LOCAL);
  std::string reason;
  if (!library) {
    const char* e = dlerror();
    reason = e ? e : "not found";
    if (const std::string folder = cudart_folder(); !folder.empty()) {
      library = dlopen((folder + kNcclFile).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!library) dlerror();  // the first reason says more: the loader's search failed
    }
  }
  if (!library) {
    api.why_not = fmt::format("NCCL could not be loaded ({}); {}", reason, kNcclInstall);
    return api;
  }
  const bool complete = take(library, "ncclGetVersion", &api.get_version) &&
                        take(library, "ncclGetUniqueId", &api.get_unique_id) &&
                        take(library, "ncclCommInitRank", &api.comm_init_rank) &&
                        take(library, "ncclCommDestroy", &api.comm_destroy) &&
                        take(library, "ncclCommAbort", &api.comm_abort) &&
                        take(library, "ncclAllReduce", &api.all_reduce) &&
                        take(library, "ncclBroadcast", &api.broadcast) &&
                        take(library, "ncclGroupStart", &api.group_start) &&
                        take(library, "ncclGroupEnd", &api.group_end) &&
                        take(library, "ncclGetErrorString", &api.error_string);
  take(library, "ncclGetLastError", &api.last_error);
  int code = 0;
  if (!complete || api.get_version(&code) != ncclSuccess) {
    api.why_not = fmt::format("the NCCL loaded ({}) lacks functions tandem calls; {}", kNcclFile,
                              kNcclInstall);
    return api;
  }
  // 2.9 and later: major * 10000 + minor * 100 + patch; before: major * 1000 + minor * 100 + patch.
  api.version = code >= 20900 ? fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
                              : fmt::format("{}.{}.{}", code / 1000, code / 100 % 10, code % 100);
  return api;
}

const NcclApi& nccl() {
  static const NcclApi api = load_nccl();
  return api;
}

// Throws the DeviceError of a failed NCCL call.
void nccl_check(ncclResult_t result, const char* call, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const NcclApi& api = nccl();
  std::string detail = api.error_string(result);
  if (api.last_error)
    if (const char* last = api.last_error(comm); last && *last) detail += fmt::format(": {}", last);
  const char* hint =
      result == ncclSystemError || result == ncclRemoteError
          ? "check the network between the hosts (NCCL_SOCKET_IFNAME names the interface); "
            "NCCL_DEBUG=WARN shows NCCL's own account"
          : "NCCL_DEBUG=WARN shows NCCL's own account";
  throw DeviceError(fmt::format("NCCL failed in {}: {}", call, detail), hint);
}

class NcclSums : public DeviceSums {
 public:
  NcclSums(Communicator& comm, int device, cudaStream_t stream, cublasHandle_t cublas)
      : stream_(stream), cublas_(cublas) {
    const NcclApi& api = nccl();
    // Process 0 makes the run's identity; every process learns it, or why there is none.
    struct {
      ncclUniqueId id;
      char error[400];
    } start{};
    if (comm.rank() == 0) {
      try {
        nccl_check(api.get_unique_id(&start.id), "ncclGetUniqueId");
      } catch (const Error& e) {
        std::strncpy(start.error, e.what(), sizeof start.error - 1);
      }
    }
    comm.broadcast(&start, sizeof start, 0);
    if (start.error[0])
      throw DeviceError(fmt::format("process 0: {}", start.error), "NCCL_DEBUG=WARN says more");
    CUDA_CHECK(cudaSetDevice(device));
    const ncclResult_t r = api.comm_init_rank(&comm_, comm.size(), start.id, comm.rank());
    if (r != ncclSuccess && comm_) api.comm_abort(comm_);  // what it made before it failed
    nccl_check(r, "ncclCommInitRank");
  }

  ~NcclSums() override {
    cudaStreamSynchronize(stream_);
    // Leaving on an error, the other processes may never reach a collective end: abort is local.
    if (std::uncaught_exceptions() > 0)
      nccl().comm_abort(comm_);
    else
      nccl().comm_destroy(comm_);
  }

  std::string library() const override { return "NCCL " + nccl().version; }

  void sum(const std::vector<Tensor*>& tensors, double weight) override {
    if (weight != 1) {
      const float w = static_cast<float>(weight);
      for (Tensor* t : tensors) {
        if (weight == 0)  // a NaN or infinity times 0 would still be one
          CUDA_CHECK(cudaMemsetAsync(t->data(), 0, t->bytes(), stream_));
        else
          CUBLAS_CHECK(cublasSscal_64(cublas_, t->numel(), &w, t->data(), 1));
      }
    }
    const NcclApi& api = nccl();
    nccl_check(api.group_start(), "ncclGroupStart");
    for (Tensor* t : tensors)
      nccl_check(api.all_reduce(t->data(), t->data(), static_cast<size_t>(t->numel()), ncclFloat,
                                ncclSum, comm_, stream_),
                 "ncclAllReduce", comm_);
    nccl_check(api.group_end(), "ncclGroupEnd", comm_);
  }

  void broadcast(const std::vector<Tensor*>& tensors, int root) override {
    const NcclApi& api = nccl();
    nccl_check(api.group_start(), "ncclGroupStart");
    for (Tensor* t : tensors)
      nccl_check(api.broadcast(t->data(), t->data(), t->bytes(), ncclChar, root, comm_, stream_),
                 "ncclBroadcast", comm_);
    nccl_check(api.group_end(), "ncclGroupEnd", comm_);
  }

 private:
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::string nccl_version(std::string* why_not) {
  const NcclApi& api = nccl();
  if (why_not) *why_not = api.why_not;
  return api.version;
}

std::string nccl_unavailable(const Communicator& comm, int gpus) {
  std::string why;
  if (nccl_version(&why).empty()) return why;
  if (comm.local_size() > gpus)
    return fmt::format(
        "{} processes on this host share {} GPU{}, and NCCL needs a GPU for each; start at most {} "
        "process{} per host",
        comm.local_size(), gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "es");
  return "";
}

std::unique_ptr<DeviceSums> start_nccl_sums(Communicator& comm, int device, cudaStream_t stream,
                                            cublasHandle_t cublas) {
  return std::make_unique<NcclSums>(comm, device, stream, cublas);
}

}  // namespace tandem
