//===- dtrt/launch.h - How the program was started -------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One emitted program runs under many launchers (alone, mpirun, srun,
// torchrun-style RANK/WORLD_SIZE variables as dtrun and cloud entry points
// set). `detectLaunch` reads the environment once and says which rank this
// process is; everything rank-dependent (which rank prints, writes metrics and
// checkpoints, which device it opens) asks the `Launch`, never the
// environment. This build trains on one rank, so a world size above one is
// refused with a clear message rather than having N copies train the same job
// and overwrite each other's checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_LAUNCH_H
#define DTRT_LAUNCH_H

#include "dtrt/error.h"

#include <functional>
#include <string>

namespace dtrt {

/// The launcher that started this process, as far as the environment tells.
enum class Launcher {
  Standalone, ///< no launcher variables
  OpenMPI,    ///< OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
  Pmi,        ///< PMI_RANK / PMI_SIZE (MPICH, Intel MPI, Hydra)
  Slurm,      ///< SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID (srun)
  EnvVars,    ///< RANK / WORLD_SIZE / LOCAL_RANK (dtrun, torchrun style)
};

/// This process's place in the job.
struct Launch {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  Launcher launcher = Launcher::Standalone;

  /// Whether this rank prints progress and writes metrics and checkpoints.
  bool isLeader() const { return rank == 0; }
  /// "standalone" or "rank 3 of 8 (local 1 of 4), started by Slurm".
  std::string describe() const;
};

/// Reads a variable; tests pass their own to avoid touching the process's.
using GetEnv = std::function<const char *(const char *)>;

/// Detects the launch from the environment (std::getenv by default). Fails on
/// malformed launcher variables (a rank outside the world).
Expected<Launch> detectLaunch(const GetEnv &getEnv = {});

/// Refuses launches this build cannot run (more than one rank).
Status checkLaunchSupported(const Launch &launch);

} // namespace dtrt

#endif // DTRT_LAUNCH_H
