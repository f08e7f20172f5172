//===- Trace.h - Elaborating the loss into primitive ops --------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Design note. MLIRGen must not re-implement name resolution, model
// instantiation or shape rules, so Sema exports its evaluator as a tracer:
// `traceLoss` runs the job's `loss` expression with concrete shapes and calls a
// `GraphBuilder` once per primitive op, in evaluation order. Every call gets
// operands of exactly the shapes the op needs: the tracer inserts
// `BroadcastTo` for NumPy broadcasting and for scalar constants, resolves
// `transpose(x)` to a permutation and `reshape`'s -1, splits into n results,
// inlines every submodule's forward and unrolls layer lists. Sema checks the
// job with the same evaluator (without a builder), so a job Sema accepted
// traces without errors.
//
// Op contracts (shapes are exact; dtypes of operands agree unless noted):
//   Add Sub Mul Div     a, b of the result's shape.
//   Neg Relu Gelu Tanh Sigmoid Exp Log Sqrt    elementwise, same shape.
//   BroadcastTo         x to attrs.shape (NumPy rules: right-aligned, size-1
//                       or missing dims stretch).
//   MatMul              a[..., m, k] @ b[k, n] (b shared by the batch) or
//                       b[..., k, n] with the same leading dims as a.
//   Transpose           attrs.perm (result dim i = operand dim perm[i]).
//   Reshape             to attrs.shape (same element count).
//   Softmax             over attrs.axis (non-negative).
//   LayerNorm           x[..., C], weight[C], optional bias[C] (2 or 3
//                       operands); attrs.eps.
//   RmsNorm             x[..., C], weight[C]; attrs.eps.
//   Rope                x[..., T, D] (D even), same shape; attrs.theta.
//   Conv2d              x[N, C, H, W], weight[O, C/groups, KH, KW] ->
//                       [N, O, OH, OW]; attrs.stride, padding, dilation,
//                       groups (PyTorch's conv2d without its bias).
//   MaxPool2d AvgPool2d x[N, C, H, W] -> [N, C, OH, OW]; attrs.kernel,
//                       stride, padding (PyTorch's poolings).
//   BatchNorm           x[N, C, ...], weight[C], bias[C], running_mean[C],
//                       running_var[C] (the last two `@buffer` parameters)
//                       -> x's shape; attrs.eps, attrs.momentum. The builder
//                       decides train (batch statistics, running ones
//                       updated) or eval (running statistics) behaviour.
//   Dropout             x (float), same shape; attrs.p in [0, 1). Only a
//                       train trace drops: an eval trace's builder passes x
//                       through.
//   Embedding           table[V, C] (float), ids[...] (i32/i64) -> [..., C].
//   Split               x into attrs.count equal results along attrs.axis.
//   Concat              operands along attrs.axis.
//   Iota                no operands; i32[attrs.count] = 0, 1, ...
//   Attention           q, k, v [..., H, T, D] -> [..., H, T, D], softmax
//                       scale 1/sqrt(D); attrs.causal.
//   Sum Mean            reduce attrs.axis away.
//   CrossEntropy        logits[..., C] (float), labels[...] (i32) -> f32
//                       scalar, the mean over label positions.
//   Mse                 pred, target of one shape -> f32 scalar mean.
//
//===----------------------------------------------------------------------===//

#ifndef DT_SEMA_TRACE_H
#define DT_SEMA_TRACE_H

#include "dt/Sema/Job.h"

#include "llvm/Support/LogicalResult.h"

namespace dt {

/// Which data source a trace reads.
enum class DataRole { Train, Eval };

/// `train`, `eval`.
llvm::StringRef toString(DataRole role);

/// An opaque handle to a value the GraphBuilder made (for instance an index
/// into its own table of mlir::Values).
struct TraceValue {
  uint64_t id = ~uint64_t(0);
  bool isValid() const { return id != ~uint64_t(0); }
};

/// The primitive ops of a trace; see the contracts above.
enum class PrimOp {
  Add,
  Sub,
  Mul,
  Div,
  Neg,
  BroadcastTo,
  MatMul,
  Transpose,
  Reshape,
  Relu,
  Gelu,
  GeluErf,
  Tanh,
  Sigmoid,
  Exp,
  Log,
  Sqrt,
  Softmax,
  LayerNorm,
  RmsNorm,
  Rope,
  Conv2d,
  MaxPool2d,
  AvgPool2d,
  BatchNorm,
  Dropout,
  Embedding,
  Split,
  Slice,
  Concat,
  Iota,
  Attention,
  Sum,
  Mean,
  CrossEntropy,
  Mse,
};

/// `add`, `broadcast_to`, `cross_entropy`, ...
llvm::StringRef toString(PrimOp op);

/// The attributes of a primitive op; each op reads only its own.
struct PrimAttrs {
  /// BroadcastTo, Reshape: the result shape.
  llvm::SmallVector<int64_t, 4> shape;
  /// Transpose: the permutation.
  llvm::SmallVector<int64_t, 4> perm;
  /// Softmax, Split, Concat, Sum, Mean: the axis, non-negative.
  int64_t axis = 0;
  /// Split: the number of results; Iota: the length; Slice: how many
  /// entries it keeps.
  int64_t count = 0;
  /// Slice: the first entry kept.
  int64_t start = 0;
  /// LayerNorm, RmsNorm, BatchNorm.
  double eps = 0;
  /// BatchNorm: the weight of a batch's statistics in the running ones.
  double momentum = 0;
  /// Rope: the base of the rotation frequencies, and their scaling
  /// ([factor, low_freq_factor, high_freq_factor, original]; empty: none).
  double theta = 0;
  llvm::SmallVector<double, 4> ropeScaling;
  /// Attention.
  bool causal = false;
  /// Dropout: the probability of dropping an element.
  double p = 0;
  /// Conv2d (and the poolings' kernel, stride, padding): (height, width) of
  /// each, and the groups.
  llvm::SmallVector<int64_t, 2> kernel, stride, padding, dilation;
  int64_t groups = 1;
};

/// Receives a trace. Implemented by MLIRGen (and by test recorders).
class GraphBuilder {
public:
  virtual ~GraphBuilder();

  /// A parameter's current value; called once per parameter per trace.
  virtual TraceValue param(const ParamInfo &param) = 0;
  /// One batch of a data source's field: `[batch, ...sample shape]`; called
  /// once per field per trace.
  virtual TraceValue input(DataRole role, llvm::StringRef field,
                           const TensorType &type) = 0;
  /// A rank-0 constant of a float dtype.
  virtual TraceValue constant(double value, DType dtype) = 0;
  /// A rank-0 constant of an integer dtype.
  virtual TraceValue constant(int64_t value, DType dtype) = 0;
  /// One primitive op; returns one value per entry of `resultTypes`. `scope`
  /// is the path of the instance whose forward emitted it (empty for the
  /// root model and the loss expression itself).
  virtual llvm::SmallVector<TraceValue, 1>
  op(PrimOp kind, llvm::ArrayRef<TraceValue> operands, const PrimAttrs &attrs,
     llvm::ArrayRef<TensorType> resultTypes, const Location &loc,
     llvm::StringRef scope) = 0;
};

/// What a loss trace produced.
struct LossTrace {
  /// The f32 scalar loss.
  TraceValue loss;
  /// For a top-level `cross_entropy(logits, labels)` (a classifier): its
  /// operands, for accuracy. Invalid otherwise.
  TraceValue logits;
  TraceValue labels;
  TensorType logitsType;
  TensorType labelsType;
};

/// Elaborates `job`'s loss over one batch of `batch` samples of the `role`
/// source, calling `builder` for every parameter, input and op. Errors (only
/// possible for a batch size Sema did not check) are reported to the
/// DiagnosticEngine the job was checked with.
llvm::FailureOr<LossTrace> traceLoss(const Job &job, DataRole role,
                                     int64_t batch, GraphBuilder &builder);

} // namespace dt

#endif // DT_SEMA_TRACE_H
