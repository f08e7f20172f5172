//===- mpi_world.h - The MPI world of a job ---------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_COMM_MPI_WORLD_H
#define DTRT_COMM_MPI_WORLD_H

#include "dtrt/error.h"
#include "dtrt/rendezvous.h"

#include <mpi.h>
#include <optional>

namespace dtrt {

/// Initialises MPI and returns the communicator of the whole job: MPI's own
/// world when an MPI launcher started the ranks (no `meet`), else the world
/// the ranks build by meeting at `meet`, numbered by their launcher's ranks.
Expected<MPI_Comm> openMpiWorld(const std::optional<Rendezvous> &meet);

} // namespace dtrt

#endif // DTRT_COMM_MPI_WORLD_H
