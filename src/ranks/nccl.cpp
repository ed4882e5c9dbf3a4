#include "ranks/nccl.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

#if defined(CROSSOVER_HAVE_NCCL)
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace crossover::dist {

int device_for_local_rank(int local_rank, int device_count) {
  if (device_count < 1) throw Error("NCCL", "no CUDA device on this host");
  return local_rank % device_count;
}

#if defined(CROSSOVER_HAVE_NCCL)

namespace {

void check(ncclResult_t r, const char* call, int device) {
  if (r == ncclSuccess) return;
  std::string why = ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(nullptr); last && *last) why += std::string(": ") + last;
  throw Error(fmt::format("NCCL on cuda:{}", device), fmt::format("{} failed: {}", call, why));
}

void check(cudaError_t e, const char* call, int device) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw Error(fmt::format("NCCL on cuda:{}", device),
              fmt::format("{} failed: {}", call, cudaGetErrorString(e)));
}

// NCCL counts are size_t: a buffer goes in one call.
class NcclCollective final : public Collective, public DeviceCollective {
 public:
  NcclCollective(std::shared_ptr<Collective> host, int device)
      : host_(std::move(host)), device_(device) {
    // Every connection made at init (NCCL >= 2.22 otherwise connects peers at their first
    // collective), so that the first allreduce, which runs inside a step graph's capture, has no
    // set-up to do there; unless the user chose.
    ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    ncclUniqueId id{};
    if (host_->rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId", device_);
    host_->broadcast(&id, sizeof id, 0);
    check(cudaSetDevice(device_), "cudaSetDevice", device_);
    check(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank", device_);
    int version = 0;
    ncclGetVersion(&version);
    version_ = version;
  }
  ~NcclCollective() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  // ---- host memory: the host collective's ----
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  void allreduce_sum(float* data, int64_t n) override { host_->allreduce_sum(data, n); }
  void allreduce_sum(double* data, int64_t n) override { host_->allreduce_sum(data, n); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    host_->broadcast(data, bytes, root);
  }
  void barrier() override { host_->barrier(); }
  std::string description() const override {
    return fmt::format("NCCL {}.{}.{} over {}", version_ / 10000, version_ / 100 % 100,
                       version_ % 100, host_->description());
  }
  DeviceCollective* on_device() override { return this; }

  // ---- device memory: enqueued on the caller's stream (capturable into a CUDA graph) ----
  void allreduce_sum(float* data, int64_t n, void* stream) override {
    check(ncclAllReduce(data, data, static_cast<std::size_t>(n), ncclFloat, ncclSum, comm_,
                        static_cast<cudaStream_t>(stream)),
          "ncclAllReduce", device_);
  }
  void broadcast(void* data, std::size_t bytes, int root, void* stream) override {
    check(
        ncclBroadcast(data, data, bytes, ncclChar, root, comm_, static_cast<cudaStream_t>(stream)),
        "ncclBroadcast", device_);
  }

 private:
  std::shared_ptr<Collective> host_;
  int device_;
  int version_ = 0;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool built_with_nccl() { return true; }

std::shared_ptr<Collective> nccl_collective(std::shared_ptr<Collective> host, int device) {
  return std::make_shared<NcclCollective>(std::move(host), device);
}

#else  // built without NCCL

bool built_with_nccl() { return false; }

std::shared_ptr<Collective> nccl_collective(std::shared_ptr<Collective>, int) {
  throw Error("NCCL",
              "this crossover was built without NCCL (CROSSOVER_NCCL=OFF, no CUDA backend, or no "
              "nccl.h and libnccl in the CUDA toolkit when it was configured)");
}

#endif

}  // namespace crossover::dist
