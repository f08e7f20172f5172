//===- dtrt/signals.h - Stop requests from SIGTERM and SIGINT ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Spot reclamation and schedulers stop a job with SIGTERM (then SIGKILL after
// a grace period); a user stops it with Ctrl-C. Either signal only records a
// stop request; the training loop looks at it at the next optimizer-step
// boundary, where the arena is consistent, writes a checkpoint and exits with
// 128 + the signal number. A second SIGINT exits at once (the user means it).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_SIGNALS_H
#define DTRT_SIGNALS_H

namespace dtrt {

/// Installs the SIGTERM and SIGINT handlers.
void installStopHandlers();

/// The signal that requested a stop (SIGTERM or SIGINT), or 0.
int stopSignal();

/// Forgets a stop request (tests).
void clearStopRequest();

} // namespace dtrt

#endif // DTRT_SIGNALS_H
