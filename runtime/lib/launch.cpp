//===- launch.cpp - Detect how the program was started --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Launchers are tried from the most specific to the most generic variables:
// an mpirun inside a Slurm allocation sets both OMPI_* and SLURM_*, and the
// MPI variables describe the processes that will actually talk to each other.
//
//===----------------------------------------------------------------------===//

#include "dtrt/launch.h"

#include <cstdlib>
#include <fmt/format.h>
#include <string>

namespace dtrt {

static const char *launcherName(Launcher l) {
  switch (l) {
  case Launcher::Standalone:
    return "standalone";
  case Launcher::OpenMPI:
    return "mpirun (Open MPI)";
  case Launcher::Pmi:
    return "a PMI launcher (MPICH/Hydra)";
  case Launcher::Slurm:
    return "Slurm (srun)";
  case Launcher::EnvVars:
    return "RANK/WORLD_SIZE variables";
  }
  return "?";
}

std::string Launch::describe() const {
  if (launcher == Launcher::Standalone && worldSize == 1)
    return "standalone, one rank";
  return fmt::format("rank {} of {} (local {} of {}), started by {}", rank,
                     worldSize, localRank, localWorldSize,
                     launcherName(launcher));
}

namespace {

/// The names of one launcher's variables, in the order rank, size, local rank,
/// local size (local ones may be absent).
struct Scheme {
  Launcher launcher;
  const char *rank, *size, *localRank, *localSize;
};

const Scheme kSchemes[] = {
    {Launcher::OpenMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::Pmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
     "MPI_LOCALNRANKS"},
    // The STEP variables are set by srun only: a batch script that runs the
    // program directly is one process, whatever the allocation's size.
    {Launcher::Slurm, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
     "SLURM_STEP_TASKS_PER_NODE"},
    {Launcher::EnvVars, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

Expected<int> readInt(const GetEnv &getEnv, const char *name, int fallback) {
  const char *v = getEnv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  // Slurm writes SLURM_STEP_TASKS_PER_NODE as "4(x2)" on uneven allocations;
  // the leading number is this node's count.
  if (end == v || n < 0 || n > 1 << 24)
    return Error(
        fmt::format("launcher variable {}={} is not a rank count", name, v));
  return int(n);
}

} // namespace

Expected<Launch> detectLaunch(const GetEnv &getEnvArg) {
  GetEnv getEnv =
      getEnvArg ? getEnvArg : [](const char *n) { return std::getenv(n); };
  for (const Scheme &s : kSchemes) {
    if (!getEnv(s.rank) || !getEnv(s.size))
      continue;
    Launch l;
    l.launcher = s.launcher;
    Expected<int> rank = readInt(getEnv, s.rank, 0);
    Expected<int> size = readInt(getEnv, s.size, 1);
    if (!rank)
      return rank.error();
    if (!size)
      return size.error();
    l.rank = *rank;
    l.worldSize = *size;
    Expected<int> localRank = readInt(getEnv, s.localRank, l.rank);
    Expected<int> localSize = readInt(getEnv, s.localSize, l.worldSize);
    if (!localRank)
      return localRank.error();
    if (!localSize)
      return localSize.error();
    l.localRank = *localRank;
    l.localWorldSize = *localSize;
    if (l.worldSize < 1 || l.rank >= l.worldSize)
      return Error(fmt::format("{}={} is not a rank of a world of {}={}",
                               s.rank, l.rank, s.size, l.worldSize));
    return l;
  }
  return Launch{};
}

Status checkLaunchSupported(const Launch &launch) {
  if (launch.worldSize == 1)
    return Status::ok();
  return Error(
      fmt::format("this program was started as {}, but this build of libdtrt "
                  "trains on one rank only; start it without a launcher",
                  launch.describe()),
      kExitUsage);
}

} // namespace dtrt
