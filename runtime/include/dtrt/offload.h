//===- dtrt/offload.h - The optimizer in host memory ------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `offload = "optimizer"` (ZeRO-Offload) on a GPU: the optimizer's state and
// its update stay in host memory, and the device holds the parameters,
// gradients and activations. dtc placed what only dt_apply_step touches at
// the arena's start (the manifest's OffloadSplit), so a Device decorator can
// split one arena in two:
//
//   - the device keeps offsets from `hostBytes` on (the arena's base is its
//     memory less hostBytes, an address the device never touches below);
//   - the host keeps a mirror of the whole arena: the state itself, and a
//     copy of each device range dt_apply_step reads or writes. The runtime's
//     copies are routed by offset, and its writes to mirrored ranges (the
//     initial, loaded or restored parameters) go to both;
//   - dt_apply_step becomes: copy the gradients down, run the program's own
//     CPU dt_apply_step over the mirror (its collectives are the CPU's, over
//     the rank's communicator), copy the parameters back up, and clear on
//     the device what the update cleared (gradients it accumulates into).
//
// The loader, the loop and the checkpointer see one arena, as before.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_OFFLOAD_H
#define DTRT_OFFLOAD_H

#include "dtrt/device.h"
#include "dtrt/manifest.h"

#include <memory>

namespace dtrt {

/// `device` with the arena split as `split` says. Its programFor runs the
/// program's CPU dt_apply_step on the host between the copies; one such
/// device is open per process.
std::unique_ptr<Device> offloadOptimizer(std::unique_ptr<Device> device,
                                         const OffloadSplit &split);

} // namespace dtrt

#endif // DTRT_OFFLOAD_H
