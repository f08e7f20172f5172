//===- queue.h - Collectives run on a communication thread ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The engine behind a program's asynchronous collectives (dt.async, dtc
// --overlap): a communication thread runs them one at a time, in the order the
// program issued them, which is the same on every rank; the rank's thread
// waits for one by its id (dtrt_wait). A collective issued synchronously while
// others are queued joins the queue and is waited for at once, so the order
// holds; with the queue empty it runs on the calling thread. Only one thread
// calls the communicator at a time (MPI_THREAD_SERIALIZED suffices).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_LIB_COMM_QUEUE_H
#define DTRT_LIB_COMM_QUEUE_H

#include "dtrt/error.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace dtrt {

class CollectiveQueue {
public:
  /// `fail` reports a collective's error and does not return.
  explicit CollectiveQueue(std::function<void(const Error &)> fail)
      : fail_(std::move(fail)) {}
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue &) = delete;
  CollectiveQueue &operator=(const CollectiveQueue &) = delete;

  /// Queues `run` as collective `id` (a later start of the same id replaces
  /// the earlier one's ticket: each id is waited for before it is reused).
  void start(int32_t id, std::function<Status()> run);
  /// Returns once the last start of `id` has run; at once if there was none.
  void wait(int32_t id);
  /// Runs `run` after everything queued, and returns once it has run.
  void runInOrder(std::function<Status()> run);
  /// How many started collectives have not run yet.
  int64_t pending();

private:
  struct Task {
    std::function<Status()> run;
    uint64_t ticket;
  };
  void work();
  uint64_t enqueue(std::function<Status()> run);
  void waitTicket(std::unique_lock<std::mutex> &lock, uint64_t ticket);

  std::function<void(const Error &)> fail_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Task> tasks_;
  uint64_t issued_ = 0, done_ = 0;
  std::unordered_map<int32_t, uint64_t> ticketOf_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace dtrt

#endif // DTRT_LIB_COMM_QUEUE_H
