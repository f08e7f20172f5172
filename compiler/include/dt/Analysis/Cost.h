//===- Cost.h - what the ops of a rank's program compute --------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The cost model's counts: per op of the dt dialect, with the shapes of one
// rank's program, the floating-point operations it performs and the bytes it
// must at least read and write. They are counted from the program the
// compiler emits, not from a formula of the model:
//
//   - a multiply-add is 2 FLOPs; a matrix product [M, K] x [K, N] is 2 M N K
//     per batch;
//   - attention counts its two products per (batch, head) slice, 4 T T' D,
//     with the causal mask's upper triangle left out as the kernels skip it
//     (T (T + 1) / 2 scores per slice); its gradient recomputes the scores
//     and takes five products, 2.5 times the forward;
//   - elementwise ops count one FLOP per element and op (a transcendental
//     function too), a fused region one per element and op of its body;
//     layer norm, softmax and cross-entropy count the passes their kernels
//     make over each element;
//   - moves (loads, views, transposes, lookups) and collectives count bytes
//     only.
//
// Bytes are those of the operands and results (what an op that reads each
// once and writes each once moves to and from memory), so FLOPs / bytes is
// the op's arithmetic intensity.
//
//===----------------------------------------------------------------------===//

#ifndef DT_ANALYSIS_COST_H
#define DT_ANALYSIS_COST_H

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace dt {

struct Cost {
  double flops = 0;
  double bytes = 0;

  Cost &operator+=(const Cost &other) {
    flops += other.flops;
    bytes += other.bytes;
    return *this;
  }
};

/// What one op costs on its rank (nested regions included: a dt.fused
/// region's body is costed over its iteration shape).
Cost costOf(mlir::Operation *op);

/// The sum over the ops of `fn`'s body.
Cost costOf(mlir::func::FuncOp fn);

/// A kernel call whose time depends on its sizes more than a roofline says,
/// which the prediction times on the machine instead (dtrt/peaks_cache.h):
/// an f32 matrix product ("matmul": dtk_matmul_f32's batch, M, N, K,
/// trans_a, trans_b), attention ("attention", "attention_grad": slices,
/// T, D, causal) and convolutions ("conv2d", "conv2d_input_grad",
/// "conv2d_weight_grad": N, C, H, W, O, KH, KW, OH, OW, strides, paddings,
/// dilations, groups), with the arguments the CPU kernels take.
struct TimedKernel {
  std::string kernel;
  std::vector<int64_t> args;
};
std::optional<TimedKernel> timedKernel(mlir::Operation *op);

} // namespace dt

#endif // DT_ANALYSIS_COST_H
