//===- FusedToGPU.cpp - dt.fused regions as GPU kernels -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each planned op that is elementwise or moves data (dt/Conversion/
// GPUKernels.h says which) becomes a `gpu.func` kernel taking the arena's
// base. A fused region's body is the CPU loop body's source, the ops'
// buildScalar, applied to one element per thread:
//
//   for (i = block * blockDim + thread; i < N; i += gridDim * blockDim) {
//     idx = delinearize(i, iteration shape)
//     a_k = load(arena + offset_k + linear_k(idx))   // 0 on broadcast dims
//     r   = body(a_0, ...);  store(arena + offset_r + i, r)
//   }
//
// With `reduce_axes` (and for dt.reduce_sum) the loop runs over the output
// elements and each thread sums its reduced axes in order, so the result does
// not depend on the launch; outputs of 32 terms or more get a block each
// (blockSums), and sums over leading axes a block per 32 neighbouring
// outputs, a lane each (columnSums), so that a warp reads a row's
// consecutive elements rather than one element of 32 rows. Transposes, splits,
// concats, slices and pads are the same loop over one side's elements with the
// other side's index mapped; the schedule is that loop over one element.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/GPUKernels.h"
#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dt {
#define GEN_PASS_DEF_CONVERTFUSEDTOGPU
#include "dt/Conversion/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

int64_t product(ArrayRef<int64_t> shape) {
  return ShapedType::getNumElements(shape);
}

int64_t offsetOf(Value v) { return plannedOffset(v); }

/// Builds one kernel's body at `b`.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc, Value arena, int64_t unroll)
      : unroll(unroll), b(b), loc(loc), arena(arena) {}

  /// Elements a thread loads before it stores any (gridLoopUnrolled).
  const int64_t unroll;

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value add(Value i, int64_t v) {
    return v ? b.create<arith::AddIOp>(loc, i, index(v)).getResult() : i;
  }

  /// The element of a tensor at arena byte `offset`, row-major `shape`, at
  /// iteration index `idx` (NumPy broadcasting from the right).
  Value load(Type element, int64_t offset, ArrayRef<int64_t> shape,
             ArrayRef<int64_t> iteration, ArrayRef<Value> idx) {
    return b.create<LLVM::LoadOp>(
        loc, element,
        address(element, offset, linearOf(shape, iteration, idx)));
  }

  /// The row-major position in `shape` of iteration index `idx` (NumPy
  /// broadcasting from the right: dimensions of 1 are not indexed).
  Value linearOf(ArrayRef<int64_t> shape, ArrayRef<int64_t> iteration,
                 ArrayRef<Value> idx) {
    Value linear = index(0);
    size_t lead = iteration.size() - shape.size();
    for (size_t k = 0; k < shape.size(); ++k) {
      linear = b.create<arith::MulIOp>(loc, linear, index(shape[k]));
      if (shape[k] != 1)
        linear = b.create<arith::AddIOp>(loc, linear, idx[lead + k]);
    }
    return linear;
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

  /// The row-major linear position of `idx` in `shape`.
  Value linearize(ArrayRef<Value> idx, ArrayRef<int64_t> shape) {
    Value linear = index(0);
    for (auto [i, d] : llvm::zip(idx, shape))
      linear = b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, linear, index(d)), i);
    return linear;
  }

  /// The element of planned tensor `v` at linear position `linear`.
  Value loadAt(Value v, Value linear) {
    return b.create<LLVM::LoadOp>(loc, elementOf(v),
                                  address(elementOf(v), offsetOf(v), linear));
  }

  /// Stores `value` at linear position `linear` of planned tensor `v`.
  void storeAt(Value v, Value linear, Value value) {
    store(value, offsetOf(v), linear);
  }

  /// `width` consecutive `element`s from linear position `linear` (a
  /// multiple of `width`) of the array at arena byte `offset`, as one vector
  /// load aligned to its size (vectorWidth checked the offset).
  Value loadVector(Type element, int64_t width, int64_t offset, Value linear) {
    auto type = VectorType::get({width}, element);
    unsigned bytes = unsigned(width * bytesOf(element));
    Value at = address(element, offset, linear);
    if (Type words = wordsOf(type))
      return b.create<LLVM::BitcastOp>(
          loc, type, b.create<LLVM::LoadOp>(loc, words, at, bytes));
    return b.create<LLVM::LoadOp>(loc, type, at, bytes);
  }

  /// Stores `vector` at linear position `linear` (a multiple of its width)
  /// of the array at arena byte `offset`.
  void storeVector(Value vector, int64_t offset, Value linear) {
    auto type = llvm::cast<VectorType>(vector.getType());
    Type element = type.getElementType();
    unsigned bytes = unsigned(type.getNumElements() * bytesOf(element));
    Value at = address(element, offset, linear);
    if (Type words = wordsOf(type))
      vector = b.create<LLVM::BitcastOp>(loc, words, vector);
    b.create<LLVM::StoreOp>(loc, vector, at, bytes);
  }

  /// The vector of 32-bit words a vector of narrower elements moves as, or
  /// null: NVPTX splits a 16-bit vector's load into 32-bit pieces, but
  /// loads a vector of words with one instruction.
  Type wordsOf(VectorType type) {
    int64_t bytes = type.getNumElements() * bytesOf(type.getElementType());
    if (bytesOf(type.getElementType()) >= 4 || bytes % 4)
      return nullptr;
    if (bytes == 4)
      return b.getI32Type();
    return VectorType::get({bytes / 4}, b.getI32Type());
  }

  /// Element `lane` of `vector`.
  Value lane(Value vector, int64_t lane) {
    return b.create<LLVM::ExtractElementOp>(
        loc, vector, b.create<arith::ConstantIntOp>(loc, lane, 32));
  }

  /// The vector of `lanes`.
  Value vectorOf(ArrayRef<Value> lanes) {
    Value v = b.create<LLVM::UndefOp>(
        loc, VectorType::get({int64_t(lanes.size())}, lanes[0].getType()));
    for (auto [j, x] : llvm::enumerate(lanes))
      v = b.create<LLVM::InsertElementOp>(
          loc, v, x, b.create<arith::ConstantIntOp>(loc, int64_t(j), 32));
    return v;
  }

  /// `for (g = first thread; g < n / width; g += all threads)
  /// body(g * width)`: the loop of a kernel that takes its elements in
  /// vectorWidth groups (n a multiple of `width`).
  void gridLoopVector(int64_t n, int64_t width,
                      function_ref<void(Value)> body) {
    gridLoop(n / width, [&](Value group) {
      body(b.create<arith::MulIOp>(loc, group, index(width)));
    });
  }

  /// `for (i = first thread; i < n; i += all threads) body(i)`.
  void gridLoop(int64_t n, function_ref<void(Value)> body) {
    auto [first, stride] = threadStart();
    auto loop = b.create<scf::ForOp>(loc, first, index(n), stride);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }

  /// gridLoop over `store(i, compute(i))`, where each thread takes
  /// `unroll` (kGpuUnroll) elements a stride apart at a time and computes
  /// them all (their loads first) before it stores any. A thread then has
  /// that many loads in flight instead of one: a kernel that only streams
  /// memory needs that many bytes in flight per multiprocessor to reach the
  /// device's bandwidth. Any kernel that is right when its elements run in
  /// parallel stays right: there too, other elements' loads may come
  /// before an element's store. The elements left over (fewer than
  /// `unroll` a thread) take the plain loop, as do kernels of fewer than
  /// kGpuUnrollFrom elements.
  void gridLoopUnrolled(int64_t n,
                        function_ref<SmallVector<Value>(Value)> compute,
                        function_ref<void(Value, ArrayRef<Value>)> store) {
    if (unroll < 2 || n < kGpuUnrollFrom) {
      gridLoop(n, [&](Value i) { store(i, compute(i)); });
      return;
    }
    auto [first, stride] = threadStart();
    // Every element of an iteration is in range while i + (u-1) stride < n.
    Value span = b.create<arith::MulIOp>(loc, stride, index(unroll));
    Value reach = b.create<arith::MulIOp>(loc, stride, index(unroll - 1));
    Value bound = b.create<arith::MaxSIOp>(
        loc, b.create<arith::SubIOp>(loc, index(n), reach), index(0));
    auto unrolled =
        b.create<scf::ForOp>(loc, first, bound, span, ValueRange{first});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(unrolled.getBody());
      Value i = unrolled.getInductionVar();
      SmallVector<Value> at;
      SmallVector<SmallVector<Value>> values;
      for (int64_t u = 0; u < unroll; ++u) {
        at.push_back(
            u == 0
                ? i
                : b.create<arith::AddIOp>(
                       loc, i, b.create<arith::MulIOp>(loc, stride, index(u)))
                      .getResult());
        values.push_back(compute(at.back()));
      }
      for (int64_t u = 0; u < unroll; ++u)
        store(at[size_t(u)], values[size_t(u)]);
      b.create<scf::YieldOp>(loc,
                             b.create<arith::AddIOp>(loc, i, span).getResult());
    }
    // The iterations' next start is where this thread's leftovers begin.
    auto rest =
        b.create<scf::ForOp>(loc, unrolled.getResult(0), index(n), stride);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rest.getBody());
    Value i = rest.getInductionVar();
    store(i, compute(i));
  }

  /// This thread's first element and the grid's stride.
  std::pair<Value, Value> threadStart() {
    Value thread = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
    Value block = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
    Value blockDim = b.create<gpu::BlockDimOp>(loc, gpu::Dimension::x);
    Value gridDim = b.create<gpu::GridDimOp>(loc, gpu::Dimension::x);
    Value first = b.create<arith::AddIOp>(
        loc, b.create<arith::MulIOp>(loc, block, blockDim), thread);
    return {first, b.create<arith::MulIOp>(loc, gridDim, blockDim)};
  }

  static int64_t bytesOf(Type element) {
    return int64_t(element.getIntOrFloatBitWidth() / 8);
  }
  static Type elementOf(Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getElementType();
  }
  static ArrayRef<int64_t> shapeOf(Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getShape();
  }

  /// The region's yielded values at iteration index `idx`; with `narrowed`
  /// (narrowedWidenings), the 16-bit values before the final widening.
  /// `linear`, when given, is `idx`'s row-major position in the iteration
  /// shape: an input of that very shape loads there, without the index
  /// arithmetic (which then goes unused, and LLVM drops it).
  FailureOr<SmallVector<Value>> body(FusedOp fused, ArrayRef<Value> idx,
                                     bool narrowed = false,
                                     Value linear = nullptr) {
    ArrayRef<int64_t> iteration = fused.getIterationShape();
    SmallVector<Value> inputs;
    for (Value input : fused.getInputs()) {
      auto type = llvm::cast<RankedTensorType>(input.getType());
      if (linear && type.getShape() == iteration)
        inputs.push_back(loadAt(input, linear));
      else
        inputs.push_back(load(type.getElementType(), offsetOf(input),
                              type.getShape(), iteration, idx));
    }
    return apply(fused, inputs, narrowed);
  }

  /// body for the `width` consecutive iteration elements from row-major
  /// position `first` (vectorWidth's group: a multiple of `width`, which
  /// divides the iteration's last dimension, so the group lies in one row).
  /// An input that varies along the last dimension loads the group's
  /// elements as one vector, one broadcast along it loads one scalar; each
  /// element's body runs on its lanes, and each result comes back as one
  /// vector.
  FailureOr<SmallVector<Value>> vectorBody(FusedOp fused, Value first,
                                           int64_t width, bool narrowed) {
    ArrayRef<int64_t> iteration = fused.getIterationShape();
    SmallVector<Value> idx = delinearize(first, iteration);
    SmallVector<Value> loaded;
    SmallVector<bool> isVector;
    for (Value input : fused.getInputs()) {
      auto type = llvm::cast<RankedTensorType>(input.getType());
      ArrayRef<int64_t> shape = type.getShape();
      Type element = type.getElementType();
      bool varies = !shape.empty() && shape.back() != 1;
      isVector.push_back(varies);
      if (!varies)
        loaded.push_back(load(element, offsetOf(input), shape, iteration, idx));
      else if (shape == iteration)
        loaded.push_back(loadVector(element, width, offsetOf(input), first));
      else
        loaded.push_back(loadVector(element, width, offsetOf(input),
                                    linearOf(shape, iteration, idx)));
    }
    SmallVector<SmallVector<Value>> lanes; // [result][lane]
    for (int64_t j = 0; j < width; ++j) {
      SmallVector<Value> inputs;
      for (auto [v, vector] : llvm::zip(loaded, isVector))
        inputs.push_back(vector ? lane(v, j) : v);
      FailureOr<SmallVector<Value>> values = apply(fused, inputs, narrowed);
      if (failed(values))
        return failure();
      lanes.resize(values->size());
      for (auto [r, v] : llvm::enumerate(*values))
        lanes[r].push_back(v);
    }
    SmallVector<Value> vectors;
    for (ArrayRef<Value> result : lanes)
      vectors.push_back(vectorOf(result));
    return vectors;
  }

  /// The region's ops applied to one element's `inputs` (scalars, in the
  /// order of the region's arguments): its yielded values; with `narrowed`,
  /// the 16-bit values before the final widening.
  FailureOr<SmallVector<Value>> apply(FusedOp fused, ArrayRef<Value> inputs,
                                      bool narrowed) {
    Block &block = fused.getBody().front();
    IRMapping scalars;
    for (auto [arg, input] : llvm::zip(block.getArguments(), inputs))
      scalars.map(arg, input);
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
    for (Value v : block.getTerminator()->getOperands()) {
      // A narrowed widening yields what it would have widened.
      if (auto convert = v.getDefiningOp<ConvertOp>(); convert && narrowed)
        v = convert.getInput();
      yielded.push_back(scalars.lookup(v));
    }
    return yielded;
  }

  /// The address of element `linear` of a `element` array at arena byte
  /// `offset`.
  Value pointer(Type element, int64_t offset, Value linear) {
    return address(element, offset, linear);
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
    return b.create<LLVM::GEPOp>(loc,
                                 LLVM::LLVMPointerType::get(b.getContext()),
                                 b.getI8Type(), arena, ValueRange{byteOffset});
  }

  OpBuilder &b;
  Location loc;
  Value arena;
};

struct ConvertFusedToGPUPass
    : public dt::impl::ConvertFusedToGPUBase<ConvertFusedToGPUPass> {
  using ConvertFusedToGPUBase::ConvertFusedToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    auto kernels = b.create<gpu::GPUModuleOp>(module.getLoc(), "dt_kernels");
    scratch = reductionScratch(module);
    narrowed = narrowedWidenings(module);
    if (!scratch.empty() && !module->hasAttr("dt.arena_bytes")) {
      module.emitError("needs dt-plan-memory's dt.arena_bytes: a split "
                       "reduction keeps its partial sums past the arena");
      return signalPassFailure();
    }
    bool broken = false;
    forEachGeneratedKernel(module, [&](Operation *op, const std::string &name) {
      broken = broken || failed(buildKernel(kernels, op, name));
    });
    if (broken)
      signalPassFailure();
  }

  LogicalResult buildKernel(gpu::GPUModuleOp kernels, Operation *op,
                            StringRef name) {
    MLIRContext *ctx = op->getContext();
    Location loc = op->getLoc();
    for (Value v : op->getOperands())
      if (!llvm::isa<OpResult>(v) || !v.getDefiningOp()->hasAttr("dt.offsets"))
        return op->emitOpError("needs dt-plan-memory's offsets");
    if (op->getNumResults() && !op->hasAttr("dt.offsets"))
      return op->emitOpError("needs dt-plan-memory's offsets");
    OpBuilder b(ctx);
    b.setInsertionPoint(kernels.getBody()->getTerminator());
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto fn = b.create<gpu::GPUFuncOp>(loc, name, b.getFunctionType({ptr}, {}));
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    b.setInsertionPointToStart(&fn.getBody().front());
    KernelBuilder k(b, loc, fn.getArgument(0), unroll);
    int64_t width = vectorWidth(op, unroll);
    LogicalResult built =
        llvm::TypeSwitch<Operation *, LogicalResult>(op)
            .Case([&](FusedOp f) { return buildFused(b, k, fn, f, width); })
            .Case([&](TransposeOp t) {
              ArrayRef<int64_t> perm = t.getPerm();
              Value in = t.getInput(), out = t.getResult();
              auto from = [&](Value i) {
                SmallVector<Value> idx = k.delinearize(i, k.shapeOf(out));
                SmallVector<Value> at(idx.size());
                for (auto [j, p] : llvm::enumerate(perm))
                  at[p] = idx[j];
                return k.linearize(at, k.shapeOf(in));
              };
              if (width > 1) {
                // The last dimension stays: a group is a vector on both
                // sides.
                k.gridLoopVector(product(k.shapeOf(out)), width, [&](Value i) {
                  k.storeVector(k.loadVector(k.elementOf(in), width,
                                             offsetOf(in), from(i)),
                                offsetOf(out), i);
                });
                return success();
              }
              k.gridLoopUnrolled(
                  launchElements(t, unroll),
                  [&](Value i) {
                    return SmallVector<Value>{k.loadAt(in, from(i))};
                  },
                  [&](Value i, ArrayRef<Value> v) { k.storeAt(out, i, v[0]); });
              return success();
            })
            .Case([&](SplitOp s) {
              copyPieces(k, s.getInput(), s.getResults(), s.getAxis(), true,
                         width);
              return success();
            })
            .Case([&](ConcatOp c) {
              copyPieces(k, c.getResult(), c.getInputs(), c.getAxis(), false,
                         width);
              return success();
            })
            .Case([&](SliceOp s) {
              copyPiece(k, s.getInput(), s.getResult(), s.getAxis(),
                        s.getStart(), true, width);
              return success();
            })
            .Case([&](PadOp p) { return buildPad(b, k, p); })
            .Case([&](ReduceSumOp r) { return buildReduceSum(b, k, fn, r); })
            .Case([&](IotaOp i) {
              Value out = i.getResult();
              k.gridLoop(launchElements(i, unroll), [&](Value at) {
                k.storeAt(
                    out, at,
                    b.create<arith::IndexCastOp>(loc, k.elementOf(out), at));
              });
              return success();
            })
            .Case([&](ConstantOp c) -> LogicalResult {
              auto value = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
              if (!value || !value.isSplat())
                return c.emitOpError(
                    "is a dense (non-splat) constant, which the GPU backend "
                    "does not place yet");
              Value out = c.getResult();
              k.gridLoop(launchElements(c, unroll), [&](Value at) {
                k.storeAt(out, at,
                          b.create<arith::ConstantOp>(
                              loc, llvm::cast<TypedAttr>(
                                       value.getSplatValue<Attribute>())));
              });
              return success();
            })
            .Case([&](ScheduleOp s) {
              k.gridLoop(1, [&](Value at) {
                auto asF64 = [&](Value v) -> Value {
                  return b.create<arith::SIToFPOp>(loc, b.getF64Type(),
                                                   k.loadAt(v, at));
                };
                Value rate = buildScheduleRate(b, loc, s, asF64(s.getStep()),
                                               asF64(s.getTotal()));
                Value out = s.getResult();
                k.storeAt(
                    out, at,
                    b.create<arith::TruncFOp>(loc, k.elementOf(out), rate));
              });
              return success();
            })
            .Default([&](Operation *o) {
              return o->emitOpError("has no GPU kernel builder");
            });
    if (failed(built))
      return failure();
    b.setInsertionPointToEnd(&fn.getBody().front());
    b.create<gpu::ReturnOp>(loc);
    return success();
  }

  /// Copies `piece` to (fromWhole: from) its place along `axis` of `whole`,
  /// starting at `start`: one loop over the piece's elements, or over its
  /// groups of `width` (vectorWidth), each one vector on both sides.
  static void copyPiece(KernelBuilder &k, Value whole, Value piece,
                        int64_t axis, int64_t start, bool fromWhole,
                        int64_t width) {
    int64_t n = std::max<int64_t>(
        1, llvm::cast<RankedTensorType>(piece.getType()).getNumElements());
    auto inWhole = [&](Value i) {
      SmallVector<Value> idx = k.delinearize(i, k.shapeOf(piece));
      idx[axis] = k.add(idx[axis], start);
      return k.linearize(idx, k.shapeOf(whole));
    };
    if (width > 1) {
      Type element = k.elementOf(piece);
      k.gridLoopVector(n, width, [&](Value i) {
        Value there = inWhole(i);
        if (fromWhole)
          k.storeVector(k.loadVector(element, width, offsetOf(whole), there),
                        offsetOf(piece), i);
        else
          k.storeVector(k.loadVector(element, width, offsetOf(piece), i),
                        offsetOf(whole), there);
      });
      return;
    }
    // compute hands store the element and its place in the whole.
    k.gridLoopUnrolled(
        n,
        [&](Value i) {
          Value there = inWhole(i);
          return SmallVector<Value>{
              fromWhole ? k.loadAt(whole, there) : k.loadAt(piece, i), there};
        },
        [&](Value i, ArrayRef<Value> v) {
          if (fromWhole)
            k.storeAt(piece, i, v[0]);
          else
            k.storeAt(whole, v[1], v[0]);
        });
  }

  /// copyPiece for consecutive pieces of `whole` along `axis`.
  static void copyPieces(KernelBuilder &k, Value whole, ValueRange pieces,
                         int64_t axis, bool fromWhole, int64_t width) {
    int64_t start = 0;
    for (Value piece : pieces) {
      copyPiece(k, whole, piece, axis, start, fromWhole, width);
      start += k.shapeOf(piece)[axis];
    }
  }

  /// The input where it is, zeros past its end along the axis.
  LogicalResult buildPad(OpBuilder &b, KernelBuilder &k, PadOp p) {
    Location loc = p.getLoc();
    Value in = p.getInput(), out = p.getResult();
    int64_t axis = p.getAxis(), size = k.shapeOf(in)[axis];
    Type elem = k.elementOf(out);
    k.gridLoop(launchElements(p, unroll), [&](Value i) {
      SmallVector<Value> idx = k.delinearize(i, k.shapeOf(out));
      Value inside = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                             idx[axis], k.index(size));
      auto branch = b.create<scf::IfOp>(loc, TypeRange{elem}, inside,
                                        /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&branch.getThenRegion().front());
        b.create<scf::YieldOp>(loc,
                               k.loadAt(in, k.linearize(idx, k.shapeOf(in))));
        b.setInsertionPointToStart(&branch.getElseRegion().front());
        b.create<scf::YieldOp>(
            loc,
            b.create<arith::ConstantOp>(loc, b.getZeroAttr(elem)).getResult());
      }
      k.storeAt(out, i, branch.getResult(0));
    });
    return success();
  }

  /// One thread per output element sums its inputs in order, in f64 for
  /// narrower floats as the CPU loops do.
  LogicalResult buildReduceSum(OpBuilder &b, KernelBuilder &k,
                               gpu::GPUFuncOp fn, ReduceSumOp r) {
    Location loc = r.getLoc();
    Value in = r.getInput(), out = r.getResult();
    ArrayRef<int64_t> shape = k.shapeOf(in);
    SmallVector<int64_t> kept, reduced, keptShape, reducedShape;
    for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
      bool isReduced = llvm::is_contained(r.getAxes(), d);
      (isReduced ? reduced : kept).push_back(d);
      (isReduced ? reducedShape : keptShape).push_back(shape[d]);
    }
    int64_t perOutput = 1;
    for (int64_t s : reducedShape)
      perOutput *= s;
    Type elem = k.elementOf(out);
    auto f = llvm::dyn_cast<FloatType>(elem);
    Type acc = f && f.getWidth() < 64 ? b.getF64Type() : elem;
    int64_t outputs = std::max<int64_t>(1, product(keptShape));
    auto termAt = [&](Value o, Value at) {
      SmallVector<Value> outIdx = k.delinearize(o, keptShape);
      SmallVector<Value> redIdx = k.delinearize(at, reducedShape);
      SmallVector<Value> idx(shape.size());
      for (auto [d, v] : llvm::zip(kept, outIdx))
        idx[d] = v;
      for (auto [d, v] : llvm::zip(reduced, redIdx))
        idx[d] = v;
      return SmallVector<Value>{k.loadAt(in, k.linearize(idx, shape))};
    };
    if (reducesByBlock(outputs, perOutput)) {
      blockSums(b, k, fn, r, outputs, perOutput, {acc}, termAt,
                [&](Value o, ArrayRef<Value> sums) {
                  Value total = sums[0];
                  if (acc != elem)
                    total = b.create<arith::TruncFOp>(loc, elem, total);
                  k.storeAt(out, o, total);
                });
      return success();
    }
    k.gridLoop(launchElements(r, unroll), [&](Value o) {
      SmallVector<Value> outIdx = k.delinearize(o, keptShape);
      Value zero = b.create<arith::ConstantOp>(loc, b.getZeroAttr(acc));
      auto loop = b.create<scf::ForOp>(loc, k.index(0), k.index(perOutput),
                                       k.index(1), ValueRange{zero});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        SmallVector<Value> redIdx =
            k.delinearize(loop.getInductionVar(), reducedShape);
        SmallVector<Value> idx(shape.size());
        for (auto [d, v] : llvm::zip(kept, outIdx))
          idx[d] = v;
        for (auto [d, v] : llvm::zip(reduced, redIdx))
          idx[d] = v;
        Value x = k.loadAt(in, k.linearize(idx, shape));
        if (acc != elem)
          x = b.create<arith::ExtFOp>(loc, acc, x);
        Value acc0 = loop.getRegionIterArg(0);
        Value sum = f ? b.create<arith::AddFOp>(loc, acc0, x).getResult()
                      : b.create<arith::AddIOp>(loc, acc0, x).getResult();
        b.create<scf::YieldOp>(loc, sum);
      }
      Value total = loop.getResult(0);
      if (acc != elem)
        total = b.create<arith::TruncFOp>(loc, elem, total);
      k.storeAt(out, o, total);
    });
    return success();
  }

  /// Sums by blocks: block b takes outputs b, b + grid, ...; its
  /// kGpuThreadsPerBlock threads stride over the output's `perOutput` terms
  /// (`terms(o, r)`), each keeping partial sums in `accs`, which a tree in
  /// workgroup memory adds (the same order on every launch: no atomics), and
  /// thread 0 hands `store(o, sums)` the totals. A split reduction
  /// (splitReduction) walks (output, chunk) pairs instead: each chunk's
  /// block leaves its sums in `op`'s scratch past the arena and counts
  /// itself in the output's counter; the block that counts last sums the
  /// output's partials in chunk order, then stores and resets the counter.
  void blockSums(OpBuilder &b, KernelBuilder &k, gpu::GPUFuncOp fn,
                 Operation *op, int64_t outputs, int64_t perOutput,
                 ArrayRef<Type> accs,
                 function_ref<SmallVector<Value>(Value, Value)> terms,
                 function_ref<void(Value, ArrayRef<Value>)> store) {
    if (sumsColumns(op))
      return columnSums(b, k, fn, op, outputs, perOutput, accs, terms, store);
    Location loc = op->getLoc();
    ReductionSplit split = reductionSplit(op);
    int64_t chunk = split.split() ? split.chunk : perOutput;
    reductionBlocks(
        b, k, fn, loc, accs, outputs, perOutput, split,
        [&](ArrayRef<Value> shared, Value tid, Value o, Value c, Value first,
            Value end) {
          blockTree(
              b, k, shared, accs, b.create<arith::AddIOp>(loc, first, tid), end,
              [&](Value r) { return terms(o, r); },
              chunk >= kGpuUnrollFrom ? k.unroll : 1);
          Value isFirst = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                  tid, k.index(0));
          auto totals = [&] {
            SmallVector<Value> sums;
            for (Value buffer : shared)
              sums.push_back(b.create<memref::LoadOp>(loc, buffer,
                                                      ValueRange{k.index(0)}));
            return sums;
          };
          if (!split.split()) {
            auto branch =
                b.create<scf::IfOp>(loc, isFirst, /*withElseRegion=*/false);
            OpBuilder::InsertionGuard ifGuard(b);
            b.setInsertionPointToStart(&branch.getThenRegion().front());
            store(o, totals());
          } else {
            lastChunk(b, k, fn, op, outputs, o, c, split.chunks, shared, accs,
                      isFirst, totals, store);
          }
        });
  }

  /// The loop of a reduction by blocks over `items` (outputs, or a column
  /// sum's tiles), each cut into `split`'s chunks of terms: block b takes
  /// items (or (item, chunk) pairs) b, b + grid, ... and `body(shared, tid,
  /// item, chunk, first, end)` sums terms [first, end) of the item into the
  /// workgroup buffers `shared` (one per type of `accs`). Every thread runs
  /// every iteration, and waits at its end, since the next one reuses the
  /// buffers.
  void reductionBlocks(
      OpBuilder &b, KernelBuilder &k, gpu::GPUFuncOp fn, Location loc,
      ArrayRef<Type> accs, int64_t items, int64_t perOutput,
      ReductionSplit split,
      function_ref<void(ArrayRef<Value>, Value, Value, Value, Value, Value)>
          body) {
    int64_t chunks = split.chunks,
            chunk = split.split() ? split.chunk : perOutput;
    auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(),
                                                gpu::AddressSpace::Workgroup);
    SmallVector<Value> shared;
    for (Type t : accs)
      shared.push_back(fn.addWorkgroupAttribution(
          MemRefType::get({kGpuThreadsPerBlock}, t, MemRefLayoutAttrInterface(),
                          workgroup),
          loc));
    Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
    Value block = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
    Value grid = b.create<gpu::GridDimOp>(loc, gpu::Dimension::x);
    auto outer =
        b.create<scf::ForOp>(loc, block, k.index(items * chunks), grid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(outer.getBody());
    Value item = outer.getInductionVar(), c = k.index(0);
    if (split.split()) {
      c = b.create<arith::RemUIOp>(loc, item, k.index(chunks));
      item = b.create<arith::DivUIOp>(loc, item, k.index(chunks));
    }
    Value first = b.create<arith::MulIOp>(loc, c, k.index(chunk));
    Value end = b.create<arith::MinUIOp>(
        loc, b.create<arith::AddIOp>(loc, first, k.index(chunk)),
        k.index(perOutput));
    body(shared, tid, item, c, first, end);
    b.create<gpu::BarrierOp>(loc);
  }

  /// The threads' sums of `term(r)` for r = from, from + step, ... below
  /// `end` (step: blockDim), added by a tree in `shared` (the total in
  /// element 0; every thread waits for it). With `unroll` above 1 (a
  /// reduction of many terms), a thread computes that many terms, loads
  /// first, before it adds them in the same order as one at a time: the same
  /// bits, with `unroll` loads in flight instead of one (see
  /// gridLoopUnrolled). With `keep` above 1 the tree stops at `keep` totals,
  /// element i adding the threads i, i + keep, ... (a column sum's lanes).
  static void blockTree(OpBuilder &b, KernelBuilder &k, ArrayRef<Value> shared,
                        ArrayRef<Type> accs, Value from, Value end,
                        function_ref<SmallVector<Value>(Value)> term,
                        int64_t unroll = 1, int64_t step = kGpuThreadsPerBlock,
                        int64_t keep = 1) {
    Location loc = from.getLoc();
    auto add = [&](Value x, Value y) -> Value {
      return llvm::isa<FloatType>(x.getType())
                 ? b.create<arith::AddFOp>(loc, x, y).getResult()
                 : b.create<arith::AddIOp>(loc, x, y).getResult();
    };
    auto addTerms = [&](ValueRange partials, ArrayRef<Value> values) {
      SmallVector<Value> sums;
      for (auto [acc, value, t] : llvm::zip(partials, values, accs)) {
        Value v = value;
        if (!v) { // the body failed; its error is out
          sums.push_back(acc);
          continue;
        }
        if (v.getType() != t)
          v = b.create<arith::ExtFOp>(loc, t, v);
        sums.push_back(add(acc, v));
      }
      return sums;
    };
    Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
    SmallVector<Value> start;
    for (Type t : accs)
      start.push_back(b.create<arith::ConstantOp>(loc, b.getZeroAttr(t)));
    Value rest = from;
    if (unroll > 1) {
      // While the last of an iteration's terms is below `end`.
      Value bound =
          b.create<arith::SubIOp>(loc, end, k.index(step * (unroll - 1)));
      SmallVector<Value> inits = start;
      inits.push_back(from);
      auto unrolled =
          b.create<scf::ForOp>(loc, from, bound, k.index(step * unroll), inits);
      OpBuilder::InsertionGuard unrolledGuard(b);
      b.setInsertionPointToStart(unrolled.getBody());
      Value r = unrolled.getInductionVar();
      SmallVector<SmallVector<Value>> values;
      for (int64_t u = 0; u < unroll; ++u)
        values.push_back(term(k.add(r, u * step)));
      SmallVector<Value> sums(
          unrolled.getRegionIterArgs().take_front(accs.size()));
      for (const SmallVector<Value> &v : values)
        sums = addTerms(sums, v);
      sums.push_back(k.add(r, step * unroll));
      b.create<scf::YieldOp>(loc, sums);
      ValueRange results = unrolled.getResults();
      start.assign(results.begin(), results.begin() + accs.size());
      rest = unrolled.getResults().back();
    }
    auto inner = b.create<scf::ForOp>(loc, rest, end, k.index(step), start);
    {
      OpBuilder::InsertionGuard innerGuard(b);
      b.setInsertionPointToStart(inner.getBody());
      SmallVector<Value> values = term(inner.getInductionVar());
      b.create<scf::YieldOp>(loc, addTerms(inner.getRegionIterArgs(), values));
    }
    for (auto [partial, buffer] : llvm::zip(inner.getResults(), shared))
      b.create<memref::StoreOp>(loc, partial, buffer, ValueRange{tid});
    b.create<gpu::BarrierOp>(loc);
    for (int64_t half = kGpuThreadsPerBlock / 2; half >= keep; half /= 2) {
      Value lower = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, tid,
                                            k.index(half));
      auto branch = b.create<scf::IfOp>(loc, lower, /*withElseRegion=*/false);
      {
        OpBuilder::InsertionGuard ifGuard(b);
        b.setInsertionPointToStart(&branch.getThenRegion().front());
        Value other = b.create<arith::AddIOp>(loc, tid, k.index(half));
        for (Value buffer : shared) {
          Value mine = b.create<memref::LoadOp>(loc, buffer, ValueRange{tid});
          Value theirs =
              b.create<memref::LoadOp>(loc, buffer, ValueRange{other});
          b.create<memref::StoreOp>(loc, add(mine, theirs), buffer,
                                    ValueRange{tid});
        }
      }
      b.create<gpu::BarrierOp>(loc);
    }
  }

  /// Where a split reduction whose scratch is `span` keeps the partial sum
  /// of output `out`, chunk `at`, result `result` of `results`: an 8-byte
  /// slot, by output, chunk and result, past the outputs' counters.
  static Value partialAt(OpBuilder &b, KernelBuilder &k,
                         const ReductionScratch &span, int64_t outputs,
                         int64_t chunks, int64_t results, Value out, Value at,
                         int64_t result) {
    Location loc = out.getLoc();
    int64_t partials = span.offset + (outputs * 4 + 7) / 8 * 8;
    Value linear = b.create<arith::AddIOp>(
        loc, b.create<arith::MulIOp>(loc, out, k.index(chunks)), at);
    Value slot = b.create<arith::AddIOp>(
        loc, b.create<arith::MulIOp>(loc, linear, k.index(results)),
        k.index(result));
    return k.pointer(b.getI64Type(), partials, slot);
  }

  /// Counts one more chunk of output `o` of a split reduction whose scratch
  /// is `span`, once this thread's partials are out; true if it was the
  /// output's last. The partials are out before the count, and the last
  /// chunk's thread reads them after it: __threadfence() on both sides (NVPTX
  /// in LLVM 19 selects no `fence`, so the intrinsic).
  static Value countChunk(OpBuilder &b, KernelBuilder &k,
                          const ReductionScratch &span, Value o,
                          int64_t chunks) {
    Location loc = o.getLoc();
    Type i32 = b.getI32Type();
    auto threadFence = [&] {
      b.create<LLVM::CallIntrinsicOp>(loc, TypeRange{},
                                      b.getStringAttr("llvm.nvvm.membar.gl"),
                                      ValueRange{});
    };
    threadFence();
    Value before = b.create<LLVM::AtomicRMWOp>(
        loc, LLVM::AtomicBinOp::add, k.pointer(i32, span.offset, o),
        b.create<arith::ConstantIntOp>(loc, 1, i32),
        LLVM::AtomicOrdering::monotonic);
    threadFence();
    return b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::eq, before,
        b.create<arith::ConstantIntOp>(loc, chunks - 1, i32));
  }

  /// Column sums (sumsColumns): block b takes tiles of kGpuColumnTile
  /// outputs b, b + grid, ... (or (tile, chunk) pairs, reductionSplit). Lane
  /// l of warp w sums output 32 tile + l over rows first + w, first + w + 8,
  /// ..., so each load of a warp reads consecutive elements of one row, and
  /// a tree over the warps leaves output l's sums in workgroup element l
  /// (the same order on every launch). Lanes past the last output sum its
  /// terms again and store nothing. A split sum's chunks meet as blockSums'
  /// do, but lane by lane: the lane that counts an output's last chunk adds
  /// its partials in chunk order, stores them and resets the counter.
  void columnSums(OpBuilder &b, KernelBuilder &k, gpu::GPUFuncOp fn,
                  Operation *op, int64_t outputs, int64_t perOutput,
                  ArrayRef<Type> accs,
                  function_ref<SmallVector<Value>(Value, Value)> terms,
                  function_ref<void(Value, ArrayRef<Value>)> store) {
    Location loc = op->getLoc();
    ReductionSplit split = reductionSplit(op);
    int64_t chunk = split.split() ? split.chunk : perOutput;
    int64_t tiles = (outputs + kGpuColumnTile - 1) / kGpuColumnTile;
    constexpr int64_t warps = kGpuThreadsPerBlock / kGpuColumnTile;
    // A lane loads 2 or 4 bytes a term, so it keeps twice the usual number
    // of loads in flight (where unrolling is on, and each thread has four
    // rounds of them at least).
    int64_t unroll = k.unroll > 1 ? 2 * k.unroll : 1;
    if (chunk < warps * 4 * unroll)
      unroll = 1;
    reductionBlocks(
        b, k, fn, loc, accs, tiles, perOutput, split,
        [&](ArrayRef<Value> shared, Value tid, Value tile, Value c, Value first,
            Value end) {
          Value lane =
              b.create<arith::RemUIOp>(loc, tid, k.index(kGpuColumnTile));
          Value warp =
              b.create<arith::DivUIOp>(loc, tid, k.index(kGpuColumnTile));
          Value o = b.create<arith::AddIOp>(
              loc, b.create<arith::MulIOp>(loc, tile, k.index(kGpuColumnTile)),
              lane);
          Value valid = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                                o, k.index(outputs));
          Value inside = b.create<arith::MinUIOp>(loc, o, k.index(outputs - 1));
          blockTree(
              b, k, shared, accs, b.create<arith::AddIOp>(loc, first, warp),
              end, [&](Value r) { return terms(inside, r); }, unroll, warps,
              kGpuColumnTile);
          Value mine = b.create<arith::AndIOp>(
              loc, valid,
              b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, tid,
                                      k.index(kGpuColumnTile)));
          auto branch =
              b.create<scf::IfOp>(loc, mine, /*withElseRegion=*/false);
          OpBuilder::InsertionGuard ifGuard(b);
          b.setInsertionPointToStart(&branch.getThenRegion().front());
          SmallVector<Value> sums;
          for (Value buffer : shared)
            sums.push_back(
                b.create<memref::LoadOp>(loc, buffer, ValueRange{tid}));
          if (split.split())
            columnLastChunk(b, k, op, outputs, o, c, split.chunks, accs, sums,
                            store);
          else
            store(o, sums);
        });
  }

  /// A column sum's lane with the sums of chunk `c` of output `o`: leaves
  /// them in the scratch and counts them; if they were the output's last
  /// chunk to finish, adds the output's partials in chunk order, stores the
  /// totals and resets the counter.
  void columnLastChunk(OpBuilder &b, KernelBuilder &k, Operation *op,
                       int64_t outputs, Value o, Value c, int64_t chunks,
                       ArrayRef<Type> accs, ArrayRef<Value> sums,
                       function_ref<void(Value, ArrayRef<Value>)> store) {
    Location loc = op->getLoc();
    ReductionScratch span = scratch.lookup(op);
    int64_t results = int64_t(accs.size());
    auto slot = [&](Value at, int64_t result) {
      return partialAt(b, k, span, outputs, chunks, results, o, at, result);
    };
    for (auto [r, sum] : llvm::enumerate(sums))
      b.create<LLVM::StoreOp>(loc, sum, slot(c, r));
    Value last = countChunk(b, k, span, o, chunks);
    auto branch = b.create<scf::IfOp>(loc, last, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard ifGuard(b);
    b.setInsertionPointToStart(&branch.getThenRegion().front());
    SmallVector<Value> zeros;
    for (Type t : accs)
      zeros.push_back(b.create<arith::ConstantOp>(loc, b.getZeroAttr(t)));
    auto loop = b.create<scf::ForOp>(loc, k.index(0), k.index(chunks),
                                     k.index(1), zeros);
    {
      OpBuilder::InsertionGuard loopGuard(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> next;
      for (auto [r, t] : llvm::enumerate(accs)) {
        // Volatile: other blocks wrote these; no cached copy may answer.
        Value partial =
            b.create<LLVM::LoadOp>(loc, t, slot(loop.getInductionVar(), r),
                                   /*alignment=*/8, /*isVolatile=*/true);
        Value acc = loop.getRegionIterArgs()[r];
        next.push_back(
            llvm::isa<FloatType>(t)
                ? b.create<arith::AddFOp>(loc, acc, partial).getResult()
                : b.create<arith::AddIOp>(loc, acc, partial).getResult());
      }
      b.create<scf::YieldOp>(loc, next);
    }
    store(o, SmallVector<Value>(loop.getResults()));
    b.create<LLVM::StoreOp>(
        loc, b.create<arith::ConstantIntOp>(loc, 0, b.getI32Type()),
        k.pointer(b.getI32Type(), span.offset, o));
  }

  /// A split reduction's chunk `c` of output `o` is summed in `shared`:
  /// thread 0 leaves it in the scratch and counts it; if it was the
  /// output's last chunk to finish, the block adds the output's partials in
  /// chunk order and stores the totals.
  void lastChunk(OpBuilder &b, KernelBuilder &k, gpu::GPUFuncOp fn,
                 Operation *op, int64_t outputs, Value o, Value c,
                 int64_t chunks,
                 ArrayRef<Value> shared, ArrayRef<Type> accs, Value isFirst,
                 function_ref<SmallVector<Value>()> totals,
                 function_ref<void(Value, ArrayRef<Value>)> store) {
    Location loc = op->getLoc();
    ReductionScratch span = scratch.lookup(op);
    int64_t results = int64_t(accs.size());
    Type i32 = b.getI32Type();
    // Each read and write at its 8-byte slot, whatever the sum's type.
    auto slot = [&](Value at, int64_t result) {
      return partialAt(b, k, span, outputs, chunks, results, o, at, result);
    };
    auto flag = fn.addWorkgroupAttribution(
        MemRefType::get({1}, i32, MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            b.getContext(), gpu::AddressSpace::Workgroup)),
        loc);
    {
      auto branch = b.create<scf::IfOp>(loc, isFirst, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard ifGuard(b);
      b.setInsertionPointToStart(&branch.getThenRegion().front());
      for (auto [r, sum] : llvm::enumerate(totals()))
        b.create<LLVM::StoreOp>(loc, sum, slot(c, r));
      Value last = countChunk(b, k, span, o, chunks);
      b.create<memref::StoreOp>(loc,
                                b.create<arith::ExtUIOp>(loc, i32, last),
                                flag, ValueRange{k.index(0)});
    }
    b.create<gpu::BarrierOp>(loc);
    Value isLast = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::ne,
        b.create<memref::LoadOp>(loc, flag, ValueRange{k.index(0)}),
        b.create<arith::ConstantIntOp>(loc, 0, i32));
    auto branch = b.create<scf::IfOp>(loc, isLast, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard ifGuard(b);
    b.setInsertionPointToStart(&branch.getThenRegion().front());
    // Volatile: other blocks wrote these; no cached copy may answer.
    Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
    blockTree(b, k, shared, accs, tid, k.index(chunks), [&](Value at) {
      SmallVector<Value> values;
      for (auto [r, t] : llvm::enumerate(accs))
        values.push_back(b.create<LLVM::LoadOp>(
            loc, t, slot(at, r), /*alignment=*/8, /*isVolatile=*/true));
      return values;
    });
    auto firstBranch =
        b.create<scf::IfOp>(loc, isFirst, /*withElseRegion=*/false);
    b.setInsertionPointToStart(&firstBranch.getThenRegion().front());
    store(o, totals());
    b.create<LLVM::StoreOp>(loc, b.create<arith::ConstantIntOp>(loc, 0, i32),
                            k.pointer(i32, span.offset, o));
  }

  LogicalResult buildFused(OpBuilder &b, KernelBuilder &k, gpu::GPUFuncOp fn,
                           FusedOp fused, int64_t width) {
    Location loc = fused.getLoc();

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

    SmallVector<int64_t> keptShape, reducedShape;
    for (int64_t d : kept)
      keptShape.push_back(iteration[d]);
    for (int64_t d : reduced)
      reducedShape.push_back(iteration[d]);
    if (!reduced.empty() && reducesByBlock(outputs, perOutput)) {
      SmallVector<Type> accs;
      for (Value r : fused.getResults()) {
        Type e = llvm::cast<RankedTensorType>(r.getType()).getElementType();
        auto f = llvm::dyn_cast<FloatType>(e);
        accs.push_back(f && f.getWidth() < 64 ? b.getF64Type() : e);
      }
      bool broken = false;
      blockSums(
          b, k, fn, fused, outputs, perOutput, accs,
          [&](Value o, Value at) {
            SmallVector<Value> idx(iteration.size());
            for (auto [d, v] : llvm::zip(kept, k.delinearize(o, keptShape)))
              idx[d] = v;
            for (auto [d, v] :
                 llvm::zip(reduced, k.delinearize(at, reducedShape)))
              idx[d] = v;
            FailureOr<SmallVector<Value>> values = k.body(fused, idx);
            if (failed(values)) {
              broken = true;
              return SmallVector<Value>(accs.size(), Value());
            }
            return *values;
          },
          [&](Value o, ArrayRef<Value> sums) {
            for (auto [result, sum] : llvm::zip(fused.getResults(), sums)) {
              Type e = k.elementOf(result);
              Value v =
                  sum.getType() == e
                      ? sum
                      : b.create<arith::TruncFOp>(loc, e, sum).getResult();
              k.store(v, offsetOf(result), o);
            }
          });
      return failure(broken);
    }

    LogicalResult status = success();
    if (reduced.empty() && width > 1) {
      k.gridLoopVector(outputs, width, [&](Value first) {
        FailureOr<SmallVector<Value>> vectors =
            k.vectorBody(fused, first, width, narrowed.contains(fused));
        if (failed(vectors)) {
          status = failure();
          return;
        }
        for (auto [result, vector] : llvm::zip(fused.getResults(), *vectors))
          k.storeVector(vector, offsetOf(result), first);
      });
      return status;
    }
    if (reduced.empty()) {
      k.gridLoopUnrolled(
          outputs,
          [&](Value out) {
            FailureOr<SmallVector<Value>> values =
                k.body(fused, k.delinearize(out, iteration),
                       narrowed.contains(fused), out);
            if (failed(values)) {
              status = failure();
              return SmallVector<Value>();
            }
            return *values;
          },
          [&](Value out, ArrayRef<Value> values) {
            for (auto [result, value] : llvm::zip(fused.getResults(), values))
              k.store(value, offsetOf(result), out);
          });
      return status;
    }
    k.gridLoop(outputs, [&](Value out) {
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
      {
        // Each output element's sum, in order.
        SmallVector<Value> zeros;
        for (Value r : fused.getResults()) {
          Type e = llvm::cast<RankedTensorType>(r.getType()).getElementType();
          zeros.push_back(b.create<arith::ConstantOp>(loc, b.getZeroAttr(e)));
        }
        auto inner = b.create<scf::ForOp>(loc, k.index(0), k.index(perOutput),
                                          k.index(1), zeros);
        b.setInsertionPointToStart(inner.getBody());
        FailureOr<SmallVector<Value>> values = k.body(
            fused,
            fullIndex(k.delinearize(inner.getInductionVar(), reducedShape)));
        if (failed(values)) {
          status = failure();
          return;
        }
        SmallVector<Value> sums;
        for (auto [acc, v] : llvm::zip(inner.getRegionIterArgs(), *values))
          sums.push_back(
              llvm::isa<FloatType>(v.getType())
                  ? b.create<arith::AddFOp>(loc, acc, v).getResult()
                  : b.create<arith::AddIOp>(loc, acc, v).getResult());
        b.create<scf::YieldOp>(loc, sums);
        b.setInsertionPointAfter(inner);
        results.assign(inner.getResults().begin(), inner.getResults().end());
      }
      for (auto [result, value] : llvm::zip(fused.getResults(), results))
        k.store(value, offsetOf(result), out);
    });
    return status;
  }

  /// Each split reduction's span past the arena (reductionScratch).
  llvm::DenseMap<Operation *, ReductionScratch> scratch;
  /// The widenings that store 16-bit values (narrowedWidenings).
  llvm::DenseSet<Operation *> narrowed;
};

} // namespace
