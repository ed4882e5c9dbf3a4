// dist: the ranks of data-parallel training over MPI, as nn's Collective (nn/collective.h).
//
// A layer above nn (it implements nn's interface) and below perf and the command. MPI is found
// at build time (CMake's FindMPI, option CROSSOVER_MPI, ON when found); without it this header
// still compiles and built_with_mpi() says so, so that the command can refuse mpirun in one line.
#pragma once

#include <memory>
#include <string>

#include "nn/collective.h"

namespace crossover::dist {

// Whether this binary was built with MPI.
bool built_with_mpi();

// MPI_COMM_WORLD as a Collective. The first call initialises MPI (MPI_Init_thread, funneled: only
// the calling thread communicates; OpenMP threads never do) and registers MPI_Finalize at exit.
// Throws Error when built without MPI.
class MpiWorld : public Collective {
 public:
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(float* data, int64_t n) override;
  void allreduce_sum(double* data, int64_t n) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void barrier() override;
  std::string description() const override;
  // The watchdog (`--rank-timeout`): once this rank has waited longer than `seconds` in one
  // collective call (0: never), it prints one line naming itself, the call and the wait, and
  // ends; mpirun then ends every other rank (as when a rank dies). A thread of its own watches,
  // so that it sees a rank blocked in any MPI call; it makes no MPI call itself (MPI was
  // initialised funneled: only the main thread may), and ends the process with _exit, leaving
  // whatever is half-written (only temporary files: models are renamed into place) unrenamed.
  // With one rank it does nothing.
  void set_timeout(double seconds);
  // The ranks on this host (MPI_Comm_split_type shared memory), and this one among them.
  int local_size() const { return local_size_; }
  int local_rank() const { return local_rank_; }

 private:
  friend std::shared_ptr<MpiWorld> world();
  MpiWorld() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};
std::shared_ptr<MpiWorld> world();

// Ends every rank at once (MPI_Abort on MPI_COMM_WORLD with `code`) when MPI was initialised with
// more than one rank, so that the other ranks do not wait forever in a collective for one that
// failed; returns otherwise (one process: the caller exits as usual).
void abort_all_if_parallel(int code);
// "rank R of N: " when MPI was initialised with more than one rank, else "": for error lines.
std::string rank_prefix();

}  // namespace crossover::dist
