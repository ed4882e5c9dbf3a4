// Whether a parallel launcher (mpirun, mpiexec, srun with PMI) started this process as one of
// several, read from the variables the launchers set. crossover trains in one process; until it
// trains across processes (data parallelism over MPI), a model compiled in one of N launched
// processes is refused rather than trained N times over (Sequential::compile).
#pragma once

#include <string>

namespace crossover {

struct LaunchedRanks {
  int size = 1;        // processes the launcher started (1: not launched, or alone)
  int rank = 0;        // this one's rank among them
  std::string source;  // the variable that said so, e.g. "OMPI_COMM_WORLD_SIZE=2"; "" when size 1
};

// Open MPI (OMPI_COMM_WORLD_SIZE / _RANK), MPICH, Intel MPI and Slurm's srun through PMI
// (PMI_SIZE / PMI_RANK), MVAPICH (MV2_COMM_WORLD_SIZE / _RANK). A variable that is not a positive
// count is ignored.
LaunchedRanks launched_ranks();

}  // namespace crossover
