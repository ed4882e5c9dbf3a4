// The fused training step's kernel (backends/fused_mlp.h): one cooperative launch per step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "backends/fused_mlp.h"

namespace crossover::cuda {

// How many blocks of the fused kernel fit on one multiprocessor at once.
cudaError_t fused_mlp_blocks_per_sm(int* blocks);

// Device scratch a step of `step`'s shape needs: every layer's output, two gradient buffers, the
// probabilities, the batch's targets, the rows' losses and the dropout masks.
std::size_t fused_mlp_scratch_bytes(const FusedMlpStep& step);

// Enqueues one step on `stream` as a cooperative launch of `blocks` blocks of kFusedThreads
// (every block resident: see fused_mlp_launch_shape), with `scratch` of
// fused_mlp_scratch_bytes(step) bytes.
cudaError_t launch_fused_mlp(cudaStream_t stream, const FusedMlpStep& step, StepCounters* counters,
                             void* scratch, int blocks);

}  // namespace crossover::cuda
