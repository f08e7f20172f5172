//===- dtrt/peaks.h - What this machine can do, measured --------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// MFU divides the FLOPs a step does by what the device could do. A peak from
// a table is often wrong (an unknown device falls back to another's figure,
// a datasheet counts sparsity or another precision); so on the host the
// peak is measured: an sgemm and a copy at start-up, on the threads the run
// uses, a few hundred milliseconds, cached per machine so that later runs
// read it. Ranks that share the machine measure together, each what it gets
// while the others run, as in training. The nominal figure (cores x clock x
// FLOPs per cycle of the vector units, where the machine says its clock) is
// shown beside it.
//
// The cache is `$DT_CACHE_DIR/peaks.json` (default `$XDG_CACHE_HOME/dt`, else
// `$HOME/.cache/dt`; dtrt/peaks_cache.h), keyed by CPU model, OpenBLAS
// kernels, threads and the ranks on the machine; delete it to measure again.
// One that cannot be read or written means measuring every time, never an
// error.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_PEAKS_H
#define DTRT_PEAKS_H

#include "dtrt/peaks_cache.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtrt {

struct HostPeaks {
  /// f32 FLOP/s of an sgemm of `gemmSize`^3 on `threads` threads (the best
  /// of a few), and bytes per second of a large memcpy (read + write).
  double gemmFlops = 0, copyBytesPerS = 0;
  int gemmSize = 0, threads = 0;
  /// Whether the figures came from the cache, and its path ("" if none).
  bool cached = false;
  std::string cachePath;
  /// Cores x clock x f32 FLOPs per cycle, when the machine gives its clock.
  std::optional<double> nominalFlops;
  std::string nominalHow;
};

/// The host's peaks on `threads` threads of each of the `ranksHere` ranks
/// that share this machine (they measure at once, as they will train):
/// cached, or measured now (and cached).
HostPeaks hostPeaks(int threads, int ranksHere);

class Communicator;

/// The bus bandwidth of an all-reduce over every rank (bytes per second, as
/// NCCL's tests count it: the bytes a ring moves per rank over the time),
/// measured now on a few MiB; every rank calls it. Null on failure.
std::optional<double> allReduceBandwidth(Communicator &comm);

/// How long the program's own kernel calls take (its matrix products and
/// attention on their own sizes: a small product runs well below the big
/// sgemm's peak, the attention kernel further still, and a step of them is
/// priced at what they do), in seconds a call: cached, or timed now on
/// `threads` threads of each of `ranksHere` ranks (and cached by `writes`).
/// With `comm` every rank calls it: the ranks time the calls any of them
/// lacks, one call at a time and all at once (a barrier before each), so
/// that ranks sharing the machine contend as they will in training. Calls
/// of more than 64 MiB of operands are not timed.
std::map<KernelCall, double> kernelTimes(const std::vector<KernelCall> &calls,
                                         int threads, int ranksHere,
                                         Communicator *comm, bool writes);

/// Adds `entries` to the cache (dtrt/peaks_cache.h), re-read first so that
/// what other ranks wrote meanwhile stays; returns the path written, or ""
/// when it could not be (no error: the next run measures again).
std::string addToPeaksCache(const nlohmann::json &entries);

/// Records the link bandwidth measured over `ranks` ranks that all run on
/// this machine in the cache (dtrt/peaks_cache.h), where `dtc --report`
/// finds it; failing to is no error.
void cacheLinkBandwidth(int ranks, double bytesPerS);

} // namespace dtrt

#endif // DTRT_PEAKS_H
