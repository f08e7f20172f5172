//===- queue.cpp - Collectives run on a communication thread --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "queue.h"

namespace dtrt {

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

uint64_t CollectiveQueue::enqueue(std::function<Status()> run) {
  // Called with mutex_ held. The thread starts with the first collective, so
  // programs that never overlap never have it.
  if (!thread_.joinable())
    thread_ = std::thread([this] { work(); });
  uint64_t ticket = ++issued_;
  tasks_.push_back({std::move(run), ticket});
  changed_.notify_all();
  return ticket;
}

void CollectiveQueue::start(int32_t id, std::function<Status()> run) {
  std::lock_guard<std::mutex> lock(mutex_);
  ticketOf_[id] = enqueue(std::move(run));
}

void CollectiveQueue::waitTicket(std::unique_lock<std::mutex> &lock,
                                 uint64_t ticket) {
  changed_.wait(lock, [&] { return done_ >= ticket; });
}

void CollectiveQueue::wait(int32_t id) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = ticketOf_.find(id);
  if (it != ticketOf_.end())
    waitTicket(lock, it->second);
}

void CollectiveQueue::runInOrder(std::function<Status()> run) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_ == issued_) {
    // Nothing queued: the communication thread is idle, and stays so while
    // this thread runs the collective (only this thread starts more).
    lock.unlock();
    if (Status s = run(); !s)
      fail_(s.error());
    return;
  }
  waitTicket(lock, enqueue(std::move(run)));
}

int64_t CollectiveQueue::pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(issued_ - done_);
}

void CollectiveQueue::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty())
      return; // stopping, with nothing left to run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    if (Status s = task.run(); !s)
      fail_(s.error());
    lock.lock();
    done_ = task.ticket;
    changed_.notify_all();
  }
}

} // namespace dtrt
