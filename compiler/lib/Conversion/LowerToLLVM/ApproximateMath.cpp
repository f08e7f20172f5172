//===- ApproximateMath.cpp - polynomial approximations of math ops --------===//
//
// Rewrites f32 tanh, exp, log, ... into MLIR's polynomial approximations, so
// that fused loops (GELU, sigmoid, the softmax of cross-entropy done
// elementwise) stay plain arithmetic that LLVM vectorises rather than one libm
// call per element.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace dt {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "dt/Conversion/Passes.h.inc"
} // namespace dt

using namespace mlir;

namespace {
struct ApproximateMathPass
    : public dt::impl::ApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(
            applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
