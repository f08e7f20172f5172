//===- allreduce.cpp - The runtime's all-reduce against bare MPI ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtrun -n 2 build/bin/dt-bench-allreduce [MAX_MIB | --bytes B[,B...]]`
// times the communicator's all-reduce (what a data-parallel gradient costs in
// an emitted program: the blocking MPI call under the watchdog, dtrt/comm.h)
// against a bare MPI_Allreduce of the same f32 buffer: for gradient-sized
// buffers from 4 KiB to MAX_MIB (64 by default) in steps of 4x, or for the
// given sizes (bench/run_ddp.py passes a program's gradient buckets). The two
// run interleaved in rounds, so drift of a shared VM hits both alike; each
// figure is the median over rounds of the mean time per call, slowest rank.
// Rank 0 prints a Markdown table.
//
//===----------------------------------------------------------------------===//

#include "dtrt/comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dtrt;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Mean seconds per call of `body` over `calls` calls, all ranks starting
/// together.
template <typename F> double timeCalls(int calls, F body) {
  MPI_Barrier(MPI_COMM_WORLD);
  auto start = Clock::now();
  for (int i = 0; i < calls; ++i)
    body();
  double mine = std::chrono::duration<double>(Clock::now() - start).count();
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest / calls;
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Expected<Mesh> mesh = Mesh::create({"dp"}, {world});
  Expected<std::unique_ptr<Communicator>> comm =
      mesh ? makeMpiCommunicator(*mesh, std::chrono::seconds(60))
           : Expected<std::unique_ptr<Communicator>>(mesh.error());
  if (!comm) {
    std::fprintf(stderr, "error: %s\n", comm.error().message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int rounds = 7;
  std::vector<int64_t> sizes;
  if (argc > 2 && std::strcmp(argv[1], "--bytes") == 0) {
    for (char *p = argv[2]; *p;) {
      char *end = nullptr;
      long long b = std::strtoll(p, &end, 10);
      if (end == p || b < 4 || b % 4) {
        if (rank == 0)
          std::fprintf(stderr, "error: --bytes takes sizes of whole f32 "
                               "buffers, comma-separated: '%s'\n", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      sizes.push_back(b);
      p = *end == ',' ? end + 1 : end;
    }
  } else {
    int64_t maxBytes = (argc > 1 ? std::atoll(argv[1]) : 64) << 20;
    for (int64_t bytes = 4096; bytes <= maxBytes; bytes *= 4)
      sizes.push_back(bytes);
  }
  if (rank == 0) {
    std::printf("all-reduce of f32 over %d ranks (%s), median of %d rounds\n\n",
                world, (*comm)->engine().c_str(), rounds);
    std::printf("| bytes | MPI_Allreduce | dt all-reduce | dt / MPI |\n");
    std::printf("|---:|---:|---:|---:|\n");
  }
  for (int64_t bytes : sizes) {
    int64_t count = bytes / 4;
    std::vector<float> src(static_cast<size_t>(count), 1.0f);
    std::vector<float> dst(static_cast<size_t>(count));
    // About 0.2 s of traffic per round and peer: 3 to 20000 calls.
    int calls = int(std::clamp<int64_t>((int64_t(200) << 20) / bytes, 3, 20000));
    std::vector<double> mpi, ours;
    for (int r = 0; r <= rounds; ++r) {
      double a = timeCalls(calls, [&] {
        MPI_Allreduce(src.data(), dst.data(), int(count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      });
      double b = timeCalls(calls, [&] {
        Status s = (*comm)->allReduceSum(src.data(), dst.data(), count,
                                         DType::F32, 1, "bench");
        if (!s) {
          std::fprintf(stderr, "error: %s\n", s.error().message().c_str());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      });
      if (r > 0) { // round 0 warms up both paths
        mpi.push_back(a);
        ours.push_back(b);
      }
    }
    if (rank == 0) {
      double a = median(mpi), b = median(ours);
      std::printf("| %lld | %.1f us | %.1f us | %.3f |\n", (long long)bytes,
                  a * 1e6, b * 1e6, b / a);
    }
  }
  comm->reset(); // finalizes MPI
  return 0;
}
