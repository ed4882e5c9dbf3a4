// The CUDA backend's optimizer kernels: the gradient norms for clipnorm, the update of every
// parameter slot in one launch (kernel_math.h's update_one), and the step counters.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"

namespace crossover::cuda {
namespace {

// ---- optimizer ------------------------------------------------------------------------------
// The launch's index space is the concatenation of all slots; block chunks of kChunk elements
// stride over it, and each chunk walks the slots it overlaps (found by binary search).
constexpr int kOptThreads = 256;
constexpr int64_t kChunk = kOptThreads * 8;

__device__ int first_slot_ending_after(const SlotDescriptor* slots, int nslots, int64_t begin) {
  int lo = 0, hi = nslots;  // first s with offset + n > begin
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (slots[mid].offset + slots[mid].n > begin)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

__global__ void gradient_norm_kernel(const SlotDescriptor* __restrict__ slots, int nslots,
                                     int64_t total, float clipnorm, StepCounters* counters,
                                     double* partials, unsigned int* ticket) {
  double acc = 0.0;
  for (int64_t chunk = blockIdx.x; chunk * kChunk < total; chunk += gridDim.x) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = begin + kChunk < total ? begin + kChunk : total;
    for (int s = first_slot_ending_after(slots, nslots, begin); s < nslots && slots[s].offset < end;
         ++s) {
      const SlotDescriptor d = slots[s];
      const int64_t lo = (begin > d.offset ? begin : d.offset) - d.offset;
      const int64_t hi = (end < d.offset + d.n ? end : d.offset + d.n) - d.offset;
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const double g = d.grad[i];
        acc += g * g;
      }
    }
  }
  __shared__ double sh[kOptThreads];
  __shared__ bool last;
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = acc;
    last = last_block_done(ticket);
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    double sum = 0.0;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += __ldcg(partials + b);
    counters->grad_scale = clipnorm_scale(clipnorm, sum);
    *ticket = 0;
  }
}

__global__ void tensor_norm_kernel(SlotDescriptor* __restrict__ slots, float clipnorm) {
  const SlotDescriptor d = slots[blockIdx.x];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < d.n; i += blockDim.x) {
    const double g = d.grad[i];
    acc += g * g;
  }
  __shared__ double sh[kOptThreads];
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) slots[blockIdx.x].clip_divisor = tensor_clip_divisor(clipnorm, acc);
}

__global__ void optimizer_update_kernel(OptimizerConfig config,
                                        const SlotDescriptor* __restrict__ slots, int nslots,
                                        int64_t total, StepCounters* counters,
                                        unsigned int* ticket) {
  // Every block reads the step before any block can finish, so the last block may advance it.
  __shared__ UpdateConstants s_u;
  __shared__ float s_scale;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    const int64_t step = counters->step;
    const float lr = scheduled_learning_rate(config.schedule, step);
    s_u = update_constants(config, lr, step + 1, *counters);
    s_scale = config.clipnorm > 0.0f ? counters->grad_scale : 1.0f;
  }
  __syncthreads();
  const UpdateConstants u = s_u;
  const float grad_scale = s_scale;
  for (int64_t chunk = blockIdx.x; chunk * kChunk < total; chunk += gridDim.x) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = begin + kChunk < total ? begin + kChunk : total;
    for (int s = first_slot_ending_after(slots, nslots, begin); s < nslots && slots[s].offset < end;
         ++s) {
      const SlotDescriptor d = slots[s];
      const int64_t lo = (begin > d.offset ? begin : d.offset) - d.offset;
      const int64_t hi = (end < d.offset + d.n ? end : d.offset + d.n) - d.offset;
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float w = d.value[i];
        update_one(config, u, config.tensor_clipnorm > 0.0f ? d.clip_divisor : grad_scale,
                   d.decay != 0, w, d.grad[i], d.slot1, d.slot2, d.slot3, i);
        d.value[i] = w;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) last = last_block_done(ticket);
  __syncthreads();
  if (last && threadIdx.x == 0) {
    counters->learning_rate = u.lr;
    if (!(config.clipnorm > 0.0f)) counters->grad_scale = 1.0f;
    record_step(config, u, *counters, counters->step + 1);
    counters->step += 1;
    counters->batch_index += 1;
    *ticket = 0;
  }
}

__global__ void advance_batch_kernel(StepCounters* counters) { counters->batch_index += 1; }

}  // namespace

cudaError_t launch_gradient_norm(cudaStream_t s, const SlotDescriptor* slots, int nslots,
                                 int64_t total, float clipnorm, StepCounters* counters,
                                 const ReductionScratch& scratch) {
  const int blocks =
      blocks_for((total + kChunk - 1) / kChunk, 1, kNormMaxBlocks);  // one chunk per block
  gradient_norm_kernel<<<blocks, kOptThreads, 0, s>>>(slots, nslots, total, clipnorm, counters,
                                                      scratch.norm_partials, scratch.tickets + 1);
  return cudaGetLastError();
}

cudaError_t launch_optimizer_update(cudaStream_t s, const OptimizerConfig& config,
                                    const SlotDescriptor* slots, int nslots, int64_t total,
                                    StepCounters* counters, const ReductionScratch& scratch,
                                    int max_blocks) {
  const int blocks = blocks_for((total + kChunk - 1) / kChunk, 1, max_blocks);
  optimizer_update_kernel<<<blocks, kOptThreads, 0, s>>>(config, slots, nslots, total, counters,
                                                         scratch.tickets + 2);
  return cudaGetLastError();
}

cudaError_t launch_tensor_norms(cudaStream_t s, SlotDescriptor* slots, int nslots, float clipnorm) {
  if (nslots <= 0) return cudaSuccess;
  tensor_norm_kernel<<<nslots, kOptThreads, 0, s>>>(slots, clipnorm);
  return cudaGetLastError();
}

cudaError_t launch_advance_batch(cudaStream_t s, StepCounters* counters) {
  advance_batch_kernel<<<1, 1, 0, s>>>(counters);
  return cudaGetLastError();
}

cudaError_t preload_optimizer_kernels() {
  return preload_each({
      reinterpret_cast<const void*>(gradient_norm_kernel),
      reinterpret_cast<const void*>(tensor_norm_kernel),
      reinterpret_cast<const void*>(optimizer_update_kernel),
      reinterpret_cast<const void*>(advance_batch_kernel),
  });
}

}  // namespace crossover::cuda
