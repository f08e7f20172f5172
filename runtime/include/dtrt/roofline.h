//===- dtrt/roofline.h - What an op and a collective should cost -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The cost model's arithmetic, shared by the compiler (`dtc --report`'s
// prediction) and the runtime (the verdict's), so that both predict the same
// step from the same counts:
//
//   - an entry point runs once per micro-batch (grad_step, a pipeline's
//     passes) or once per step (apply_step); evaluation's never;
//   - an op takes the slower of its FLOPs at the peak and its bytes at the
//     memory bandwidth (the roofline);
//   - a collective moves what the ring algorithm moves per rank, as NCCL's
//     tests count bus bandwidth: an all-reduce 2 (g-1)/g of its bytes, a
//     reduce-scatter and an all-to-all (g-1)/g, an all-gather (g-1) times
//     its input, over the link bandwidth.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_ROOFLINE_H
#define DTRT_ROOFLINE_H

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace dtrt {

/// How often one optimizer step calls entry point `entry`, with
/// `microbatches` micro-batches a step (the accumulation, or a pipeline's).
inline int64_t entryCallsPerStep(std::string_view entry,
                                 int64_t microbatches) {
  auto startsWith = [&](std::string_view prefix) {
    return entry.substr(0, prefix.size()) == prefix;
  };
  if (entry == "grad_step" || startsWith("pipe_fwd") || startsWith("pipe_bwd"))
    return microbatches;
  return startsWith("apply_step") ? 1 : 0;
}

/// Seconds of an op at the roofline.
inline double rooflineSeconds(double flops, double bytes, double peakFlops,
                              double memoryBytesPerS) {
  return std::max(flops / peakFlops, bytes / memoryBytesPerS);
}

/// Bytes one rank moves for a collective of `kind` ("all-reduce",
/// "reduce-scatter", "all-gather", "all-to-all") whose input is `bytes`, over
/// a group of `group` ranks; 0 for other kinds (a barrier).
inline double ringTrafficBytes(std::string_view kind, double group,
                               double bytes) {
  if (group <= 1)
    return 0;
  double ring = (group - 1) / group;
  if (kind == "all-reduce")
    return 2 * ring * bytes;
  if (kind == "reduce-scatter" || kind == "all-to-all")
    return ring * bytes;
  if (kind == "all-gather")
    return (group - 1) * bytes;
  return 0;
}

} // namespace dtrt

#endif // DTRT_ROOFLINE_H
