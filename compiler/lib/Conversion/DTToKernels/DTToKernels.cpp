//===- DTToKernels.cpp - planned entry points to loops and kernels --------===//
//
// After dt-plan-memory every tensor has an arena offset, so lowering needs no
// value mapping: each op reads its operands from, and writes its results to,
// views of the arena at their offsets. Elementwise regions become
// linalg.generic (then loops), the rest become linalg copies/reductions or
// calls into kernels/. See Passes.td.
//
// Pattern: %y = dt.fused(%a, %b) {...}
//            => linalg.generic ins(view a, view b) outs(view y) { scalar body }
// Pattern: %c = dt.matmul %a, %b
//            => call @dtk_matmul_f32(ptr a, ptr b, ptr c, batch, m, n, k, ta, tb)
// Pattern: %c = dt.matmul_bias %a, %b, %bias
//            => call @dtk_matmul_bias_f32(ptr a, ptr b, ptr bias, ptr c, ...)
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/ArenaPlan.h"
#include "dt/Conversion/GPUKernels.h"
#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <map>
#include <set>

namespace dt {
#define GEN_PASS_DEF_CONVERTDTTOKERNELS
#include "dt/Conversion/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

int64_t product(ArrayRef<int64_t> s) {
  int64_t p = 1;
  for (int64_t d : s)
    p *= d;
  return p;
}

Type elementOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getElementType();
}

/// The bytes the plan gives a value of `type` (as dt-plan-memory counts them).
int64_t bytesOf(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  return std::max<int64_t>(1, t.getNumElements() *
                                  ((t.getElementTypeBitWidth() + 7) / 8));
}

/// A global that is a ring of `count` slots of `stride` bytes (a pipeline
/// stage's stash): its values are planned in slot 0, and an entry point
/// addresses the slot that the i64 in `index` names.
struct Ring {
  ArenaSpan whole, index;
  int64_t stride = 0, count = 0;
  /// The pipeline rank that holds it (-1: every rank). Ranks' own globals
  /// share offsets, so a function sees only its rank's rings.
  int64_t ppRank = -1;
};

/// Lowers the body of one entry point into a new function over the arena.
class EntryLowering {
public:
  EntryLowering(ModuleOp module, func::FuncOp fn, int64_t arenaBytes,
                const llvm::StringMap<ArenaSpan> &globals,
                ArrayRef<Ring> rings, ArrayRef<int64_t> meshShape)
      : module(module), source(fn), b(module.getContext()), loc(fn.getLoc()),
        arenaBytes(arenaBytes), globals(globals), rings(rings),
        meshShape(meshShape) {}

  LogicalResult run() {
    MLIRContext *ctx = module.getContext();
    auto arenaType = MemRefType::get({arenaBytes}, IntegerType::get(ctx, 8));
    b.setInsertionPoint(source);
    target = b.create<func::FuncOp>(loc, ("dt_" + source.getSymName()).str(),
                                    FunctionType::get(ctx, {arenaType}, {}));
    target->setAttr(kPlanAttr, b.getDenseI64ArrayAttr(planOf(source)));
    Block *entry = target.addEntryBlock();
    b.setInsertionPointToStart(entry);
    enterFunction(entry->getArgument(0));

    for (Operation &op : source.getBody().front()) {
      loc = op.getLoc();
      // dt-number-spans numbered the ops that do work: each is a span of the
      // run's traces, which the runtime records only while it traces.
      auto span = op.getAttrOfType<IntegerAttr>(names::kSpanAttr);
      if (span)
        call("dtrt_span_begin", {i32(span.getInt())});
      if (failed(lower(&op)))
        return failure();
      if (span)
        call("dtrt_span_end", {i32(span.getInt())});
    }
    return success();
  }

private:
  /// Makes `arenaArg` the arena of the function being built, and its base
  /// address (from which kernel pointers are made, and after which views go)
  /// the first thing in it.
  void enterFunction(Value arenaArg) {
    arena = arenaArg;
    views.clear();
    slotShifts.clear();
    Value address =
        b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, arena);
    Value asInt = b.create<arith::IndexCastOp>(loc, b.getI64Type(), address);
    base = b.create<LLVM::IntToPtrOp>(
        loc, LLVM::LLVMPointerType::get(b.getContext()), asInt);
  }

  ModuleOp module;
  func::FuncOp source, target;
  OpBuilder b;
  Location loc;
  int64_t arenaBytes;
  const llvm::StringMap<ArenaSpan> &globals;
  ArrayRef<Ring> rings;
  /// The sizes of the mesh's axes (empty without a mesh).
  ArrayRef<int64_t> meshShape;
  Value arena, base;
  llvm::DenseMap<std::pair<int64_t, Type>, Value> views;
  /// Per ring (by its offset), the byte offset of the slot this call uses.
  llvm::DenseMap<int64_t, Value> slotShifts;
  /// Loops outlined from `target` so far (they are named after it).
  unsigned outlined = 0;

  //===--------------------------------------------------------------------===//
  // Arena access
  //
  // Every address is made from a planned buffer (an ArenaSpan: where the plan
  // put a value or a global) and records it as `dt.buffer = [offset, bytes]`; the
  // function records every buffer of its plan as `dt.plan`. dt-verify-arena
  // checks each address and the extent accessed through it against those.
  //===--------------------------------------------------------------------===//

  /// The planned buffers of `fn`: the globals and every value it computes,
  /// as (offset, bytes) pairs, each once.
  SmallVector<int64_t> planOf(func::FuncOp fn) {
    std::set<std::pair<int64_t, int64_t>> buffers;
    for (const auto &g : globals)
      buffers.insert({g.second.offset, g.second.bytes});
    fn.walk([&](Operation *op) {
      if (op->getAttrOfType<ArrayAttr>("dt.offsets"))
        for (Value r : op->getResults())
          buffers.insert({offsetOf(r), bytesOf(r.getType())});
    });
    SmallVector<int64_t> flat;
    for (auto [offset, bytes] : buffers)
      flat.append({offset, bytes});
    return flat;
  }

  static int64_t offsetOf(Value v) { return plannedOffset(v); }

  /// The buffer the plan gave `v`.
  ArenaSpan bufferOf(Value v) { return {offsetOf(v), bytesOf(v.getType())}; }

  ArenaSpan globalBuffer(StringRef name) { return globals.lookup(name); }

  void tag(Operation *op, ArenaSpan buffer) {
    op->setAttr(kBufferAttr,
                b.getDenseI64ArrayAttr({buffer.offset, buffer.bytes}));
  }

  /// The ring whose slot 0 holds `buffer`, if any.
  const Ring *ringOf(ArenaSpan buffer) {
    for (const Ring &r : rings)
      if ((r.ppRank < 0 || r.ppRank == pipelineRankOf(source)) &&
          buffer.offset >= r.whole.offset &&
          buffer.offset < r.whole.offset + r.stride)
        return &r;
    return nullptr;
  }

  /// The byte offset (an index) of the slot of `ring` this call uses: the
  /// runtime's slot number, kept inside [0, count) so that no value of it can
  /// address outside the ring. Made once, at the top of the function.
  Value slotShift(const Ring &ring) {
    Value &shift = slotShifts[ring.whole.offset];
    if (shift)
      return shift;
    Value index = view(ring.index, {}, b.getI64Type());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(index.getDefiningOp());
    auto constant = [&](int64_t v) {
      return b.create<arith::ConstantIndexOp>(loc, v);
    };
    Value k = b.create<arith::IndexCastOp>(
        loc, b.getIndexType(),
        b.create<memref::LoadOp>(loc, index, ValueRange{}));
    k = b.create<arith::MaxSIOp>(loc, k, constant(0));
    k = b.create<arith::MinSIOp>(loc, k, constant(ring.count - 1));
    shift = b.create<arith::AddIOp>(
        loc, constant(ring.whole.offset),
        b.create<arith::MulIOp>(loc, k, constant(ring.stride)));
    return shift;
  }

  /// The shift of `buffer` from the arena's start: a constant, or inside a
  /// ring, its place in the slot this call uses. Made at the builder's
  /// insertion point, which must follow the ring's slot shift.
  Value shiftOf(ArenaSpan buffer, const Ring *ring) {
    if (!ring)
      return b.create<arith::ConstantIndexOp>(loc, buffer.offset);
    Value shift = slotShift(*ring);
    if (buffer.offset == ring->whole.offset)
      return shift;
    return b.create<arith::AddIOp>(
        loc, shift,
        b.create<arith::ConstantIndexOp>(loc,
                                         buffer.offset - ring->whole.offset));
  }

  /// A view of `buffer` with `shape` and `elem` (identity layout).
  Value view(ArenaSpan buffer, ArrayRef<int64_t> shape, Type elem) {
    auto type = MemRefType::get(shape, elem);
    Value &slot = views[{buffer.offset, type}];
    if (!slot) {
      // Views are made at the top of the function so that every use is
      // dominated (after the slot's shift in a ring).
      const Ring *ring = ringOf(buffer);
      Operation *after =
          ring ? slotShift(*ring).getDefiningOp() : base.getDefiningOp();
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(after);
      Value shift = shiftOf(buffer, ring);
      Value made =
          b.create<memref::ViewOp>(loc, type, arena, shift, ValueRange{});
      tag(made.getDefiningOp(), ring ? ring->whole : buffer);
      // `slot` may have moved: slotShift can add views to the map.
      views[{buffer.offset, type}] = made;
      return made;
    }
    return slot;
  }

  Value viewOf(Value v) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return view(bufferOf(v), t.getShape(), t.getElementType());
  }

  /// The address of `buffer`. The offset is an i64 operand: MLIR 19 keeps a
  /// GEP's constant indices in 29 bits (LLVM::GEPArg), so a constant index
  /// would silently wrap for offsets of 256 MiB and more.
  Value pointer(ArenaSpan buffer) {
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    const Ring *ring = ringOf(buffer);
    Value offset =
        ring ? b.create<arith::IndexCastOp>(loc, b.getI64Type(),
                                            shiftOf(buffer, ring))
                   .getResult()
             : i64(buffer.offset);
    auto gep = b.create<LLVM::GEPOp>(loc, ptr, b.getI8Type(), base,
                                     ValueRange{offset});
    tag(gep, ring ? ring->whole : buffer);
    return gep;
  }
  Value pointerOf(Value v) { return pointer(bufferOf(v)); }

  Value i64(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 64); }
  Value i32(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 32); }
  Value f32(double v) {
    return b.create<arith::ConstantFloatOp>(loc, APFloat(float(v)),
                                            b.getF32Type());
  }
  Value f64(double v) {
    return b.create<arith::ConstantFloatOp>(loc, APFloat(v), b.getF64Type());
  }

  /// Calls kernel `name`, declaring it on first use.
  void call(StringRef name, ArrayRef<Value> args) {
    auto fnType =
        FunctionType::get(b.getContext(), ValueRange(args).getTypes(), {});
    if (!module.lookupSymbol<func::FuncOp>(name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      b.create<func::FuncOp>(loc, name, fnType).setPrivate();
    }
    b.create<func::CallOp>(loc, name, TypeRange{}, args);
  }

  /// Calls runtime function `name`, which returns an i64.
  Value callI64(StringRef name, ArrayRef<Value> args) {
    auto fnType = FunctionType::get(
        b.getContext(), ValueRange(args).getTypes(), {b.getI64Type()});
    if (!module.lookupSymbol<func::FuncOp>(name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      b.create<func::FuncOp>(loc, name, fnType).setPrivate();
    }
    return b.create<func::CallOp>(loc, name, TypeRange{b.getI64Type()}, args)
        .getResult(0);
  }

  /// The value of a scalar in the arena.
  Value loadScalar(Value v) {
    return b.create<memref::LoadOp>(loc, viewOf(v), ValueRange{});
  }

  /// Kernels exist for f32 data only (and i32 ids and labels).
  LogicalResult requireF32(Operation *op, ArrayRef<Value> values) {
    for (Value v : values)
      if (!elementOf(v).isF32())
        return op->emitOpError("has ")
               << elementOf(v)
               << " data; the CPU backend's kernels take f32 only";
    return success();
  }
  LogicalResult requireI32(Operation *op, Value v) {
    if (!elementOf(v).isInteger(32))
      return op->emitOpError("needs i32 ids or labels on the CPU backend, not ")
             << elementOf(v);
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  LogicalResult lower(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](LoadOp l) {
          return copyIfMoved(globalBuffer(l.getGlobal()), l.getResult());
        })
        .Case([&](StoreOp s) {
          ArenaSpan to = globalBuffer(s.getGlobal());
          if (offsetOf(s.getValue()) != to.offset)
            b.create<memref::CopyOp>(
                loc, viewOf(s.getValue()),
                view(to, shapeOf(s.getValue()), elementOf(s.getValue())));
          return success();
        })
        .Case([&](ReshapeOp) { return success(); }) // a view of the same bytes
        .Case([&](WaitOp w) { return lowerWait(w); })
        .Case([&](ConstantOp c) { return lowerConstant(c); })
        .Case([&](IotaOp i) { return lowerIota(i); })
        .Case([&](FusedOp f) { return lowerFused(f); })
        .Case([&](ReduceSumOp r) { return lowerReduceSum(r); })
        .Case([&](TransposeOp t) { return lowerTranspose(t); })
        .Case([&](SplitOp s) {
          return lowerSplitOrConcat(s, s.getInput(), s.getResults(),
                                    s.getAxis(), true);
        })
        .Case([&](ConcatOp c) {
          return lowerSplitOrConcat(c, c.getResult(), c.getInputs(),
                                    c.getAxis(), false);
        })
        .Case([&](SliceOp s) { return lowerSlice(s); })
        .Case([&](PadOp p) { return lowerPad(p); })
        .Case([&](mesh::AllReduceOp c) {
          return lowerCollective(c, "dtrt_all_reduce", c.getInput(),
                                 c.getResult(), c.getMeshAxes());
        })
        .Case([&](mesh::ReduceScatterOp c) {
          return lowerCollective(c, "dtrt_reduce_scatter", c.getInput(),
                                 c.getResult(), c.getMeshAxes());
        })
        .Case([&](mesh::AllGatherOp c) {
          return lowerCollective(c, "dtrt_all_gather", c.getInput(),
                                 c.getResult(), c.getMeshAxes());
        })
        .Case([&](mesh::AllToAllOp c) {
          return lowerCollective(c, "dtrt_all_to_all", c.getInput(),
                                 c.getResult(), c.getMeshAxes());
        })
        .Case([&](mesh::AllSliceOp c) {
          return lowerCollective(c, "dtrt_take_shard", c.getInput(),
                                 c.getResult(), c.getMeshAxes());
        })
        .Case([&](MatmulOp m) { return lowerMatmul(m); })
        .Case([&](MatmulBiasOp m) { return lowerMatmulBias(m); })
        .Case([&](SoftmaxOp s) { return lowerSoftmax(s); })
        .Case([&](LayerNormOp l) { return lowerLayerNorm(l); })
        .Case([&](LayerNormGradOp l) { return lowerLayerNormGrad(l); })
        .Case([&](RMSNormOp l) { return lowerRMSNorm(l); })
        .Case([&](RopeOp r) { return lowerRope(r); })
        .Case([&](DropoutOp d) { return lowerDropout(d); })
        .Case([&](Conv2dOp c) {
          return lowerConv2d(c, "dtk_conv2d_f32", c.getInput(), c.getWeight(),
                             c.getResult());
        })
        .Case([&](Conv2dInputGradOp c) {
          return lowerConv2d(c, "dtk_conv2d_input_grad_f32", c.getResultGrad(),
                             c.getWeight(), c.getInputGrad());
        })
        .Case([&](MaxPool2dOp p) {
          return lowerPool2d(p, "dtk_max_pool2d_f32",
                             {p.getInput(), p.getResult()});
        })
        .Case([&](MaxPool2dGradOp p) {
          return lowerPool2d(
              p, "dtk_max_pool2d_grad_f32",
              {p.getInput(), p.getResultGrad(), p.getInputGrad()});
        })
        .Case([&](AvgPool2dOp p) {
          return lowerPool2d(p, "dtk_avg_pool2d_f32",
                             {p.getInput(), p.getResult()});
        })
        .Case([&](AvgPool2dGradOp p) {
          return lowerPool2d(p, "dtk_avg_pool2d_grad_f32",
                             {p.getResultGrad(), p.getInputGrad()});
        })
        .Case([&](Conv2dWeightGradOp c) {
          return lowerConv2d(c, "dtk_conv2d_weight_grad_f32", c.getInput(),
                             c.getResultGrad(), c.getWeightGrad());
        })
        .Case([&](RMSNormGradOp l) { return lowerRMSNormGrad(l); })
        .Case([&](EmbeddingOp e) { return lowerEmbedding(e); })
        .Case([&](EmbeddingGradOp e) { return lowerEmbeddingGrad(e); })
        .Case([&](CrossEntropyOp c) {
          return lowerLogitsKernel(c, "dtk_cross_entropy_f32", c.getLogits(),
                                   c.getLabels(), {}, c.getResult());
        })
        .Case([&](CrossEntropyGradOp c) {
          return lowerLogitsKernel(c, "dtk_cross_entropy_grad_f32",
                                   c.getLogits(), c.getLabels(),
                                   c.getResultGrad(), c.getLogitsGrad());
        })
        .Case([&](CountCorrectOp c) {
          return lowerLogitsKernel(c, "dtk_count_correct_f32", c.getLogits(),
                                   c.getLabels(), {}, c.getResult());
        })
        .Case([&](ShardStartOp s) { return lowerShardStart(s); })
        .Case([&](EmbeddingShardOp e) { return lowerEmbeddingShard(e); })
        .Case([&](EmbeddingGradShardOp e) {
          return lowerEmbeddingGradShard(e);
        })
        .Case([&](ClassStatsOp c) { return lowerClassStats(c); })
        .Case([&](CrossEntropyStatsOp c) {
          return lowerFromStats(c, "dtk_cross_entropy_stats_f32",
                                c.getStats(), c.getLabels(), c.getResult());
        })
        .Case([&](CountCorrectStatsOp c) {
          return lowerFromStats(c, "dtk_count_correct_stats_f32",
                                c.getStats(), c.getLabels(), c.getResult());
        })
        .Case([&](CrossEntropyGradShardOp c) {
          return lowerCrossEntropyGradShard(c);
        })
        .Case([&](AttentionOp a) { return lowerAttention(a); })
        .Case([&](AttentionGradOp a) { return lowerAttentionGrad(a); })
        .Case([&](ScheduleOp s) { return lowerSchedule(s); })
        .Case([&](func::ReturnOp) {
          b.create<func::ReturnOp>(loc);
          return success();
        })
        .Default([&](Operation *o) {
          return o->emitOpError(
              "cannot be lowered by convert-dt-to-kernels (was the "
              "module fused and planned?)");
        });
  }

  /// A load whose value the plan moved out of the global's buffer copies it
  /// there.
  LogicalResult copyIfMoved(ArenaSpan from, Value result) {
    if (offsetOf(result) != from.offset)
      b.create<memref::CopyOp>(
          loc, view(from, shapeOf(result), elementOf(result)), viewOf(result));
    return success();
  }

  LogicalResult lowerConstant(ConstantOp c) {
    auto value = llvm::cast<DenseElementsAttr>(c.getValue());
    if (value.isSplat()) {
      Value scalar = b.create<arith::ConstantOp>(
          loc, llvm::cast<TypedAttr>(value.getSplatValue<Attribute>()));
      b.create<linalg::FillOp>(loc, scalar, viewOf(c.getResult()));
      return success();
    }
    // A dense constant is read-only data of the object file, copied into place.
    auto type =
        MemRefType::get(value.getType().getShape(), value.getElementType());
    std::string name = "__dt_constant_" + std::to_string(constants++);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      b.create<memref::GlobalOp>(
          loc, name, b.getStringAttr("private"), type, value,
          /*constant=*/true, /*alignment=*/IntegerAttr());
    }
    Value global = b.create<memref::GetGlobalOp>(loc, type, name);
    b.create<memref::CopyOp>(loc, global, viewOf(c.getResult()));
    return success();
  }

  LogicalResult lowerIota(IotaOp op) {
    Value out = viewOf(op.getResult());
    Type elem = elementOf(op.getResult());
    auto map = b.getMultiDimIdentityMap(1);
    b.create<linalg::GenericOp>(
        loc, ValueRange{}, ValueRange{out}, ArrayRef<AffineMap>{map},
        ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
        [&](OpBuilder &nb, Location nl, ValueRange) {
          Value i = nb.create<linalg::IndexOp>(nl, 0);
          nb.create<linalg::YieldOp>(
              nl, ValueRange{nb.create<arith::IndexCastOp>(nl, elem, i)});
        });
    return success();
  }

  /// Elements per vector for data of `bits`-bit elements: one 512-bit register
  /// (LLVM splits it on narrower machines).
  static unsigned lanesFor(unsigned bits) {
    return std::max(1u, 512u / std::max(8u, bits));
  }

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }

  /// The type a sum of `elem` values accumulates in: f64 for narrower floats.
  /// A gradient norm sums tens of millions of squares into one value; in f32
  /// each of a vector accumulator's lanes would add millions of terms to a
  /// running sum that dwarfs them, losing about 1e-3 of it (seen at width 4096).
  static Type accumulatorOf(Type elem) {
    auto f = llvm::dyn_cast<FloatType>(elem);
    return f && f.getWidth() < 64 ? Float64Type::get(elem.getContext()) : elem;
  }

  /// `v` (a scalar or a vector) extended to `acc` elements.
  Value widen(Value v, Type acc) {
    Type elem = getElementTypeOrSelf(v.getType());
    if (elem == acc)
      return v;
    Type to = acc;
    if (auto vec = llvm::dyn_cast<VectorType>(v.getType()))
      to = VectorType::get(vec.getShape(), acc);
    return b.create<arith::ExtFOp>(loc, to, v);
  }

  /// A scalar sum `v` rounded back to `elem`.
  Value narrow(Value v, Type elem) {
    return v.getType() == elem ? v : b.create<arith::TruncFOp>(loc, elem, v);
  }

  /// Builds `for (i = lb; i < ub; i += step)` and calls `body(i)` inside it.
  void forLoop(int64_t lb, int64_t ub, int64_t step,
               function_ref<void(Value)> body) {
    if (lb >= ub)
      return;
    auto loop = b.create<scf::ForOp>(loc, index(lb), index(ub), index(step));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }

  void forLoop(Value lb, Value ub, int64_t step, function_ref<void(Value)> body) {
    auto loop = b.create<scf::ForOp>(loc, lb, ub, index(step));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }

  //===--------------------------------------------------------------------===//
  // The kernels' thread pool
  //===--------------------------------------------------------------------===//

  /// Elements below which a loop stays on the calling thread: waking the pool
  /// costs a few microseconds, about what one core takes for this many.
  static constexpr int64_t kMinParallelElements = 1 << 15;
  /// Elements per range at least (dtk_parallel_for's grain in iterations).
  static constexpr int64_t kParallelGrainElements = 1 << 13;

  /// Whether a loop of `n` independent iterations of `work` elements each is
  /// worth running on the pool.
  static bool worthParallel(int64_t n, int64_t work) {
    return n >= 2 && n * work >= kMinParallelElements;
  }

  /// Pattern: a loop over [0, n) of independent iterations, `work` elements
  /// each
  ///   => func.func private @<entry>_loopK(%arena, %begin: index, %end: index)
  ///        {dt.plan = <the entry's>, dt.parallel_range = n}
  ///        (what `build(%begin, %end)` makes: its views and scalars, and a
  ///        loop over [begin, end))
  ///      call @dtk_parallel_for(n, grain, @<entry>_loopK, %arena)
  /// With the bare-pointer calling convention of dt-lower-to-llvm the outlined
  /// function is `void (char *arena, int64_t begin, int64_t end)`, the pool's
  /// dtk_body, and the arena its context. Iterations must write disjoint
  /// elements and each compute its results in a fixed order: then the result
  /// is the same bits on any thread count.
  void parallelLoop(int64_t n, int64_t work,
                    function_ref<void(Value, Value)> build) {
    MLIRContext *ctx = b.getContext();
    auto fnType = FunctionType::get(
        ctx, {arena.getType(), b.getIndexType(), b.getIndexType()}, {});
    func::FuncOp loop;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(target);
      loop = b.create<func::FuncOp>(
          loc, (target.getSymName() + "_loop" + Twine(outlined++)).str(),
          fnType);
      loop.setPrivate();
      // Internal to the program's object file, like the symbol it is.
      loop->setAttr("llvm.linkage",
                    LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
      loop->setAttr(kPlanAttr, target->getAttr(kPlanAttr));
      loop->setAttr(kParallelRangeAttr, b.getI64IntegerAttr(n));
      Block *entry = loop.addEntryBlock();
      b.setInsertionPointToStart(entry);
      Value outerArena = arena, outerBase = base;
      auto outerViews = std::move(views);
      auto outerShifts = std::move(slotShifts);
      enterFunction(entry->getArgument(0));
      build(entry->getArgument(1), entry->getArgument(2));
      b.create<func::ReturnOp>(loc);
      arena = outerArena, base = outerBase, views = std::move(outerViews);
      slotShifts = std::move(outerShifts);
    }
    Value body = b.create<func::ConstantOp>(loc, fnType,
                                            SymbolRefAttr::get(loop));
    int64_t grain = std::max<int64_t>(
        1, (kParallelGrainElements + work - 1) / std::max<int64_t>(work, 1));
    call("dtk_parallel_for", {i64(n), i64(grain), body, arena});
  }

  /// Loops over [lb, ub) in steps of `lanes` (calling `body(iv, lanes)`) and
  /// one by one for the rest (`body(iv, 1)`).
  void vectorRange(int64_t lb, int64_t ub, unsigned lanes,
                   function_ref<void(Value, unsigned)> body) {
    int64_t vectorEnd = lanes > 1 ? lb + (ub - lb) / lanes * lanes : lb;
    forLoop(lb, vectorEnd, lanes, [&](Value iv) { body(iv, lanes); });
    forLoop(vectorEnd, ub, 1, [&](Value iv) { body(iv, 1); });
  }

  /// Loops over `shape` but its last dimension, then over the last dimension
  /// with vectorRange, calling `body(indices, width)`.
  void vectorLoopNest(ArrayRef<int64_t> shape, unsigned lanes,
                      function_ref<void(ArrayRef<Value>, unsigned)> body) {
    SmallVector<Value> ivs;
    std::function<void(size_t)> nest = [&](size_t d) {
      if (d + 1 < shape.size()) {
        forLoop(0, shape[d], 1, [&](Value iv) {
          ivs.push_back(iv);
          nest(d + 1);
          ivs.pop_back();
        });
        return;
      }
      vectorRange(0, shape.back(), lanes, [&](Value iv, unsigned width) {
        ivs.push_back(iv);
        body(ivs, width);
        ivs.pop_back();
      });
    };
    nest(0);
  }

  /// Reads `width` consecutive elements (a vector when width > 1) at `indices`.
  Value read(Value view, ArrayRef<Value> indices, unsigned width) {
    if (width == 1)
      return b.create<memref::LoadOp>(loc, view, indices);
    Type elem = llvm::cast<MemRefType>(view.getType()).getElementType();
    return b.create<vector::LoadOp>(loc, VectorType::get({width}, elem), view,
                                    indices);
  }

  void write(Value value, Value view, ArrayRef<Value> indices, unsigned width) {
    if (width == 1)
      b.create<memref::StoreOp>(loc, value, view, indices);
    else
      b.create<vector::StoreOp>(loc, value, view, indices);
  }

  /// An operand of a fused region: a view of it, or (for a 0-d operand) its
  /// value, loaded once, and that value splatted to a vector.
  struct FusedOperand {
    Value view, scalar, splat;
    SmallVector<int64_t> shape;
  };

  /// Views (or loaded scalars) for `f`'s operands; `flat` views every
  /// non-scalar operand as one dimension of `flat` elements, but those that
  /// `perKept` marks, as one of `kept`.
  SmallVector<FusedOperand>
  prepareOperands(FusedOp f, std::optional<int64_t> flat, unsigned lanes,
                  ArrayRef<bool> perKept = {}, int64_t kept = 0) {
    SmallVector<FusedOperand> operands;
    for (auto [i, v] : llvm::enumerate(f.getInputs())) {
      FusedOperand o;
      if (!perKept.empty() && perKept[i])
        o.shape = {kept};
      else if (!shapeOf(v).empty())
        o.shape = flat ? SmallVector<int64_t>{*flat}
                       : SmallVector<int64_t>(shapeOf(v));
      o.view = view(bufferOf(v), o.shape, elementOf(v));
      if (o.shape.empty()) {
        o.scalar = b.create<memref::LoadOp>(loc, o.view, ValueRange{});
        if (lanes > 1)
          o.splat = b.create<vector::SplatOp>(
              loc, VectorType::get({lanes}, elementOf(v)), o.scalar);
      }
      operands.push_back(o);
    }
    return operands;
  }

  /// The values `f`'s body yields for `width` consecutive elements at `ivs` of
  /// `iteration` (vectors when width > 1).
  SmallVector<Value> evaluateBody(FusedOp f, ArrayRef<FusedOperand> operands,
                                  ArrayRef<Value> ivs,
                                  ArrayRef<int64_t> iteration, unsigned width) {
    Block &body = f.getBody().front();
    llvm::DenseMap<Value, Value> values;
    for (auto [arg, o] : llvm::zip(body.getArguments(), operands)) {
      if (o.shape.empty()) {
        values[arg] = width > 1 ? o.splat : o.scalar;
        continue;
      }
      // NumPy broadcasting: a size-1 operand dimension reads index 0.
      size_t lead = ivs.size() - o.shape.size();
      SmallVector<Value> idx;
      for (auto [i, d] : llvm::enumerate(o.shape))
        idx.push_back(d == 1 && iteration[lead + i] != 1 ? index(0)
                                                         : ivs[lead + i]);
      bool alongInner =
          o.shape.back() == iteration.back() || iteration.back() == 1;
      if (width > 1 && !alongInner) {
        Value s = read(o.view, idx, 1);
        values[arg] = b.create<vector::SplatOp>(
            loc, VectorType::get({width}, s.getType()), s);
      } else {
        values[arg] = read(o.view, idx, width);
      }
    }
    for (Operation &op : body.without_terminator()) {
      SmallVector<Value> args;
      for (Value v : op.getOperands())
        args.push_back(values.lookup(v));
      values[op.getResult(0)] =
          llvm::cast<ScalarizableOpInterface>(op).buildScalar(b, op.getLoc(),
                                                              args, width);
    }
    SmallVector<Value> yielded;
    for (Value v : body.getTerminator()->getOperands())
      yielded.push_back(values.lookup(v));
    return yielded;
  }

  /// Elements per vector for `f`: one 512-bit register of its widest element
  /// type.
  static unsigned lanesFor(FusedOp f) {
    unsigned widest = 8;
    for (Value v : f.getInputs())
      widest = std::max(widest, elementOf(v).getIntOrFloatBitWidth());
    for (Value v : f.getResults())
      widest = std::max(widest, elementOf(v).getIntOrFloatBitWidth());
    return lanesFor(widest);
  }

  /// Elements per range of a flat elementwise loop on the pool (a multiple of
  /// every vector width).
  static constexpr int64_t kFlatBlock = 4096;

  /// Pattern: dt.fused => a loop nest whose innermost loop runs `lanes`
  /// elements at a time (explicit vectors; the memory plan guarantees distinct
  /// buffers, so nothing is left to LLVM's alias analysis) with a scalar
  /// remainder. 0-d operands are loaded once before the loops; an operand
  /// broadcast along the innermost dimension is read as a scalar and splatted;
  /// when nothing broadcasts the nest is one flat loop. Large nests run on the
  /// pool (parallelLoop): a flat loop in blocks of kFlatBlock elements (the
  /// remainder on the calling thread), a nest over its outer dimension.
  LogicalResult lowerFused(FusedOp f) {
    if (f.isReduction())
      return lowerFusedReduction(f);
    SmallVector<int64_t> iteration(f.getIterationShape());
    bool collapse =
        iteration.size() > 1 && llvm::all_of(f.getInputs(), [&](Value v) {
          return shapeOf(v).empty() ||
                 shapeOf(v) == ArrayRef<int64_t>(iteration);
        });
    if (collapse)
      iteration = {product(iteration)};
    unsigned lanes = iteration.empty() ? 1 : lanesFor(f);
    // What the body reads and writes, made in the function being built.
    SmallVector<FusedOperand> operands;
    SmallVector<Value> outputs;
    auto prepare = [&] {
      operands = prepareOperands(
          f, collapse ? std::optional<int64_t>(iteration[0]) : std::nullopt,
          lanes);
      outputs.clear();
      for (Value r : f.getResults())
        outputs.push_back(view(bufferOf(r), iteration, elementOf(r)));
    };
    auto emit = [&](ArrayRef<Value> ivs, unsigned width) {
      for (auto [v, out] :
           llvm::zip(evaluateBody(f, operands, ivs, iteration, width), outputs))
        write(v, out, ivs, width);
    };
    auto emitAt = [&](Value iv, unsigned width) { emit({iv}, width); };

    if (iteration.empty()) {
      prepare();
      emit({}, 1);
      return success();
    }
    int64_t total = product(iteration);
    if (iteration.size() == 1 &&
        worthParallel(total / kFlatBlock, kFlatBlock)) {
      int64_t blocks = total / kFlatBlock;
      parallelLoop(blocks, kFlatBlock, [&](Value begin, Value end) {
        prepare();
        forLoop(begin, end, 1, [&](Value block) {
          Value first = b.create<arith::MulIOp>(loc, block, index(kFlatBlock));
          forLoop(0, kFlatBlock, lanes, [&](Value j) {
            emitAt(b.create<arith::AddIOp>(loc, first, j), lanes);
          });
        });
      });
      if (blocks * kFlatBlock < total) {
        prepare();
        vectorRange(blocks * kFlatBlock, total, lanes, emitAt);
      }
      return success();
    }
    // The pool splits the first dimension that is not 1 (a batch norm's
    // iteration is [groups, N / groups, C, H W] with one group on one rank).
    size_t split = 0;
    while (split + 2 < iteration.size() && iteration[split] == 1)
      ++split;
    if (iteration.size() > 1 &&
        worthParallel(iteration[split], total / iteration[split])) {
      parallelLoop(iteration[split], total / iteration[split],
                   [&](Value begin, Value end) {
                     prepare();
                     forLoop(begin, end, 1, [&](Value outer) {
                       SmallVector<Value> lead(split, index(0));
                       lead.push_back(outer);
                       vectorLoopNest(
                           ArrayRef<int64_t>(iteration).drop_front(split + 1),
                           lanes, [&](ArrayRef<Value> ivs, unsigned width) {
                             SmallVector<Value> all(lead);
                             all.append(ivs.begin(), ivs.end());
                             emit(all, width);
                           });
                     });
                   });
      return success();
    }
    prepare();
    vectorLoopNest(iteration, lanes, emit);
    return success();
  }

  /// A zero vector of `lanes` accumulators for each of `elems`.
  SmallVector<Value> zeroAccumulators(ArrayRef<Type> elems, unsigned lanes) {
    SmallVector<Value> zeros;
    for (Type elem : elems) {
      Type acc = accumulatorOf(elem);
      zeros.push_back(b.create<arith::ConstantOp>(
          loc, DenseElementsAttr::get(VectorType::get({lanes}, acc),
                                      b.getZeroAttr(acc))));
    }
    return zeros;
  }

  /// Pattern: dt.fused {reduce_axes} => the body evaluated over the flattened
  /// iteration space and summed: over trailing axes in vector registers (one
  /// accumulator per result, a horizontal sum, the remainder), rows on the
  /// pool when there is enough work; over leading axes into the output row.
  LogicalResult lowerFusedReduction(FusedOp f) {
    ArrayRef<int64_t> shape = f.getIterationShape();
    ArrayRef<int64_t> axes = *f.getReduceAxes();
    int64_t rank = shape.size(), total = product(shape);
    bool trailing = axes.back() == rank - 1 &&
                    axes.front() == rank - static_cast<int64_t>(axes.size());
    bool leading = axes.front() == 0 &&
                   axes.back() == static_cast<int64_t>(axes.size()) - 1;
    bool flatOperands = llvm::all_of(f.getInputs(), [&](Value v) {
      return shapeOf(v).empty() || shapeOf(v) == shape;
    });
    SmallVector<ReductionRun, 4> runs = reductionRuns(shape, axes);
    if (!trailing && !leading && reducesAround(runs))
      return lowerFusedReductionAround(f, runs);
    if ((!trailing && !leading) || !flatOperands)
      return f.emitOpError(
          "is a reduction the lowering does not vectorise (sums over the "
          "leading or trailing axes of unbroadcast operands only)");
    unsigned lanes = lanesFor(f);
    SmallVector<int64_t> flat{total};
    SmallVector<Type> elems;
    for (Value r : f.getResults())
      elems.push_back(elementOf(r));

    if (trailing) {
      int64_t n = product(shape.take_back(axes.size())), outer = total / n;
      int64_t vectorEnd = n - n % lanes;
      SmallVector<FusedOperand> operands;
      // A loop over [lb, ub) carrying one accumulator per result.
      auto accumulate = [&](Value base, int64_t lb, int64_t ub, unsigned width,
                            SmallVector<Value> accs) -> SmallVector<Value> {
        if (lb >= ub)
          return accs;
        auto loop =
            b.create<scf::ForOp>(loc, index(lb), index(ub), index(width), accs);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value at = b.create<arith::AddIOp>(loc, base, loop.getInductionVar());
        SmallVector<Value> next;
        for (auto [acc, v] :
             llvm::zip(loop.getRegionIterArgs(),
                       evaluateBody(f, operands, {at}, flat, width)))
          next.push_back(b.create<arith::AddFOp>(
              loc, acc, widen(v, getElementTypeOrSelf(acc.getType()))));
        b.create<scf::YieldOp>(loc, next);
        return SmallVector<Value>(loop.getResults());
      };
      auto rows = [&](Value begin, Value end) {
        operands = prepareOperands(f, total, lanes);
        SmallVector<Value> outs;
        for (auto [r, elem] : llvm::zip(f.getResults(), elems))
          outs.push_back(view(bufferOf(r), {outer}, elem));
        forLoop(begin, end, 1, [&](Value o) {
          Value base = b.create<arith::MulIOp>(loc, o, index(n));
          SmallVector<Value> sums;
          if (vectorEnd > 0) {
            for (Value v : accumulate(base, 0, vectorEnd, lanes,
                                      zeroAccumulators(elems, lanes)))
              sums.push_back(b.create<vector::ReductionOp>(
                  loc, vector::CombiningKind::ADD, v));
          } else {
            for (Type elem : elems) {
              Type acc = accumulatorOf(elem);
              sums.push_back(
                  b.create<arith::ConstantOp>(loc, b.getZeroAttr(acc)));
            }
          }
          sums = accumulate(base, vectorEnd, n, 1, sums);
          for (auto [sum, out, elem] : llvm::zip(sums, outs, elems))
            write(narrow(sum, elem), out, {o}, 1);
        });
      };
      if (worthParallel(outer, n))
        parallelLoop(outer, n, rows);
      else
        rows(index(0), index(outer));
      return success();
    }

    // Leading axes: out[j] = sum_i body(i * n + j), accumulated into the output
    // row.
    SmallVector<FusedOperand> operands = prepareOperands(f, total, lanes);
    int64_t n = product(shape.drop_front(axes.size())), rows = total / n;
    SmallVector<Value> outs;
    for (auto [r, elem] : llvm::zip(f.getResults(), elems)) {
      outs.push_back(view(bufferOf(r), {n}, elem));
      b.create<linalg::FillOp>(
          loc,
          ValueRange{b.create<arith::ConstantOp>(loc, b.getZeroAttr(elem))},
          ValueRange{outs.back()});
    }
    forLoop(0, rows, 1, [&](Value i) {
      Value base = b.create<arith::MulIOp>(loc, i, index(n));
      vectorLoopNest({n}, lanes, [&](ArrayRef<Value> ivs, unsigned width) {
        Value at = b.create<arith::AddIOp>(loc, base, ivs[0]);
        for (auto [v, out] :
             llvm::zip(evaluateBody(f, operands, {at}, flat, width), outs))
          write(b.create<arith::AddFOp>(loc, read(out, ivs, width), v), out,
                ivs, width);
      });
    });
    return success();
  }

  /// Pattern: dt.fused {reduce_axes} around kept axes (a batch norm's
  /// statistics: [lead, outer, n] summed over lead and n) => per kept element
  /// o, on the pool, one vector accumulator per result over i < lead and the
  /// vectors of j < n of the body at (i outer + o) n + j, a horizontal sum and
  /// the scalar remainder (the order of dt.reduce_sum's own lowering). An
  /// operand with one value per kept element is read once per o and splatted.
  LogicalResult lowerFusedReductionAround(FusedOp f,
                                          ArrayRef<ReductionRun> runs) {
    ArrayRef<int64_t> shape = f.getIterationShape();
    int64_t total = product(shape), lead = runs[0].size, outer = runs[1].size,
            n = runs[2].size;
    unsigned lanes = lanesFor(f);
    int64_t vectorEnd = n - n % lanes;
    SmallVector<int64_t> flat{total};
    SmallVector<Type> elems;
    for (Value r : f.getResults())
      elems.push_back(elementOf(r));
    // Which operands hold one value per kept element.
    SmallVector<bool> perKept;
    for (Value v : f.getInputs()) {
      ArrayRef<int64_t> s = shapeOf(v);
      bool full = s.empty() || s == shape;
      if (!full && product(s) != outer)
        return f.emitOpError("reads an operand of shape [")
               << s << "] that is neither the iteration's nor one value per "
               << "kept element";
      perKept.push_back(!full);
    }
    auto sums = [&](Value begin, Value end) {
      SmallVector<FusedOperand> operands =
          prepareOperands(f, total, lanes, perKept, outer);
      SmallVector<Value> outs;
      for (auto [r, elem] : llvm::zip(f.getResults(), elems))
        outs.push_back(view(bufferOf(r), {outer}, elem));
      forLoop(begin, end, 1, [&](Value o) {
        SmallVector<FusedOperand> at(operands);
        for (auto [x, kept, v] : llvm::zip(at, perKept, f.getInputs()))
          if (kept) {
            x.shape.clear();
            x.scalar = b.create<memref::LoadOp>(loc, x.view, ValueRange{o});
            if (lanes > 1)
              x.splat = b.create<vector::SplatOp>(
                  loc, VectorType::get({lanes}, elementOf(v)), x.scalar);
          }
        // sum over i < lead and j in [lb, ub) of the body, `width` lanes at
        // a time, onto accs.
        auto accumulate = [&](int64_t lb, int64_t ub, unsigned width,
                              SmallVector<Value> accs) -> SmallVector<Value> {
          auto rows =
              b.create<scf::ForOp>(loc, index(0), index(lead), index(1), accs);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(rows.getBody());
          Value row = b.create<arith::AddIOp>(
              loc,
              b.create<arith::MulIOp>(loc, rows.getInductionVar(),
                                      index(outer)),
              o);
          Value base = b.create<arith::MulIOp>(loc, row, index(n));
          auto loop =
              b.create<scf::ForOp>(loc, index(lb), index(ub), index(width),
                                   rows.getRegionIterArgs());
          b.setInsertionPointToStart(loop.getBody());
          Value p = b.create<arith::AddIOp>(loc, base, loop.getInductionVar());
          SmallVector<Value> next;
          for (auto [acc, v] : llvm::zip(loop.getRegionIterArgs(),
                                         evaluateBody(f, at, {p}, flat, width)))
            next.push_back(b.create<arith::AddFOp>(
                loc, acc, widen(v, getElementTypeOrSelf(acc.getType()))));
          b.create<scf::YieldOp>(loc, next);
          b.setInsertionPointAfter(loop);
          b.create<scf::YieldOp>(loc, loop.getResults());
          return SmallVector<Value>(rows.getResults());
        };
        SmallVector<Value> totals;
        if (vectorEnd > 0) {
          for (Value v :
               accumulate(0, vectorEnd, lanes, zeroAccumulators(elems, lanes)))
            totals.push_back(b.create<vector::ReductionOp>(
                loc, vector::CombiningKind::ADD, v));
        } else {
          for (Type elem : elems)
            totals.push_back(b.create<arith::ConstantOp>(
                loc, b.getZeroAttr(accumulatorOf(elem))));
        }
        if (vectorEnd < n)
          totals = accumulate(vectorEnd, n, 1, totals);
        for (auto [sum, out, elem] : llvm::zip(totals, outs, elems))
          write(narrow(sum, elem), out, {o}, 1);
      });
    };
    if (worthParallel(outer, lead * n))
      parallelLoop(outer, lead * n, sums);
    else
      sums(index(0), index(outer));
    return success();
  }

  /// Pattern: dt.reduce_sum over all axes, the trailing axes, the leading
  /// axes, or the leading and trailing axes around kept ones (a batch norm's
  /// statistics over N, H and W) of a float tensor => vector accumulation;
  /// other reductions => linalg.
  LogicalResult lowerReduceSum(ReduceSumOp r) {
    ArrayRef<int64_t> shape = shapeOf(r.getInput());
    Type elem = elementOf(r.getResult());
    SmallVector<ReductionRun, 4> runs = reductionRuns(shape, r.getAxes());
    bool around = reducesAround(runs);
    if (!llvm::isa<FloatType>(elem) || (runs.size() > 2 && !around))
      return lowerReduceSumGeneric(r);
    unsigned lanes = lanesFor(elem.getIntOrFloatBitWidth());
    int64_t total = product(shape);
    Value in = view(bufferOf(r.getInput()), {total}, elem);
    Value zero = b.create<arith::ConstantOp>(loc, b.getZeroAttr(elem));

    if (runs.back().reduced) {
      // Reduce the trailing run, and the leading one if any:
      // out[o] = sum_i sum_j in[(i * outer + o) * n + j], a vector accumulator
      // in registers per output element, then a horizontal sum and the
      // remainders.
      int64_t n = runs.back().size, lead = around ? runs.front().size : 1,
              outer = total / n / lead, vectorEnd = n - n % lanes;
      Value out = view(bufferOf(r.getResult()), {outer}, elem);
      if (shapeOf(r.getResult()).empty())
        out = view(bufferOf(r.getResult()), {1}, elem);
      Type accElem = accumulatorOf(elem);
      // sum over i < lead and j in [lb, ub) of in, `width` lanes at a time,
      // onto acc.
      auto accumulate = [&](Value o, int64_t lb, int64_t ub, unsigned width,
                            Value acc) -> Value {
        auto rows = b.create<scf::ForOp>(loc, index(0), index(lead), index(1),
                                         ValueRange{acc});
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(rows.getBody());
        Value row = b.create<arith::AddIOp>(
            loc,
            b.create<arith::MulIOp>(loc, rows.getInductionVar(), index(outer)),
            o);
        Value base = b.create<arith::MulIOp>(loc, row, index(n));
        auto loop =
            b.create<scf::ForOp>(loc, index(lb), index(ub), index(width),
                                 ValueRange{rows.getRegionIterArg(0)});
        b.setInsertionPointToStart(loop.getBody());
        Value at = b.create<arith::AddIOp>(loc, base, loop.getInductionVar());
        Value sum =
            b.create<arith::AddFOp>(loc, loop.getRegionIterArg(0),
                                    widen(read(in, {at}, width), accElem));
        b.create<scf::YieldOp>(loc, sum);
        b.setInsertionPointAfter(loop);
        b.create<scf::YieldOp>(loc, loop.getResult(0));
        return rows.getResult(0);
      };
      // Each output element is one task's, summed in a fixed order: the
      // same bits on any thread count.
      auto sums = [&](Value begin, Value end) {
        forLoop(begin, end, 1, [&](Value o) {
          Value s = b.create<arith::ConstantOp>(loc, b.getZeroAttr(accElem));
          if (vectorEnd > 0) {
            Value acc = b.create<arith::ConstantOp>(
                loc, DenseElementsAttr::get(VectorType::get({lanes}, accElem),
                                            b.getZeroAttr(accElem)));
            s = b.create<vector::ReductionOp>(
                loc, vector::CombiningKind::ADD,
                accumulate(o, 0, vectorEnd, lanes, acc));
          }
          if (vectorEnd < n)
            s = accumulate(o, vectorEnd, n, 1, s);
          write(narrow(s, elem), out, {o}, 1);
        });
      };
      if (worthParallel(outer, lead * n)) {
        // The views, made again inside the outlined loop.
        parallelLoop(outer, lead * n, [&](Value begin, Value end) {
          in = view(bufferOf(r.getInput()), {total}, elem);
          out = view(bufferOf(r.getResult()),
                     {shapeOf(r.getResult()).empty() ? 1 : outer}, elem);
          sums(begin, end);
        });
      } else {
        sums(index(0), index(outer));
      }
      return success();
    }

    // Reduce the leading run: out[j] = sum_i in[i * n + j], row by row into the
    // output (a bias gradient: the output row stays in cache).
    int64_t n = runs.back().size, rows = total / n;
    Value out = view(bufferOf(r.getResult()), {n}, elem);
    b.create<linalg::FillOp>(loc, zero, out);
    forLoop(0, rows, 1, [&](Value i) {
      Value base = b.create<arith::MulIOp>(loc, i, index(n));
      vectorLoopNest({n}, lanes, [&](ArrayRef<Value> ivs, unsigned width) {
        Value at = b.create<arith::AddIOp>(loc, base, ivs[0]);
        Value sum = b.create<arith::AddFOp>(loc, read(out, ivs, width),
                                            read(in, {at}, width));
        write(sum, out, ivs, width);
      });
    });
    return success();
  }

  LogicalResult lowerReduceSumGeneric(ReduceSumOp r) {
    ArrayRef<int64_t> inShape = shapeOf(r.getInput());
    Value in = viewOf(r.getInput()), out = viewOf(r.getResult());
    Type elem = elementOf(r.getResult());
    Value zero = b.create<arith::ConstantOp>(loc, b.getZeroAttr(elem));
    b.create<linalg::FillOp>(loc, zero, out);
    SmallVector<AffineExpr> kept;
    SmallVector<utils::IteratorType> iterators;
    for (int64_t d = 0; d < static_cast<int64_t>(inShape.size()); ++d) {
      bool reduced = llvm::is_contained(r.getAxes(), d);
      iterators.push_back(reduced ? utils::IteratorType::reduction
                                  : utils::IteratorType::parallel);
      if (!reduced)
        kept.push_back(b.getAffineDimExpr(d));
    }
    SmallVector<AffineMap> maps{
        b.getMultiDimIdentityMap(inShape.size()),
        AffineMap::get(inShape.size(), 0, kept, b.getContext())};
    bool isFloat = llvm::isa<FloatType>(elem);
    b.create<linalg::GenericOp>(
        loc, TypeRange{}, ValueRange{in}, ValueRange{out}, maps, iterators,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          Value s =
              isFloat
                  ? nb.create<arith::AddFOp>(nl, args[0], args[1]).getResult()
                  : nb.create<arith::AddIOp>(nl, args[0], args[1]).getResult();
          nb.create<linalg::YieldOp>(nl, s);
        });
    return success();
  }

  /// How one side of a copy is indexed from the iteration's indices: its
  /// dimension k is iteration dimension dims[k], plus offsets[k].
  struct CopySide {
    ArenaSpan buffer;
    SmallVector<int64_t> shape;
    SmallVector<unsigned> dims;
    SmallVector<int64_t> offsets;
  };

  /// The side of a copy that is `v` itself, indexed like the iteration.
  CopySide wholeSide(Value v) {
    CopySide side{bufferOf(v), SmallVector<int64_t>(shapeOf(v)), {}, {}};
    for (unsigned d = 0; d < side.shape.size(); ++d)
      side.dims.push_back(d), side.offsets.push_back(0);
    return side;
  }

  /// Pattern: a copy over `shape`, out[out(idx)] = in[in(idx)]
  ///   => a loop nest over `shape` whose innermost loop moves `lanes`
  ///      elements at a time when the innermost iteration dimension is the
  ///      innermost dimension of both sides (contiguous runs), else one by
  ///      one; its outer dimension on the pool when large (parallelLoop).
  /// Transposes, splits, concats, slices and pads are all such copies.
  void lowerCopy(const CopySide &in, const CopySide &out,
                 ArrayRef<int64_t> shape, Type elem) {
    int64_t rank = shape.size(), total = product(shape);
    if (total == 0)
      return;
    bool contiguous = rank > 0 && in.dims.back() == rank - 1 &&
                      out.dims.back() == rank - 1;
    unsigned lanes =
        contiguous ? lanesFor(elem.getIntOrFloatBitWidth()) : 1u;
    auto indices = [&](const CopySide &side, ArrayRef<Value> ivs) {
      SmallVector<Value> idx;
      for (auto [d, off] : llvm::zip(side.dims, side.offsets))
        idx.push_back(off ? b.create<arith::AddIOp>(loc, ivs[d], index(off))
                                .getResult()
                          : ivs[d]);
      return idx;
    };
    Value from, to;
    auto prepare = [&] {
      from = view(in.buffer, in.shape, elem);
      to = view(out.buffer, out.shape, elem);
    };
    auto move = [&](ArrayRef<Value> ivs, unsigned width) {
      write(read(from, indices(in, ivs), width), to, indices(out, ivs), width);
    };
    if (rank == 0) {
      prepare();
      move({}, 1);
      return;
    }
    if (rank > 1 && worthParallel(shape.front(), total / shape.front())) {
      parallelLoop(shape.front(), total / shape.front(),
                   [&](Value begin, Value end) {
                     prepare();
                     forLoop(begin, end, 1, [&](Value outer) {
                       vectorLoopNest(shape.drop_front(), lanes,
                                      [&](ArrayRef<Value> ivs, unsigned w) {
                                        SmallVector<Value> all{outer};
                                        all.append(ivs.begin(), ivs.end());
                                        move(all, w);
                                      });
                     });
                   });
      return;
    }
    prepare();
    vectorLoopNest(shape, lanes, move);
  }

  /// Pattern: dt.transpose => lowerCopy, the input's dimension perm[i] read
  /// at the result's index i.
  LogicalResult lowerTranspose(TransposeOp t) {
    ArrayRef<int64_t> perm = t.getPerm();
    CopySide in = wholeSide(t.getInput()), out = wholeSide(t.getResult());
    for (auto [i, p] : llvm::enumerate(perm))
      in.dims[p] = i;
    lowerCopy(in, out, shapeOf(t.getResult()), elementOf(t.getResult()));
    return success();
  }

  /// Pattern: dt.split / dt.concat => one lowerCopy per piece, between the
  /// piece and its place along `axis` of `whole`.
  LogicalResult lowerSplitOrConcat(Operation *, Value whole, ValueRange pieces,
                                   int64_t axis, bool fromWhole) {
    int64_t start = 0;
    for (Value piece : pieces) {
      CopySide part = wholeSide(whole), own = wholeSide(piece);
      part.offsets[axis] = start;
      if (fromWhole)
        lowerCopy(part, own, shapeOf(piece), elementOf(piece));
      else
        lowerCopy(own, part, shapeOf(piece), elementOf(piece));
      start += shapeOf(piece)[axis];
    }
    return success();
  }

  /// Pattern: dt.slice => lowerCopy from `[start, start + size)` along the
  /// axis of the input.
  LogicalResult lowerSlice(SliceOp s) {
    CopySide in = wholeSide(s.getInput());
    in.offsets[s.getAxis()] = s.getStart();
    lowerCopy(in, wholeSide(s.getResult()), shapeOf(s.getResult()),
              elementOf(s.getResult()));
    return success();
  }

  /// Pattern: dt.pad => fill(out, 0); lowerCopy(in, the front of out).
  LogicalResult lowerPad(PadOp p) {
    Value out = viewOf(p.getResult());
    Type elem = elementOf(p.getResult());
    b.create<linalg::FillOp>(
        loc, b.create<arith::ConstantOp>(loc, b.getZeroAttr(elem)).getResult(),
        out);
    lowerCopy(wholeSide(p.getInput()), wholeSide(p.getResult()),
              shapeOf(p.getInput()), elem);
    return success();
  }

  /// Pattern: mesh.<collective> %in on @mesh mesh_axes = [...] (along axis 0)
  ///   => call @dtrt_<collective>(ptr in, ptr out, counts..., dtype, axis
  ///      mask, id), the id (dt.id) naming it in the manifest's collectives.
  LogicalResult lowerCollective(Operation *op, StringRef callee, Value in,
                                Value out, ArrayRef<int16_t> axes) {
    for (StringRef axisAttr : {"gather_axis", "scatter_axis", "slice_axis",
                               "split_axis", "concat_axis"})
      if (auto axis = op->getAttrOfType<IntegerAttr>(axisAttr);
          axis && axis.getInt() != 0)
        return op->emitOpError("runs along axis ")
               << axis.getInt()
               << "; the runtime's collectives run along axis 0 "
                  "(dt-spmd-partition transposes the others there)";
    if (auto reduction =
            op->getAttrOfType<mesh::ReductionKindAttr>("reduction");
        reduction && reduction.getValue() != mesh::ReductionKind::Sum)
      return op->emitOpError("reduces by ")
             << mesh::stringifyReductionKind(reduction.getValue())
             << "; the runtime's collectives sum";
    auto id = op->getAttrOfType<IntegerAttr>("dt.id");
    if (!id)
      return op->emitOpError("has no dt.id: number the collectives "
                             "(dt::numberCollectives) before lowering");
    std::optional<int32_t> dtype = collectiveDTypeCode(elementOf(in));
    if (!dtype)
      return op->emitOpError("moves ")
             << elementOf(in) << " elements, which the runtime cannot";
    int64_t mask = 0, group = 1;
    for (int16_t a : axes) {
      mask |= int64_t(1) << a;
      group *= meshShape[a];
    }
    int64_t inCount = product(shapeOf(in)), outCount = product(shapeOf(out));
    SmallVector<Value> args{pointerOf(in), pointerOf(out)};
    // An asynchronous collective starts here and ends at its dt.wait.
    std::string name = callee.str();
    if (op->hasAttr(kAsyncAttr))
      name += "_start";
    if (callee == "dtrt_all_reduce")
      args.push_back(i64(inCount));
    else if (callee == "dtrt_reduce_scatter" || callee == "dtrt_all_gather")
      args.append({i64(std::min(inCount, outCount)), i64(group)});
    else if (callee == "dtrt_all_to_all")
      args.append({i64(inCount / group), i64(group)});
    else // dtrt_take_shard
      args.append({i64(inCount), i64(outCount)});
    args.append({i32(*dtype), i32(mask), i32(id.getInt())});
    call(name, args);
    return success();
  }

  /// The end of an asynchronous collective: the runtime waits for it by id.
  LogicalResult lowerWait(WaitOp w) {
    Operation *collective = w.getPending().getDefiningOp();
    auto id = collective->getAttrOfType<IntegerAttr>("dt.id");
    if (!id)
      return w.emitOpError("waits for a collective without a dt.id");
    call("dtrt_wait", {i32(id.getInt())});
    return success();
  }

  /// dt.matmul and dt.matmul_bias: the operands' pointers, then the sizes
  /// and transposes every product kernel takes.
  template <typename Op>
  LogicalResult lowerProduct(Op m, StringRef kernel,
                             ArrayRef<Value> pointers) {
    if (failed(requireF32(m, {m.getLhs(), m.getRhs()})))
      return failure();
    ArrayRef<int64_t> a = shapeOf(m.getLhs()), c = shapeOf(m.getResult());
    size_t r = a.size();
    int64_t k = m.getTransposeLhs() ? a[r - 2] : a[r - 1];
    SmallVector<Value> args(pointers);
    args.append({i64(product(a.drop_back(2))), i64(c[r - 2]), i64(c[r - 1]),
                 i64(k), i32(m.getTransposeLhs()), i32(m.getTransposeRhs())});
    call(kernel, args);
    return success();
  }

  LogicalResult lowerMatmul(MatmulOp m) {
    return lowerProduct(m, "dtk_matmul_f32",
                        {pointerOf(m.getLhs()), pointerOf(m.getRhs()),
                         pointerOf(m.getResult())});
  }

  LogicalResult lowerMatmulBias(MatmulBiasOp m) {
    return lowerProduct(m, "dtk_matmul_bias_f32",
                        {pointerOf(m.getLhs()), pointerOf(m.getRhs()),
                         pointerOf(m.getBias()), pointerOf(m.getResult())});
  }

  LogicalResult lowerSoftmax(SoftmaxOp s) {
    if (failed(requireF32(s, {s.getInput()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(s.getInput());
    int64_t axis = s.getAxis();
    call("dtk_softmax_f32",
         {pointerOf(s.getInput()), pointerOf(s.getResult()),
          i64(product(shape.take_front(axis))), i64(shape[axis]),
          i64(product(shape.drop_front(axis + 1)))});
    return success();
  }

  LogicalResult lowerLayerNorm(LayerNormOp l) {
    if (failed(requireF32(l, {l.getInput(), l.getWeight(), l.getBias()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(l.getInput());
    call("dtk_layer_norm_f32",
         {pointerOf(l.getInput()), pointerOf(l.getWeight()),
          pointerOf(l.getBias()), pointerOf(l.getResult()),
          i64(product(shape.drop_back())), i64(shape.back()),
          f32(l.getEps().convertToDouble())});
    return success();
  }

  LogicalResult lowerLayerNormGrad(LayerNormGradOp l) {
    if (failed(requireF32(l, {l.getInput(), l.getWeight(), l.getResultGrad()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(l.getInput());
    call("dtk_layer_norm_grad_f32",
         {pointerOf(l.getInput()), pointerOf(l.getWeight()),
          pointerOf(l.getResultGrad()), pointerOf(l.getInputGrad()),
          pointerOf(l.getWeightGrad()), pointerOf(l.getBiasGrad()),
          i64(product(shape.drop_back())), i64(shape.back()),
          f32(l.getEps().convertToDouble())});
    return success();
  }

  LogicalResult lowerRope(RopeOp r) {
    if (failed(requireF32(r, {r.getInput()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(r.getInput());
    // No scaling: factor 1 (the others then do not matter).
    SmallVector<double, 4> scaling{1.0, 1.0, 4.0, 0.0};
    if (std::optional<ArrayRef<double>> s = r.getScaling())
      scaling.assign(s->begin(), s->end());
    call("dtk_rope_f32",
         {pointerOf(r.getInput()), pointerOf(r.getResult()),
          i64(product(shape.drop_back(2))), i64(shape[shape.size() - 2]),
          i64(shape.back()), f32(r.getTheta().convertToDouble()),
          f32(scaling[0]), f32(scaling[1]), f32(scaling[2]), f32(scaling[3]),
          i32(r.getInverse() ? 1 : 0)});
    return success();
  }

  /// A convolution kernel: (a, b, out, then the sizes and attributes).
  template <typename Op>
  LogicalResult lowerConv2d(Op op, StringRef kernel, Value a, Value b,
                            Value out) {
    if (failed(requireF32(op, {a, b})))
      return failure();
    Conv2dShape s = op.getConv2dShape();
    SmallVector<Value> args{pointerOf(a), pointerOf(b), pointerOf(out)};
    for (int64_t v : {s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow,
                      s.stride[0], s.stride[1], s.padding[0], s.padding[1],
                      s.dilation[0], s.dilation[1], s.groups})
      args.push_back(i64(v));
    call(kernel, args);
    return success();
  }

  /// A pooling kernel: its tensors, then the planes and window.
  template <typename Op>
  LogicalResult lowerPool2d(Op op, StringRef kernel, ArrayRef<Value> tensors) {
    if (failed(requireF32(op, tensors.drop_back())))
      return failure();
    Conv2dShape s = op.getPool2dShape();
    SmallVector<Value> args;
    for (Value t : tensors)
      args.push_back(pointerOf(t));
    for (int64_t v : {s.n * s.c, s.h, s.w, s.oh, s.ow, s.kh, s.kw, s.stride[0],
                      s.stride[1], s.padding[0], s.padding[1]})
      args.push_back(i64(v));
    call(kernel, args);
    return success();
  }

  /// dtk_dropout_f32 walks the local tensor as four nested runs of global
  /// indices (DropoutIndexing).
  LogicalResult lowerDropout(DropoutOp d) {
    if (failed(requireF32(d, {d.getInput()})))
      return failure();
    DropoutIndexing indexing = d.getIndexing();
    // The block's first index in the step's batch: the micro-batches before
    // it, then the block's offsets.
    Value base = b.create<arith::MulIOp>(loc, loadScalar(d.getMicro()),
                                         i64(indexing.elements));
    for (auto [i, first] : llvm::enumerate(d.getFirsts()))
      base = b.create<arith::AddIOp>(
          loc, base,
          b.create<arith::MulIOp>(loc, loadScalar(first),
                                  i64(indexing.strides[i])));
    SmallVector<std::pair<int64_t, int64_t>, 4> runs = indexing.runs;
    if (runs.size() > 4)
      return d.emitOpError("is split along ")
             << runs.size() - 1
             << " dimensions after its first; the CPU kernel takes three";
    runs.insert(runs.begin(), 4 - runs.size(), {1, 0});
    SmallVector<Value> args{pointerOf(d.getInput()), pointerOf(d.getResult())};
    for (auto [n, s] : runs)
      args.push_back(i64(n));
    for (auto [n, s] : runs)
      args.push_back(i64(s));
    args.append({base, i64(d.getSeed()), i64(d.getSite()),
                 loadScalar(d.getStep()), f32(d.getP().convertToDouble())});
    call("dtk_dropout_f32", args);
    return success();
  }

  LogicalResult lowerRMSNorm(RMSNormOp l) {
    if (failed(requireF32(l, {l.getInput(), l.getWeight()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(l.getInput());
    call("dtk_rms_norm_f32",
         {pointerOf(l.getInput()), pointerOf(l.getWeight()),
          pointerOf(l.getResult()), i64(product(shape.drop_back())),
          i64(shape.back()), f32(l.getEps().convertToDouble())});
    return success();
  }

  LogicalResult lowerRMSNormGrad(RMSNormGradOp l) {
    if (failed(requireF32(l, {l.getInput(), l.getWeight(), l.getResultGrad()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(l.getInput());
    call("dtk_rms_norm_grad_f32",
         {pointerOf(l.getInput()), pointerOf(l.getWeight()),
          pointerOf(l.getResultGrad()), pointerOf(l.getInputGrad()),
          pointerOf(l.getWeightGrad()), i64(product(shape.drop_back())),
          i64(shape.back()), f32(l.getEps().convertToDouble())});
    return success();
  }

  LogicalResult lowerEmbedding(EmbeddingOp e) {
    if (failed(requireF32(e, {e.getTable()})) ||
        failed(requireI32(e, e.getIds())))
      return failure();
    ArrayRef<int64_t> table = shapeOf(e.getTable());
    call("dtk_embedding_f32",
         {pointerOf(e.getTable()), pointerOf(e.getIds()),
          pointerOf(e.getResult()), i64(product(shapeOf(e.getIds()))),
          i64(table[0]), i64(table[1])});
    return success();
  }

  LogicalResult lowerEmbeddingGrad(EmbeddingGradOp e) {
    if (failed(requireF32(e, {e.getResultGrad()})) ||
        failed(requireI32(e, e.getIds())))
      return failure();
    ArrayRef<int64_t> table = shapeOf(e.getTableGrad());
    call("dtk_embedding_grad_f32",
         {pointerOf(e.getIds()), pointerOf(e.getResultGrad()),
          pointerOf(e.getTableGrad()), i64(product(shapeOf(e.getIds()))),
          i64(table[0]), i64(table[1])});
    return success();
  }

  /// The rank's index over the axes (the first the coarsest), times the
  /// block size.
  LogicalResult lowerShardStart(ShardStartOp s) {
    Value index = i64(0);
    for (int16_t axis : s.getAxes()) {
      if (axis < 0 || size_t(axis) >= meshShape.size())
        return s.emitOpError("names axis ")
               << axis << " of a mesh of " << meshShape.size() << " axes";
      Value coord = callI64("dtrt_mesh_coord", {i32(axis)});
      index = b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, index, i64(meshShape[axis])),
          coord);
    }
    Value start = b.create<arith::MulIOp>(loc, index, i64(s.getSize()));
    b.create<memref::StoreOp>(loc, start, viewOf(s.getResult()), ValueRange{});
    return success();
  }

  LogicalResult lowerEmbeddingShard(EmbeddingShardOp e) {
    if (failed(requireF32(e, {e.getTable()})) ||
        failed(requireI32(e, e.getIds())))
      return failure();
    ArrayRef<int64_t> table = shapeOf(e.getTable());
    call("dtk_embedding_shard_f32",
         {pointerOf(e.getTable()), pointerOf(e.getIds()),
          pointerOf(e.getResult()), i64(product(shapeOf(e.getIds()))),
          loadScalar(e.getFirst()), i64(table[0]), i64(e.getRows()),
          i64(table[1])});
    return success();
  }

  LogicalResult lowerEmbeddingGradShard(EmbeddingGradShardOp e) {
    if (failed(requireF32(e, {e.getResultGrad()})) ||
        failed(requireI32(e, e.getIds())))
      return failure();
    ArrayRef<int64_t> table = shapeOf(e.getTableGrad());
    call("dtk_embedding_grad_shard_f32",
         {pointerOf(e.getIds()), pointerOf(e.getResultGrad()),
          pointerOf(e.getTableGrad()), i64(product(shapeOf(e.getIds()))),
          loadScalar(e.getFirst()), i64(table[0]), i64(e.getRows()),
          i64(table[1])});
    return success();
  }

  LogicalResult lowerClassStats(ClassStatsOp c) {
    if (failed(requireF32(c, {c.getLogits(), c.getResult()})) ||
        failed(requireI32(c, c.getLabels())))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(c.getLogits());
    call("dtk_class_stats_f32",
         {pointerOf(c.getLogits()), pointerOf(c.getLabels()),
          pointerOf(c.getResult()), i64(product(shape.drop_back())),
          i64(shape.back()), loadScalar(c.getFirst()), i64(c.getClasses())});
    return success();
  }

  /// cross_entropy_stats and count_correct_stats: (stats, labels, out).
  LogicalResult lowerFromStats(Operation *op, StringRef kernel, Value stats,
                               Value labels, Value out) {
    if (failed(requireF32(op, {stats, out})) ||
        failed(requireI32(op, labels)))
      return failure();
    call(kernel, {pointerOf(stats), pointerOf(labels), pointerOf(out),
                  i64(shapeOf(stats)[0]), i64(product(shapeOf(labels)))});
    return success();
  }

  LogicalResult lowerCrossEntropyGradShard(CrossEntropyGradShardOp c) {
    if (failed(requireF32(c, {c.getLogits(), c.getStats(), c.getResultGrad()})) ||
        failed(requireI32(c, c.getLabels())))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(c.getLogits());
    call("dtk_cross_entropy_grad_shard_f32",
         {pointerOf(c.getLogits()), pointerOf(c.getLabels()),
          pointerOf(c.getStats()), pointerOf(c.getResultGrad()),
          pointerOf(c.getLogitsGrad()), i64(shapeOf(c.getStats())[0]),
          i64(product(shape.drop_back())), i64(shape.back()),
          loadScalar(c.getFirst()), i64(c.getClasses())});
    return success();
  }

  /// cross_entropy, its gradient and count_correct share (logits, labels[, g],
  /// out).
  LogicalResult lowerLogitsKernel(Operation *op, StringRef kernel, Value logits,
                                  Value labels, Value grad, Value out) {
    if (failed(requireF32(op, {logits})) || failed(requireI32(op, labels)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(logits);
    SmallVector<Value> args{pointerOf(logits), pointerOf(labels)};
    if (grad)
      args.push_back(pointerOf(grad));
    args.append(
        {pointerOf(out), i64(product(shape.drop_back())), i64(shape.back())});
    call(kernel, args);
    return success();
  }

  LogicalResult lowerAttention(AttentionOp a) {
    if (failed(requireF32(a, {a.getQuery()})))
      return failure();
    ArrayRef<int64_t> s = shapeOf(a.getQuery());
    int64_t t = s[s.size() - 2], d = s.back();
    call("dtk_attention_f32",
         {pointerOf(a.getQuery()), pointerOf(a.getKey()),
          pointerOf(a.getValue()), pointerOf(a.getResult()),
          pointerOf(a.getLse()), i64(product(s) / (t * d)), i64(t), i64(d),
          i32(a.getCausal())});
    return success();
  }

  LogicalResult lowerAttentionGrad(AttentionGradOp a) {
    if (failed(requireF32(a, {a.getQuery()})))
      return failure();
    ArrayRef<int64_t> s = shapeOf(a.getQuery());
    int64_t t = s[s.size() - 2], d = s.back();
    call("dtk_attention_grad_f32",
         {pointerOf(a.getQuery()), pointerOf(a.getKey()),
          pointerOf(a.getValue()), pointerOf(a.getResult()),
          pointerOf(a.getLse()), pointerOf(a.getResultGrad()),
          pointerOf(a.getQueryGrad()), pointerOf(a.getKeyGrad()),
          pointerOf(a.getValueGrad()), i64(product(s) / (t * d)), i64(t),
          i64(d), i32(a.getCausal())});
    return success();
  }

  /// The schedule in f64 scalar arithmetic (as the reference interpreter
  /// computes it; the GPU kernel shares the formula).
  LogicalResult lowerSchedule(ScheduleOp s) {
    auto load = [&](Value v) -> Value {
      Value x = b.create<memref::LoadOp>(loc, viewOf(v), ValueRange{});
      return b.create<arith::SIToFPOp>(loc, b.getF64Type(), x);
    };
    Value rate =
        buildScheduleRate(b, loc, s, load(s.getStep()), load(s.getTotal()));
    Type elem = elementOf(s.getResult());
    Value out = b.create<arith::TruncFOp>(loc, elem, rate);
    b.create<memref::StoreOp>(loc, out, viewOf(s.getResult()), ValueRange{});
    return success();
  }

  unsigned constants = 0;
};

struct ConvertDTToKernelsPass
    : public dt::impl::ConvertDTToKernelsBase<ConvertDTToKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto arena = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
    if (!arena) {
      module.emitError("convert-dt-to-kernels needs dt-plan-memory's offsets "
                       "(no dt.arena_bytes on the module)");
      return signalPassFailure();
    }
    llvm::StringMap<ArenaSpan> globals;
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      if (!g.getOffset()) {
        g.emitError("convert-dt-to-kernels needs dt-plan-memory's offsets "
                    "(this global has none)");
        return signalPassFailure();
      }
      globals[g.getSymName()] = {int64_t(*g.getOffset()), bytesOf(g.getType())};
    }
    // Rings of slots: the whole ring is the global's buffer.
    SmallVector<Ring> rings;
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      auto count = g->getAttrOfType<IntegerAttr>(names::kSlotsAttr);
      if (!count)
        continue;
      auto stride = g->getAttrOfType<IntegerAttr>(names::kSlotBytesAttr);
      auto index = g->getAttrOfType<FlatSymbolRefAttr>(names::kSlotIndexAttr);
      if (!stride || !index || !globals.count(index.getValue()) ||
          count.getInt() < 1) {
        g.emitError("internal error: a ring of slots needs dt.slot_bytes from "
                    "dt-plan-memory and a dt.slot_index global");
        return signalPassFailure();
      }
      ArenaSpan &whole = globals[g.getSymName()];
      whole.bytes = stride.getInt() * count.getInt();
      rings.push_back({whole, globals.lookup(index.getValue()),
                       stride.getInt(), count.getInt(), pipelineRankOf(g)});
    }
    SmallVector<int64_t> meshShape;
    if (auto mesh = module.lookupSymbol<mesh::MeshOp>("mesh"))
      meshShape.assign(mesh.getShape().begin(), mesh.getShape().end());
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        entries.push_back(fn);
    for (func::FuncOp fn : entries) {
      EntryLowering lowering(module, fn, arena.getInt(), globals, rings,
                             meshShape);
      if (failed(lowering.run()))
        return signalPassFailure();
      fn.erase();
    }
    for (GlobalOp g : llvm::make_early_inc_range(module.getOps<GlobalOp>()))
      g.erase();
    // The mesh was needed for group sizes only; LLVM has no use for it.
    for (auto mesh :
         llvm::make_early_inc_range(module.getOps<mesh::MeshOp>()))
      mesh.erase();
  }
};

} // namespace
