//===- signals.cpp - Stop requests from SIGTERM and SIGINT ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The handler does only async-signal-safe work: it stores into a lock-free
// atomic, and on a second SIGINT writes a fixed message and calls _exit.
// SA_RESTART keeps blocking reads and writes (checkpoint I/O) from failing
// with EINTR when a signal arrives in the middle of them.
//
//===----------------------------------------------------------------------===//

#include "dtrt/signals.h"

#include <atomic>
#include <csignal>
#include <unistd.h>

namespace dtrt {

static std::atomic<int> gStopSignal{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "the stop flag is written from a signal handler");

static void onStopSignal(int sig) {
  int previous = gStopSignal.exchange(sig);
  if (sig == SIGINT && previous == SIGINT) {
    static const char msg[] = "\ninterrupted again: exiting now, without a "
                              "checkpoint\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(130);
  }
}

void installStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int stopSignal() { return gStopSignal.load(); }

void clearStopRequest() { gStopSignal.store(0); }

} // namespace dtrt
