// Collective: what synchronous data-parallel training asks of the processes it runs in (one rank
// of several, started by mpirun). nn knows only this interface; src/ranks implements it over MPI.
//
// A model compiled with CompileOptions::collective of size N > 1 trains as one process would at
// the same global batch: every rank shuffles identically, takes its rows of each global batch
// (rank_rows), scales its loss gradient by its share, and the gradients are summed across ranks
// before every optimizer step (docs/DISTRIBUTED.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace crossover {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank passes n values; each ends with the element-wise sum over the ranks, in place.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  // Rank `root`'s bytes, copied into every other rank's buffer.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // "MPI (Open MPI v4.1.4)": for messages and the JSON.
  virtual std::string description() const = 0;
  // The communicator for device memory (NCCL between GPUs, src/ranks/nccl.h), through which a GPU
  // backend sums the gradients on its own stream (Backend::allreduce_sum); null where this
  // collective reaches host memory only (then ranks train on the CPU alone).
  virtual DeviceCollective* on_device() { return nullptr; }
};

// The rows [begin, end) of a global batch of `rows` that rank `rank` of `size` takes:
// floor(rank * rows / size) .. floor((rank + 1) * rows / size). Every row belongs to exactly one
// rank, in order; when size does not divide rows the shares differ by one (ragged), and a rank
// may take none (rows < size).
struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t count() const { return end - begin; }
};
inline RowRange rank_rows(int64_t rows, int rank, int size) {
  return {rows * rank / size, rows * (rank + 1) / size};
}

}  // namespace crossover
