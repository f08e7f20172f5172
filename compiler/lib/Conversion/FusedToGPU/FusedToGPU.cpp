//===- FusedToGPU.cpp - dt.fused regions as GPU kernels -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each planned `dt.fused` becomes a `gpu.func` kernel taking the arena's base.
// The body is the CPU loop body's source, the ops' buildScalar, applied to one
// element per thread:
//
//   for (i = block * blockDim + thread; i < N; i += gridDim * blockDim) {
//     idx = delinearize(i, iteration shape)
//     a_k = load(arena + offset_k + linear_k(idx))   // 0 on broadcast dims
//     r   = body(a_0, ...);  store(arena + offset_r + i, r)
//   }
//
// With `reduce_axes` the loop runs over the output elements and each thread
// sums its reduced axes in order, so the result does not depend on the launch.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace dt {
#define GEN_PASS_DEF_CONVERTFUSEDTOGPU
#include "dt/Conversion/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

int64_t offsetOf(Value v) {
  auto result = llvm::cast<OpResult>(v);
  auto offsets = result.getOwner()->getAttrOfType<ArrayAttr>("dt.offsets");
  return llvm::cast<IntegerAttr>(offsets[result.getResultNumber()]).getInt();
}

/// Builds one kernel's body at `b`.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc, Value arena)
      : b(b), loc(loc), arena(arena) {}

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }

  /// The element of a tensor at arena byte `offset`, row-major `shape`, at
  /// iteration index `idx` (NumPy broadcasting from the right).
  Value load(Type element, int64_t offset, ArrayRef<int64_t> shape,
             ArrayRef<int64_t> iteration, ArrayRef<Value> idx) {
    Value linear = index(0);
    size_t lead = iteration.size() - shape.size();
    for (size_t k = 0; k < shape.size(); ++k) {
      linear = b.create<arith::MulIOp>(loc, linear, index(shape[k]));
      if (shape[k] != 1)
        linear = b.create<arith::AddIOp>(loc, linear, idx[lead + k]);
    }
    return b.create<LLVM::LoadOp>(loc, element, address(element, offset, linear));
  }

  void store(Value value, int64_t offset, Value linear) {
    b.create<LLVM::StoreOp>(loc, value,
                            address(value.getType(), offset, linear));
  }

  /// idx[d] of the row-major `shape` at linear position `linear`.
  SmallVector<Value> delinearize(Value linear, ArrayRef<int64_t> shape) {
    SmallVector<Value> idx(shape.size());
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      idx[d] = b.create<arith::RemUIOp>(loc, linear, index(shape[d]));
      linear = b.create<arith::DivUIOp>(loc, linear, index(shape[d]));
    }
    return idx;
  }

  /// The region's yielded values at iteration index `idx`.
  FailureOr<SmallVector<Value>> body(FusedOp fused, ArrayRef<Value> idx) {
    Block &block = fused.getBody().front();
    ArrayRef<int64_t> iteration = fused.getIterationShape();
    IRMapping scalars;
    for (auto [arg, input] : llvm::zip(block.getArguments(), fused.getInputs())) {
      auto type = llvm::cast<RankedTensorType>(input.getType());
      scalars.map(arg, load(type.getElementType(), offsetOf(input),
                            type.getShape(), iteration, idx));
    }
    for (Operation &op : block.without_terminator()) {
      auto scalar = llvm::dyn_cast<ScalarizableOpInterface>(op);
      if (!scalar)
        return op.emitOpError("has no scalar body for a GPU kernel");
      SmallVector<Value> operands;
      for (Value v : op.getOperands())
        operands.push_back(scalars.lookup(v));
      scalars.map(op.getResult(0), scalar.buildScalar(b, loc, operands, 1));
    }
    SmallVector<Value> yielded;
    for (Value v : block.getTerminator()->getOperands())
      yielded.push_back(scalars.lookup(v));
    return yielded;
  }

private:
  Value address(Type element, int64_t offset, Value linear) {
    Value byteOffset = b.create<arith::IndexCastOp>(
        loc, b.getI64Type(),
        b.create<arith::AddIOp>(
            loc, index(offset),
            b.create<arith::MulIOp>(
                loc, linear,
                index(int64_t(element.getIntOrFloatBitWidth() / 8)))));
    return b.create<LLVM::GEPOp>(loc, LLVM::LLVMPointerType::get(b.getContext()),
                                 b.getI8Type(), arena, ValueRange{byteOffset});
  }

  OpBuilder &b;
  Location loc;
  Value arena;
};

struct ConvertFusedToGPUPass
    : public dt::impl::ConvertFusedToGPUBase<ConvertFusedToGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    auto kernels = b.create<gpu::GPUModuleOp>(module.getLoc(), "dt_kernels");
    for (auto fn : llvm::to_vector(module.getOps<func::FuncOp>())) {
      int n = 0;
      WalkResult walk = fn.walk([&](FusedOp fused) {
        std::string name = (fn.getSymName() + "_fused_" + Twine(n++)).str();
        if (failed(buildKernel(kernels, fused, name)))
          return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
    }
  }

  LogicalResult buildKernel(gpu::GPUModuleOp kernels, FusedOp fused,
                            StringRef name) {
    MLIRContext *ctx = fused.getContext();
    Location loc = fused.getLoc();
    for (Value v : fused.getInputs())
      if (!llvm::isa<OpResult>(v) ||
          !v.getDefiningOp()->hasAttr("dt.offsets"))
        return fused.emitOpError("needs dt-plan-memory's offsets");
    OpBuilder b(ctx);
    b.setInsertionPoint(kernels.getBody()->getTerminator());
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto fn = b.create<gpu::GPUFuncOp>(loc, name,
                                       b.getFunctionType({ptr}, {}));
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    b.setInsertionPointToStart(&fn.getBody().front());
    KernelBuilder k(b, loc, fn.getArgument(0));

    // The shape the threads walk: the results' (reduced axes removed).
    ArrayRef<int64_t> iteration = fused.getIterationShape();
    SmallVector<int64_t> reduced, kept;
    std::optional<ArrayRef<int64_t>> axes = fused.getReduceAxes();
    for (int64_t d = 0; d < int64_t(iteration.size()); ++d)
      (axes && llvm::is_contained(*axes, d) ? reduced : kept).push_back(d);
    int64_t outputs = 1, perOutput = 1;
    for (int64_t d : kept)
      outputs *= iteration[d];
    for (int64_t d : reduced)
      perOutput *= iteration[d];

    Value thread = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
    Value block = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
    Value blockDim = b.create<gpu::BlockDimOp>(loc, gpu::Dimension::x);
    Value gridDim = b.create<gpu::GridDimOp>(loc, gpu::Dimension::x);
    Value first = b.create<arith::AddIOp>(
        loc, b.create<arith::MulIOp>(loc, block, blockDim), thread);
    Value stride = b.create<arith::MulIOp>(loc, gridDim, blockDim);
    auto loop = b.create<scf::ForOp>(loc, first, k.index(outputs), stride);
    b.setInsertionPointToStart(loop.getBody());
    Value out = loop.getInductionVar();

    SmallVector<int64_t> keptShape;
    for (int64_t d : kept)
      keptShape.push_back(iteration[d]);
    SmallVector<Value> outIdx = k.delinearize(out, keptShape);
    auto fullIndex = [&](ArrayRef<Value> reducedIdx) {
      SmallVector<Value> idx(iteration.size());
      for (auto [d, v] : llvm::zip(kept, outIdx))
        idx[d] = v;
      for (auto [d, v] : llvm::zip(reduced, reducedIdx))
        idx[d] = v;
      return idx;
    };

    SmallVector<Value> results;
    if (reduced.empty()) {
      FailureOr<SmallVector<Value>> values = k.body(fused, fullIndex({}));
      if (failed(values))
        return failure();
      results = *values;
    } else {
      // Each output element's sum, in order.
      SmallVector<Value> zeros;
      for (Value r : fused.getResults()) {
        Type e = llvm::cast<RankedTensorType>(r.getType()).getElementType();
        zeros.push_back(b.create<arith::ConstantOp>(loc, b.getZeroAttr(e)));
      }
      auto inner = b.create<scf::ForOp>(loc, k.index(0), k.index(perOutput),
                                        k.index(1), zeros);
      b.setInsertionPointToStart(inner.getBody());
      SmallVector<int64_t> reducedShape;
      for (int64_t d : reduced)
        reducedShape.push_back(iteration[d]);
      FailureOr<SmallVector<Value>> values = k.body(
          fused,
          fullIndex(k.delinearize(inner.getInductionVar(), reducedShape)));
      if (failed(values))
        return failure();
      SmallVector<Value> sums;
      for (auto [acc, v] : llvm::zip(inner.getRegionIterArgs(), *values))
        sums.push_back(llvm::isa<FloatType>(v.getType())
                           ? b.create<arith::AddFOp>(loc, acc, v).getResult()
                           : b.create<arith::AddIOp>(loc, acc, v).getResult());
      b.create<scf::YieldOp>(loc, sums);
      b.setInsertionPointAfter(inner);
      results.assign(inner.getResults().begin(), inner.getResults().end());
    }
    for (auto [result, value] : llvm::zip(fused.getResults(), results))
      k.store(value, offsetOf(result), out);
    b.setInsertionPointToEnd(&fn.getBody().front());
    b.create<gpu::ReturnOp>(loc);
    return success();
  }
};

} // namespace
