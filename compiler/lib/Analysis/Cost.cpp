//===- Cost.cpp - what the ops of a rank's program compute ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Analysis/Cost.h"
#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dt;

namespace {

double elements(Type type) {
  auto t = llvm::dyn_cast<ShapedType>(type);
  return t && t.hasStaticShape() ? double(t.getNumElements()) : 0.0;
}

double elements(Value v) { return elements(v.getType()); }

double bytes(Type type) {
  auto t = llvm::dyn_cast<ShapedType>(type);
  if (!t || !t.hasStaticShape())
    return 0.0;
  return double(t.getNumElements()) *
         double((t.getElementTypeBitWidth() + 7) / 8);
}

/// The bytes of every tensor operand and result: each read and written once.
double operandBytes(Operation *op) {
  double total = 0;
  for (Type t : op->getOperandTypes())
    total += bytes(t);
  for (Type t : op->getResultTypes())
    total += bytes(t);
  return total;
}

/// Matrix products of one attention (per slice: 2 scores x D for q k^T and
/// as many for p v) and the softmax over the scores. A causal mask leaves
/// the upper triangle out.
double attentionFlops(Value query, Value key, bool causal) {
  auto q = llvm::cast<ShapedType>(query.getType());
  auto k = llvm::cast<ShapedType>(key.getType());
  int64_t rank = q.getRank();
  double t = double(q.getDimSize(rank - 2)), tk = double(k.getDimSize(rank - 2)),
         d = double(q.getDimSize(rank - 1));
  double slices = elements(query) / (t * d);
  double scores = causal ? t * (t + 1) / 2 : t * tk;
  return slices * (4 * scores * d + 5 * scores);
}

/// 2 M N K for every matrix of a batched product.
double productFlops(Value lhs, Value result, bool transposeLhs) {
  auto a = llvm::cast<ShapedType>(lhs.getType());
  int64_t contracted = transposeLhs ? a.getRank() - 2 : a.getRank() - 1;
  return 2 * elements(result) * double(a.getDimSize(contracted));
}

/// FLOPs per element of the operand the kernel walks, for the ops made of a
/// few passes over a tensor.
constexpr double kLayerNorm = 8, kLayerNormGrad = 12, kSoftmax = 5,
                 kCrossEntropy = 5, kCrossEntropyGrad = 4;
/// RMS norm skips layer norm's centring (a pass and a subtraction per element).
constexpr double kRMSNorm = 5, kRMSNormGrad = 9;

double flopsOf(Operation *op) {
  if (op->hasTrait<OpTrait::Elementwise>() &&
      !isa<ConvertOp, SelectOp>(op))
    return elements(op->getResult(0));
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([](MatmulOp m) {
        return productFlops(m.getLhs(), m.getResult(), m.getTransposeLhs());
      })
      .Case([](MatmulBiasOp m) {
        // The bias is one addition per element of the result.
        return productFlops(m.getLhs(), m.getResult(), m.getTransposeLhs()) +
               elements(m.getResult());
      })
      .Case([](AttentionOp a) {
        return attentionFlops(a.getQuery(), a.getKey(), a.getCausal());
      })
      .Case([](AttentionGradOp a) {
        return 2.5 * attentionFlops(a.getQuery(), a.getKey(), a.getCausal());
      })
      .Case([](SoftmaxOp s) { return kSoftmax * elements(s.getInput()); })
      .Case([](LayerNormOp l) { return kLayerNorm * elements(l.getInput()); })
      .Case([](RMSNormOp l) { return kRMSNorm * elements(l.getInput()); })
      // Two multiplies and an add per element (the angles are a table).
      .Case([](RopeOp r) { return 3 * elements(r.getInput()); })
      // A multiply-add per tap: 2 K per output element, K the window.
      .Case<Conv2dOp, Conv2dInputGradOp, Conv2dWeightGradOp>([](auto c) {
        Conv2dShape s = c.getConv2dShape();
        return 2.0 * double(s.n) * double(s.o) * double(s.oh * s.ow) *
               double(s.c / s.groups * s.kh * s.kw);
      })
      // A compare or an add per tap.
      .Case<MaxPool2dOp, MaxPool2dGradOp, AvgPool2dOp, AvgPool2dGradOp>(
          [](auto p) {
            Conv2dShape s = p.getPool2dShape();
            return double(s.n * s.c) * double(s.oh * s.ow) *
                   double(s.kh * s.kw);
          })
      // A draw per four elements (ten Philox rounds), a compare, a multiply.
      .Case([](DropoutOp d) { return 12 * elements(d.getInput()); })
      .Case([](RMSNormGradOp l) {
        return kRMSNormGrad * elements(l.getInput());
      })
      .Case([](LayerNormGradOp l) {
        return kLayerNormGrad * elements(l.getInput());
      })
      .Case<CrossEntropyOp, ClassStatsOp>([](auto c) {
        return kCrossEntropy * elements(c.getLogits());
      })
      .Case<CrossEntropyGradOp, CrossEntropyGradShardOp>([](auto c) {
        return kCrossEntropyGrad * elements(c.getLogits());
      })
      .Case([](CountCorrectOp c) { return elements(c.getLogits()); })
      .Case([](EmbeddingGradOp e) { return elements(e.getResultGrad()); })
      .Case([](ReduceSumOp r) { return elements(r->getOperand(0)); })
      .Case([](FusedOp f) {
        // One FLOP per element and computing op of the body, over the
        // iteration shape.
        double iterations = 1;
        for (int64_t d : f.getIterationShape())
          iterations *= double(d);
        double perElement = 0;
        for (Operation &inner : f.getBody().front())
          if (inner.hasTrait<OpTrait::Elementwise>() &&
              !isa<ConvertOp, SelectOp>(inner))
            ++perElement;
        return iterations * perElement;
      })
      .Default([](Operation *) { return 0.0; });
}

/// Ops that move no data: a load is its global's buffer, a reshape its
/// operand's, a constant is folded into its users.
bool movesNothing(Operation *op) {
  return isa<LoadOp, StoreOp, ReshapeOp, ConstantOp, YieldOp, func::ReturnOp,
             func::CallOp>(op);
}

} // namespace

Cost dt::costOf(Operation *op) {
  Cost c;
  if (movesNothing(op))
    return c;
  c.flops = flopsOf(op);
  c.bytes = operandBytes(op);
  return c;
}

Cost dt::costOf(func::FuncOp fn) {
  Cost total;
  for (Operation &op : fn.getBody().getOps())
    total += costOf(&op);
  return total;
}

template <typename Product> static TimedKernel productCall(Product m) {
  auto a = llvm::cast<ShapedType>(m.getLhs().getType());
  auto c = llvm::cast<ShapedType>(m.getResult().getType());
  int64_t r = a.getRank(), batch = 1;
  for (int64_t d = 0; d + 2 < r; ++d)
    batch *= a.getDimSize(d);
  int64_t k = m.getTransposeLhs() ? a.getDimSize(r - 2) : a.getDimSize(r - 1);
  return {"matmul",
          {batch, c.getDimSize(r - 2), c.getDimSize(r - 1), k,
           int64_t(m.getTransposeLhs()), int64_t(m.getTransposeRhs())}};
}

/// As DTToKernels calls dtk_attention_f32: slices, T, D, causal.
static TimedKernel attentionCall(StringRef kernel, Value query, bool causal) {
  auto q = llvm::cast<ShapedType>(query.getType());
  int64_t t = q.getDimSize(q.getRank() - 2), d = q.getDimSize(q.getRank() - 1);
  return {kernel.str(), {q.getNumElements() / (t * d), t, d, int64_t(causal)}};
}

/// As DTToKernels calls dtk_conv2d_f32 and its gradients: N, C, H, W, O, KH,
/// KW, OH, OW, the strides, paddings and dilations, groups.
template <typename Conv>
static TimedKernel convolutionCall(StringRef kernel, Conv op) {
  Conv2dShape s = op.getConv2dShape();
  return {kernel.str(),
          {s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow, s.stride[0],
           s.stride[1], s.padding[0], s.padding[1], s.dilation[0],
           s.dilation[1], s.groups}};
}

std::optional<TimedKernel> dt::timedKernel(Operation *op) {
  auto f32 = [](Value v) {
    auto t = llvm::dyn_cast<ShapedType>(v.getType());
    return t && t.hasStaticShape() && t.getElementType().isF32();
  };
  if (auto m = llvm::dyn_cast<MatmulOp>(op); m && f32(m.getLhs()))
    return productCall(m);
  if (auto m = llvm::dyn_cast<MatmulBiasOp>(op); m && f32(m.getLhs()))
    return productCall(m);
  if (auto a = llvm::dyn_cast<AttentionOp>(op); a && f32(a.getQuery()))
    return attentionCall("attention", a.getQuery(), a.getCausal());
  if (auto a = llvm::dyn_cast<AttentionGradOp>(op); a && f32(a.getQuery()))
    return attentionCall("attention_grad", a.getQuery(), a.getCausal());
  if (auto c = llvm::dyn_cast<Conv2dOp>(op); c && f32(c.getInput()))
    return convolutionCall("conv2d", c);
  if (auto c = llvm::dyn_cast<Conv2dInputGradOp>(op); c && f32(c.getWeight()))
    return convolutionCall("conv2d_input_grad", c);
  if (auto c = llvm::dyn_cast<Conv2dWeightGradOp>(op); c && f32(c.getInput()))
    return convolutionCall("conv2d_weight_grad", c);
  return std::nullopt;
}
