// dist: gradients between GPUs with NCCL, as nn's Collective (nn/collective.h) whose on_device()
// the CUDA backend uses to sum the gradient section of its parameter arena on the step's stream.
//
// Host-side calls (the loss sums, the data fingerprint, the step counter) go to the host
// collective it is made from (MPI_COMM_WORLD under mpirun); device memory goes through one NCCL
// communicator, bootstrapped over that host collective: rank 0 makes the unique id
// (ncclGetUniqueId), the host collective broadcasts it, every rank joins (ncclCommInitRank) on its
// device. NCCL is found at build time when the CUDA backend is built (CMake option
// CROSSOVER_NCCL, ON when the toolkit has nccl.h and libnccl); without it this header still
// compiles and built_with_nccl() says so.
#pragma once

#include <memory>

#include "nn/collective.h"

namespace crossover::dist {

// Whether this binary was built with NCCL.
bool built_with_nccl();

// The ranks of `host` (every rank calls this, with the same host collective), each on CUDA
// device `device` of this host; throws Error when built without NCCL or when NCCL fails (the
// error names the call and NCCL's reason). Two ranks on one device are an NCCL error.
std::shared_ptr<Collective> nccl_collective(std::shared_ptr<Collective> host, int device);

// The device a rank takes on its host: local_rank modulo the host's device count.
int device_for_local_rank(int local_rank, int device_count);

}  // namespace crossover::dist
