//===- parallel.cpp - the kernels' thread pool ----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_parallel_for splits [0, n) into one contiguous range per thread (the
// same ranges for the same n and thread count, so a kernel whose ranges do
// not share a reduction computes bitwise what it computes serially) and runs
// them on the calling thread and the pool's workers. Workers wait on a
// condition variable between calls after a short spin: OpenBLAS's threads
// run the matrix products in between, and a pool that kept spinning would
// take their cores (the runtime gives both the same --threads).
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace {

class Pool {
public:
  ~Pool() { resize(1); }

  void resize(int threads) {
    if (threads < 1)
      threads = 1;
    std::lock_guard<std::mutex> call(callMutex_);
    if (threads == int(workers_.size()) + 1)
      return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
    workers_.clear();
    stop_ = false;
    // A worker must not miss a call made before it first looks: it starts
    // from the generation it was created at.
    uint64_t start = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < threads; ++i)
      workers_.emplace_back([this, i, start] { work(i, start); });
  }

  int threads() const { return int(workers_.size()) + 1; }

  void run(int64_t n, dtk_body body, void *ctx) {
    // Calls from inside a range (a kernel calling a kernel; checked first, as
    // the caller's range runs under callMutex_) and calls from other threads
    // while one runs go serially.
    if (inside_ || workers_.empty()) {
      body(ctx, 0, n);
      return;
    }
    std::unique_lock<std::mutex> call(callMutex_, std::try_to_lock);
    if (!call.owns_lock()) {
      body(ctx, 0, n);
      return;
    }
    int parts = threads();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = body;
      ctx_ = ctx;
      n_ = n;
      parts_ = parts;
      pending_.store(parts - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    inside_ = true;
    body(ctx, 0, n / parts);
    inside_ = false;
    // The workers' ranges are short: spin for them before sleeping.
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin)
      if (spin > 20000) {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] {
          return pending_.load(std::memory_order_acquire) == 0;
        });
        break;
      }
  }

private:
  void work(int index, uint64_t seen) {
    for (;;) {
      // Spin briefly for the next call (kernels come in runs), then sleep.
      uint64_t now = seen;
      for (int spin = 0; spin < 20000; ++spin) {
        now = generation_.load(std::memory_order_acquire);
        if (now != seen)
          break;
      }
      if (now == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          return generation_.load(std::memory_order_acquire) != seen;
        });
      }
      dtk_body body;
      void *ctx;
      int64_t n;
      int parts;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_)
          return;
        seen = generation_.load(std::memory_order_acquire);
        body = body_;
        ctx = ctx_;
        n = n_;
        parts = parts_;
      }
      inside_ = true;
      body(ctx, n * index / parts, n * (index + 1) / parts);
      inside_ = false;
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::mutex callMutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  dtk_body body_ = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 1;
  static thread_local bool inside_;
};

thread_local bool Pool::inside_ = false;

Pool &pool() {
  static Pool p;
  return p;
}

} // namespace

extern "C" void dtk_set_threads(int threads) { pool().resize(threads); }

extern "C" int dtk_threads(void) { return pool().threads(); }

extern "C" void dtk_parallel_for(int64_t n, int64_t grain, dtk_body body,
                                 void *ctx) {
  if (n <= 0)
    return;
  if (n < 2 * grain || pool().threads() == 1) {
    body(ctx, 0, n);
    return;
  }
  pool().run(n, body, ctx);
}
