//===- overlap.cpp - Does overlapping an all-reduce with compute pay? -----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtrun -n 2 build/bin/dt-bench-overlap` asks whether this machine gains from
// running a gradient all-reduce on a communication thread while the rank's
// thread computes, as an asynchronous collective engine would (DDP's overlap
// of backward and gradient sums). Each iteration is one contraction of the
// size of examples/mlp_fashion.dt's first-layer weight gradient (three 256 x
// 784 x 64 sgemms, one OpenBLAS thread) and one all-reduce of the model's
// gradients (203 530 floats): one after the other, then the all-reduce handed
// to a persistent thread (a condition variable each way) while the sgemms
// run. Rounds alternate; each figure is the median over rounds of the mean
// time per iteration, slowest rank.
//
//===----------------------------------------------------------------------===//

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Runs `comm` on its own thread when asked, one request at a time.
class CommThread {
public:
  template <typename F> explicit CommThread(F comm) : thread_([this, comm] {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || asked_ > done_; });
      if (stop_)
        return;
      lock.unlock();
      comm();
      lock.lock();
      ++done_;
      wake_.notify_all();
    }
  }) {}
  ~CommThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void start() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++asked_;
    wake_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return done_ == asked_; });
  }

private:
  std::mutex mutex_;
  std::condition_variable wake_;
  long asked_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

/// Mean seconds per call of `body` over `calls`, slowest rank.
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
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_SERIALIZED) {
    if (rank == 0)
      std::fprintf(stderr, "error: this MPI cannot take calls from a second "
                           "thread (MPI_THREAD_SERIALIZED)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int m = 256, n = 784, k = 64;
  std::vector<float> a(size_t(k) * m, 0.5f), b(size_t(k) * n, 0.25f),
      c(size_t(m) * n);
  std::vector<float> grads(203530, 1.0f), sums(grads.size());
  auto compute = [&] {
    for (int i = 0; i < 3; ++i)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f,
                  a.data(), m, b.data(), n, 0.0f, c.data(), n);
  };
  auto comm = [&] {
    MPI_Allreduce(grads.data(), sums.data(), int(grads.size()), MPI_FLOAT,
                  MPI_SUM, MPI_COMM_WORLD);
  };
  CommThread thread(comm);
  const int rounds = 7, calls = 300;
  std::vector<double> computeOnly, commOnly, sequential, overlapped;
  for (int r = 0; r <= rounds; ++r) {
    double c1 = timeCalls(calls, compute);
    double c2 = timeCalls(calls, comm);
    double s = timeCalls(calls, [&] {
      compute();
      comm();
    });
    double o = timeCalls(calls, [&] {
      thread.start();
      compute();
      thread.wait();
    });
    if (r == 0) // warm-up
      continue;
    computeOnly.push_back(c1);
    commOnly.push_back(c2);
    sequential.push_back(s);
    overlapped.push_back(o);
  }
  if (rank == 0) {
    double s = median(sequential), o = median(overlapped);
    std::printf("| compute | all-reduce | one after the other | overlapped | "
                "overlapped / sequential |\n|---:|---:|---:|---:|---:|\n");
    std::printf("| %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.3f |\n",
                median(computeOnly) * 1e3, median(commOnly) * 1e3, s * 1e3,
                o * 1e3, o / s);
  }
  MPI_Finalize();
  return 0;
}
