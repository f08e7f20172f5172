//===- CommProbe.cpp - Ranks that fail, for the communicator's tests ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtrt-comm-probe MODE RANK [TIMEOUT_S]` on a 1-D mesh of the world's size:
// every rank does one all-reduce, except that rank RANK first
//   hang: sleeps for 120 s (a rank stuck in a step),
//   die:  kills itself with SIGKILL (a rank lost with its node).
// The other ranks must stop with a message within the timeout, never hang.
// `mesh N` instead makes a communicator for a mesh of N ranks, which must be
// refused with a message saying how to launch when the world differs.
//
//===----------------------------------------------------------------------===//

#include "dtrt/collectives.h"
#include "dtrt/comm.h"

#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace dtrt;

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s hang|die|mesh RANK|N [TIMEOUT_S]\n",
                 argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  int arg = std::atoi(argv[2]);
  int timeout = argc > 3 ? std::atoi(argv[3]) : 5;

  MPI_Init(&argc, &argv);
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Expected<Mesh> mesh =
      Mesh::create({"dp"}, {mode == "mesh" ? arg : world});
  if (!mesh)
    return 1;
  Expected<std::unique_ptr<Communicator>> comm =
      makeMpiCommunicator(*mesh, std::chrono::seconds(timeout));
  if (!comm) {
    std::fprintf(stderr, "error: %s\n", comm.error().message().c_str());
    MPI_Finalize();
    return 1;
  }
  setProgramCommunicator(comm->get(), {"grad/fc1.weight"});
  if (rank == arg && mode == "hang")
    std::this_thread::sleep_for(std::chrono::seconds(120));
  if (rank == arg && mode == "die")
    std::raise(SIGKILL);
  float x = 1;
  dtrt_all_reduce(&x, &x, 1, int32_t(DType::F32), 1, 0);
  std::printf("rank %d: sum %g\n", rank, x);
  setProgramCommunicator(nullptr);
  comm->reset();
  return 0;
}
