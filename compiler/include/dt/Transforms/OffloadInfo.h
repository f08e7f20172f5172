//===- OffloadInfo.h - how offload splits a rank's globals ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `offload = "optimizer"` (ZeRO-Offload) runs the optimizer's update,
// @apply_step, on the host over a host copy of the arena, while the other
// entry points run on the device. The globals fall into three sets:
//
//   - host-only: touched by @apply_step alone (the optimizer's moments, the
//     step counter, the learning rate it reports). dt-plan-memory puts them
//     first in the arena, so the device holds the arena from `dt.host_bytes`
//     on and never the optimizer state;
//   - mirrored: device globals @apply_step also touches (parameters,
//     gradients); the host keeps a copy of each, and the runtime writes both;
//   - device-only: everything else.
//
// Of the mirrored ones, `down` are those @apply_step reads after a device
// entry point wrote them (the gradients: copied to the host before each
// update) and `up` those it writes (the parameters: copied back after it),
// but for `zeroed`, which it only ever sets to zeros (the gradients it
// clears for the next step's accumulation): the device clears its own copy
// rather than receive the host's zeros.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_OFFLOADINFO_H
#define DT_TRANSFORMS_OFFLOADINFO_H

#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <utility>
#include <vector>

namespace dt {

struct OffloadInfo {
  /// In module order.
  std::vector<GlobalOp> hostOnly, mirrored, down, up, zeroed;

  /// The split of a module compiled with `offload = "optimizer"`; nullopt
  /// without it, and for a pipelined module (its updates are one per
  /// pipeline rank, and its stages do not run on GPUs yet).
  static std::optional<OffloadInfo> get(mlir::ModuleOp module);

  /// The planned byte ranges [offset, offset + bytes) of `globals`, adjacent
  /// ones (apart by alignment padding only) merged, so that the runtime
  /// copies the gradients in one piece rather than one per tensor.
  static std::vector<std::pair<int64_t, int64_t>>
  ranges(const std::vector<GlobalOp> &globals);
};

} // namespace dt

#endif // DT_TRANSFORMS_OFFLOADINFO_H
