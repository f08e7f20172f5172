//===- dtrt/launch.h - How the program was started -------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One emitted program runs under every launcher: alone, mpirun or dtrun, srun,
// torchrun (and the Kubernetes operators that set the same variables),
// SageMaker and Vertex AI. `detectLaunch` reads the environment once and says
// which rank this process is, on which node, and how the ranks find each
// other; everything rank-dependent (which rank prints, writes metrics and
// checkpoints, which device it opens) asks the `Launch`, never the
// environment.
//
// Two ways to meet the other ranks: an MPI launcher (mpirun, srun --mpi=pmix)
// tells MPI the world by itself; every other launcher only says "you are rank
// r of n, rank 0 is at host:port", and the ranks rendezvous there to build
// the MPI world (comm/rendezvous.h). Either way the collectives are MPI's.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_LAUNCH_H
#define DTRT_LAUNCH_H

#include "dtrt/error.h"

#include <functional>
#include <string>
#include <vector>

namespace dtrt {

/// The launcher that started this process, as far as the environment tells.
enum class Launcher {
  Standalone, ///< no launcher variables
  OpenMPI,    ///< OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
  Pmi,        ///< PMI_RANK / PMI_SIZE (MPICH, Intel MPI, Hydra)
  Slurm,      ///< SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID (srun)
  Torchrun,   ///< RANK / WORLD_SIZE / LOCAL_RANK with TORCHELASTIC_RUN_ID
  EnvVars,    ///< RANK / WORLD_SIZE / LOCAL_RANK (Kubernetes operators, ...)
  SageMaker,  ///< SM_HOSTS / SM_CURRENT_HOST or resourceconfig.json
  Vertex,     ///< CLUSTER_SPEC (Vertex AI custom jobs)
};

/// This process's place in the job.
struct Launch {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  /// This process's node and the job's node count.
  int node = 0;
  int nodes = 1;
  Launcher launcher = Launcher::Standalone;
  /// Whether MPI_Init finds the world by itself (an MPI launcher started the
  /// ranks); otherwise they rendezvous at masterAddr:masterPort.
  bool mpiWorld = false;
  std::string masterAddr;
  int masterPort = 0;

  /// Whether this rank prints progress and writes metrics and checkpoints.
  bool isLeader() const { return rank == 0; }
  /// "standalone, one rank" or "rank 3 of 8 (local 1 of 4 on node 1 of 2),
  /// started by Slurm (srun)".
  std::string describe() const;
  /// "ranks meet at node01:29742" when the ranks meet at the master, else "".
  std::string describeMeeting() const;
};

/// Reads a variable; tests pass their own to avoid touching the process's.
using GetEnv = std::function<const char *(const char *)>;

/// Default rendezvous port where a launcher names a master host but no port
/// (PyTorch's default, so firewall rules written for it apply).
constexpr int kDefaultMasterPort = 29500;

/// Detects the launch from the environment (std::getenv by default). Fails on
/// malformed or inconsistent launcher variables, saying which.
Expected<Launch> detectLaunch(const GetEnv &getEnv = {});

/// The hosts of a Slurm host list ("node[01-03,07],gpu5" -> node01, node02,
/// node03, node07, gpu5); empty when it is malformed.
std::vector<std::string> expandHostList(const std::string &list);

} // namespace dtrt

#endif // DTRT_LAUNCH_H
