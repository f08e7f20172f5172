//===- DTToKernels.cpp - planned dt entry points to loops and kernel calls -===//
//
// After dt-plan-memory every tensor has an arena offset, so lowering needs no value
// mapping: each op reads its operands from, and writes its results to, views of the
// arena at their offsets. Elementwise regions become linalg.generic (then loops), the
// rest become linalg copies/reductions or calls into kernels/. See Passes.td.
//
// Pattern: %y = dt.fused(%a, %b) {...}        => linalg.generic ins(view a, view b)
//                                                 outs(view y) { scalar body }
// Pattern: %c = dt.matmul %a, %b               => call @dtk_matmul_f32(ptr a, ptr b,
//                                                 ptr c, batch, m, n, k, ta, tb)
//
//===----------------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <map>

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

Type elementOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getElementType(); }

/// Lowers the body of one entry point into a new function over the arena.
class EntryLowering {
public:
  EntryLowering(ModuleOp module, func::FuncOp fn, int64_t arenaBytes)
      : module(module), source(fn), b(module.getContext()), loc(fn.getLoc()),
        arenaBytes(arenaBytes) {}

  LogicalResult run() {
    MLIRContext *ctx = module.getContext();
    auto arenaType = MemRefType::get({arenaBytes}, IntegerType::get(ctx, 8));
    b.setInsertionPoint(source);
    target = b.create<func::FuncOp>(loc, ("dt_" + source.getSymName()).str(),
                                    FunctionType::get(ctx, {arenaType}, {}));
    Block *entry = target.addEntryBlock();
    b.setInsertionPointToStart(entry);
    arena = entry->getArgument(0);
    Value address = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, arena);
    Value asInt = b.create<arith::IndexCastOp>(loc, b.getI64Type(), address);
    base = b.create<LLVM::IntToPtrOp>(loc, LLVM::LLVMPointerType::get(ctx), asInt);

    for (Operation &op : source.getBody().front()) {
      loc = op.getLoc();
      if (failed(lower(&op)))
        return failure();
    }
    return success();
  }

private:
  ModuleOp module;
  func::FuncOp source, target;
  OpBuilder b;
  Location loc;
  int64_t arenaBytes;
  Value arena, base;
  llvm::DenseMap<std::pair<int64_t, Type>, Value> views;

  //===--------------------------------------------------------------------===//
  // Arena access
  //===--------------------------------------------------------------------===//

  int64_t offsetOf(Value v) {
    auto result = llvm::cast<OpResult>(v);
    auto offsets = result.getOwner()->getAttrOfType<ArrayAttr>("dt.offsets");
    return llvm::cast<IntegerAttr>(offsets[result.getResultNumber()]).getInt();
  }

  int64_t globalOffset(StringRef name) {
    return *lookupGlobal(module, name).getOffset();
  }

  /// A view of the arena at `offset` with `shape` and `elem` (identity layout).
  Value view(int64_t offset, ArrayRef<int64_t> shape, Type elem) {
    auto type = MemRefType::get(shape, elem);
    Value &slot = views[{offset, type}];
    if (!slot) {
      // Views are made at the top of the function so that every use is dominated.
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(base.getDefiningOp());
      Value shift = b.create<arith::ConstantIndexOp>(loc, offset);
      slot = b.create<memref::ViewOp>(loc, type, arena, shift, ValueRange{});
    }
    return slot;
  }

  Value viewOf(Value v) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return view(offsetOf(v), t.getShape(), t.getElementType());
  }

  Value pointer(int64_t offset) {
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    return b.create<LLVM::GEPOp>(loc, ptr, b.getI8Type(), base,
                                 ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(offset)});
  }
  Value pointerOf(Value v) { return pointer(offsetOf(v)); }

  Value i64(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 64); }
  Value i32(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 32); }
  Value f32(double v) { return b.create<arith::ConstantFloatOp>(loc, APFloat(float(v)), b.getF32Type()); }
  Value f64(double v) { return b.create<arith::ConstantFloatOp>(loc, APFloat(v), b.getF64Type()); }

  /// Calls kernel `name`, declaring it on first use.
  void call(StringRef name, ArrayRef<Value> args) {
    auto fnType = FunctionType::get(b.getContext(), ValueRange(args).getTypes(), {});
    if (!module.lookupSymbol<func::FuncOp>(name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      b.create<func::FuncOp>(loc, name, fnType).setPrivate();
    }
    b.create<func::CallOp>(loc, name, TypeRange{}, args);
  }

  /// Kernels exist for f32 data only (and i32 ids and labels).
  LogicalResult requireF32(Operation *op, ArrayRef<Value> values) {
    for (Value v : values)
      if (!elementOf(v).isF32())
        return op->emitOpError("has ")
               << elementOf(v) << " data; the CPU backend's kernels take f32 only";
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
        .Case([&](LoadOp l) { return copyIfMoved(globalOffset(l.getGlobal()), l.getResult()); })
        .Case([&](StoreOp s) {
          int64_t to = globalOffset(s.getGlobal());
          if (offsetOf(s.getValue()) != to)
            b.create<memref::CopyOp>(loc, viewOf(s.getValue()),
                                     view(to, shapeOf(s.getValue()), elementOf(s.getValue())));
          return success();
        })
        .Case([&](ReshapeOp) { return success(); }) // a view of the same bytes
        .Case([&](ConstantOp c) { return lowerConstant(c); })
        .Case([&](IotaOp i) { return lowerIota(i); })
        .Case([&](FusedOp f) { return lowerFused(f); })
        .Case([&](ReduceSumOp r) { return lowerReduceSum(r); })
        .Case([&](TransposeOp t) { return lowerTranspose(t); })
        .Case([&](SplitOp s) { return lowerSplitOrConcat(s, s.getInput(), s.getResults(), s.getAxis(), true); })
        .Case([&](ConcatOp c) { return lowerSplitOrConcat(c, c.getResult(), c.getInputs(), c.getAxis(), false); })
        .Case([&](MatmulOp m) { return lowerMatmul(m); })
        .Case([&](SoftmaxOp s) { return lowerSoftmax(s); })
        .Case([&](LayerNormOp l) { return lowerLayerNorm(l); })
        .Case([&](LayerNormGradOp l) { return lowerLayerNormGrad(l); })
        .Case([&](EmbeddingOp e) { return lowerEmbedding(e); })
        .Case([&](EmbeddingGradOp e) { return lowerEmbeddingGrad(e); })
        .Case([&](CrossEntropyOp c) { return lowerLogitsKernel(c, "dtk_cross_entropy_f32", c.getLogits(), c.getLabels(), {}, c.getResult()); })
        .Case([&](CrossEntropyGradOp c) { return lowerLogitsKernel(c, "dtk_cross_entropy_grad_f32", c.getLogits(), c.getLabels(), c.getResultGrad(), c.getLogitsGrad()); })
        .Case([&](CountCorrectOp c) { return lowerLogitsKernel(c, "dtk_count_correct_f32", c.getLogits(), c.getLabels(), {}, c.getResult()); })
        .Case([&](AttentionOp a) { return lowerAttention(a); })
        .Case([&](AttentionGradOp a) { return lowerAttentionGrad(a); })
        .Case([&](ScheduleOp s) { return lowerSchedule(s); })
        .Case([&](func::ReturnOp) {
          b.create<func::ReturnOp>(loc);
          return success();
        })
        .Default([&](Operation *o) {
          return o->emitOpError("cannot be lowered by convert-dt-to-kernels (was the "
                                "module fused and planned?)");
        });
  }

  /// A load whose value the plan moved out of the global's buffer copies it there.
  LogicalResult copyIfMoved(int64_t from, Value result) {
    if (offsetOf(result) != from)
      b.create<memref::CopyOp>(loc, view(from, shapeOf(result), elementOf(result)),
                               viewOf(result));
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
    auto type = MemRefType::get(value.getType().getShape(), value.getElementType());
    std::string name = "__dt_constant_" + std::to_string(constants++);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      b.create<memref::GlobalOp>(loc, name, b.getStringAttr("private"), type, value,
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
          nb.create<linalg::YieldOp>(nl, ValueRange{nb.create<arith::IndexCastOp>(nl, elem, i)});
        });
    return success();
  }

  /// The indexing map that broadcasts an operand of `shape` over `iteration` (NumPy).
  AffineMap broadcastMap(ArrayRef<int64_t> shape, ArrayRef<int64_t> iteration) {
    unsigned rank = iteration.size(), lead = rank - shape.size();
    SmallVector<AffineExpr> exprs;
    for (auto [i, d] : llvm::enumerate(shape))
      exprs.push_back(d == 1 && iteration[lead + i] != 1 ? b.getAffineConstantExpr(0)
                                                          : b.getAffineDimExpr(lead + i));
    return AffineMap::get(rank, 0, exprs, b.getContext());
  }

  LogicalResult lowerFused(FusedOp f) {
    SmallVector<int64_t> iteration(f.getIterationShape());
    // With no broadcast operand, the loop nest collapses to one loop over all elements.
    bool collapse = iteration.size() > 1 && llvm::all_of(f.getInputs(), [&](Value v) {
                      return shapeOf(v).empty() || shapeOf(v) == ArrayRef<int64_t>(iteration);
                    });
    if (collapse)
      iteration = {product(iteration)};
    auto shapeFor = [&](Value v) -> SmallVector<int64_t> {
      if (shapeOf(v).empty())
        return {};
      return collapse ? iteration : SmallVector<int64_t>(shapeOf(v));
    };

    SmallVector<Value> ins, outs;
    SmallVector<AffineMap> maps;
    for (Value v : f.getInputs()) {
      SmallVector<int64_t> shape = shapeFor(v);
      ins.push_back(view(offsetOf(v), shape, elementOf(v)));
      maps.push_back(broadcastMap(shape, iteration));
    }
    for (Value r : f.getResults()) {
      outs.push_back(view(offsetOf(r), iteration, elementOf(r)));
      maps.push_back(b.getMultiDimIdentityMap(iteration.size()));
    }
    SmallVector<utils::IteratorType> iterators(iteration.size(), utils::IteratorType::parallel);
    Block &body = f.getBody().front();
    b.create<linalg::GenericOp>(
        loc, TypeRange{}, ins, outs, maps, iterators,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          llvm::DenseMap<Value, Value> scalar;
          for (auto [arg, s] : llvm::zip(body.getArguments(), args))
            scalar[arg] = s;
          for (Operation &op : body.without_terminator()) {
            SmallVector<Value> operands;
            for (Value v : op.getOperands())
              operands.push_back(scalar.lookup(v));
            auto s = llvm::cast<ScalarizableOpInterface>(op);
            scalar[op.getResult(0)] = s.buildScalar(nb, op.getLoc(), operands);
          }
          SmallVector<Value> yielded;
          for (Value v : body.getTerminator()->getOperands())
            yielded.push_back(scalar.lookup(v));
          nb.create<linalg::YieldOp>(nl, yielded);
        });
    return success();
  }

  LogicalResult lowerReduceSum(ReduceSumOp r) {
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
    SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(inShape.size()),
                                AffineMap::get(inShape.size(), 0, kept, b.getContext())};
    bool isFloat = llvm::isa<FloatType>(elem);
    b.create<linalg::GenericOp>(loc, TypeRange{}, ValueRange{in}, ValueRange{out}, maps,
                                iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
                                  Value s = isFloat ? nb.create<arith::AddFOp>(nl, args[0], args[1]).getResult()
                                                    : nb.create<arith::AddIOp>(nl, args[0], args[1]).getResult();
                                  nb.create<linalg::YieldOp>(nl, s);
                                });
    return success();
  }

  LogicalResult lowerTranspose(TransposeOp t) {
    ArrayRef<int64_t> perm = t.getPerm();
    // Result dim i is input dim perm[i]: the input is indexed by the inverse permutation.
    SmallVector<AffineExpr> inExprs(perm.size());
    for (auto [i, p] : llvm::enumerate(perm))
      inExprs[p] = b.getAffineDimExpr(i);
    SmallVector<AffineMap> maps{AffineMap::get(perm.size(), 0, inExprs, b.getContext()),
                                b.getMultiDimIdentityMap(perm.size())};
    SmallVector<utils::IteratorType> iterators(perm.size(), utils::IteratorType::parallel);
    b.create<linalg::GenericOp>(loc, TypeRange{}, ValueRange{viewOf(t.getInput())},
                                ValueRange{viewOf(t.getResult())}, maps, iterators,
                                [](OpBuilder &nb, Location nl, ValueRange args) {
                                  nb.create<linalg::YieldOp>(nl, args[0]);
                                });
    return success();
  }

  /// Copies between `whole` and consecutive slices of it along `axis`.
  LogicalResult lowerSplitOrConcat(Operation *, Value whole, ValueRange pieces, int64_t axis,
                                   bool fromWhole) {
    Value wholeView = viewOf(whole);
    ArrayRef<int64_t> shape = shapeOf(whole);
    int64_t start = 0;
    for (Value piece : pieces) {
      SmallVector<OpFoldResult> offsets(shape.size(), b.getIndexAttr(0)), sizes, strides(shape.size(), b.getIndexAttr(1));
      for (int64_t d : shapeOf(piece))
        sizes.push_back(b.getIndexAttr(d));
      offsets[axis] = b.getIndexAttr(start);
      Value slice = b.create<memref::SubViewOp>(loc, wholeView, offsets, sizes, strides);
      Value pieceView = viewOf(piece);
      if (fromWhole)
        b.create<linalg::CopyOp>(loc, slice, pieceView);
      else
        b.create<linalg::CopyOp>(loc, pieceView, slice);
      start += shapeOf(piece)[axis];
    }
    return success();
  }

  LogicalResult lowerMatmul(MatmulOp m) {
    if (failed(requireF32(m, {m.getLhs(), m.getRhs()})))
      return failure();
    ArrayRef<int64_t> a = shapeOf(m.getLhs()), c = shapeOf(m.getResult());
    size_t r = a.size();
    int64_t k = m.getTransposeLhs() ? a[r - 2] : a[r - 1];
    call("dtk_matmul_f32", {pointerOf(m.getLhs()), pointerOf(m.getRhs()), pointerOf(m.getResult()),
                            i64(product(a.drop_back(2))), i64(c[r - 2]), i64(c[r - 1]), i64(k),
                            i32(m.getTransposeLhs()), i32(m.getTransposeRhs())});
    return success();
  }

  LogicalResult lowerSoftmax(SoftmaxOp s) {
    if (failed(requireF32(s, {s.getInput()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(s.getInput());
    int64_t axis = s.getAxis();
    call("dtk_softmax_f32", {pointerOf(s.getInput()), pointerOf(s.getResult()),
                             i64(product(shape.take_front(axis))), i64(shape[axis]),
                             i64(product(shape.drop_front(axis + 1)))});
    return success();
  }

  LogicalResult lowerLayerNorm(LayerNormOp l) {
    if (failed(requireF32(l, {l.getInput(), l.getWeight(), l.getBias()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(l.getInput());
    call("dtk_layer_norm_f32",
         {pointerOf(l.getInput()), pointerOf(l.getWeight()), pointerOf(l.getBias()),
          pointerOf(l.getResult()), i64(product(shape.drop_back())), i64(shape.back()),
          f32(l.getEps().convertToDouble())});
    return success();
  }

  LogicalResult lowerLayerNormGrad(LayerNormGradOp l) {
    if (failed(requireF32(l, {l.getInput(), l.getWeight(), l.getResultGrad()})))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(l.getInput());
    call("dtk_layer_norm_grad_f32",
         {pointerOf(l.getInput()), pointerOf(l.getWeight()), pointerOf(l.getResultGrad()),
          pointerOf(l.getInputGrad()), pointerOf(l.getWeightGrad()), pointerOf(l.getBiasGrad()),
          i64(product(shape.drop_back())), i64(shape.back()), f32(l.getEps().convertToDouble())});
    return success();
  }

  LogicalResult lowerEmbedding(EmbeddingOp e) {
    if (failed(requireF32(e, {e.getTable()})) || failed(requireI32(e, e.getIds())))
      return failure();
    ArrayRef<int64_t> table = shapeOf(e.getTable());
    call("dtk_embedding_f32", {pointerOf(e.getTable()), pointerOf(e.getIds()), pointerOf(e.getResult()),
                               i64(product(shapeOf(e.getIds()))), i64(table[0]), i64(table[1])});
    return success();
  }

  LogicalResult lowerEmbeddingGrad(EmbeddingGradOp e) {
    if (failed(requireF32(e, {e.getResultGrad()})) || failed(requireI32(e, e.getIds())))
      return failure();
    ArrayRef<int64_t> table = shapeOf(e.getTableGrad());
    call("dtk_embedding_grad_f32", {pointerOf(e.getIds()), pointerOf(e.getResultGrad()),
                                    pointerOf(e.getTableGrad()), i64(product(shapeOf(e.getIds()))),
                                    i64(table[0]), i64(table[1])});
    return success();
  }

  /// cross_entropy, its gradient and count_correct share (logits, labels[, g], out).
  LogicalResult lowerLogitsKernel(Operation *op, StringRef kernel, Value logits, Value labels,
                                  Value grad, Value out) {
    if (failed(requireF32(op, {logits})) || failed(requireI32(op, labels)))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(logits);
    SmallVector<Value> args{pointerOf(logits), pointerOf(labels)};
    if (grad)
      args.push_back(pointerOf(grad));
    args.append({pointerOf(out), i64(product(shape.drop_back())), i64(shape.back())});
    call(kernel, args);
    return success();
  }

  LogicalResult lowerAttention(AttentionOp a) {
    if (failed(requireF32(a, {a.getQuery()})))
      return failure();
    ArrayRef<int64_t> s = shapeOf(a.getQuery());
    int64_t t = s[s.size() - 2], d = s.back();
    call("dtk_attention_f32", {pointerOf(a.getQuery()), pointerOf(a.getKey()), pointerOf(a.getValue()),
                               pointerOf(a.getResult()), i64(product(s) / (t * d)), i64(t), i64(d),
                               i32(a.getCausal())});
    return success();
  }

  LogicalResult lowerAttentionGrad(AttentionGradOp a) {
    if (failed(requireF32(a, {a.getQuery()})))
      return failure();
    ArrayRef<int64_t> s = shapeOf(a.getQuery());
    int64_t t = s[s.size() - 2], d = s.back();
    call("dtk_attention_grad_f32",
         {pointerOf(a.getQuery()), pointerOf(a.getKey()), pointerOf(a.getValue()),
          pointerOf(a.getResultGrad()), pointerOf(a.getQueryGrad()), pointerOf(a.getKeyGrad()),
          pointerOf(a.getValueGrad()), i64(product(s) / (t * d)), i64(t), i64(d),
          i32(a.getCausal())});
    return success();
  }

  /// The schedule in f64 scalar arithmetic (as the reference interpreter computes it).
  LogicalResult lowerSchedule(ScheduleOp s) {
    auto load = [&](Value v) -> Value {
      Value x = b.create<memref::LoadOp>(loc, viewOf(v), ValueRange{});
      return b.create<arith::SIToFPOp>(loc, b.getF64Type(), x);
    };
    Value t = load(s.getStep()), total = load(s.getTotal());
    double lr = s.getLr().convertToDouble();
    double warmup = static_cast<double>(s.getWarmup());
    StringRef kind = s.getKind();
    auto mul = [&](Value x, Value y) { return b.create<arith::MulFOp>(loc, x, y).getResult(); };
    auto add = [&](Value x, Value y) { return b.create<arith::AddFOp>(loc, x, y).getResult(); };
    auto sub = [&](Value x, Value y) { return b.create<arith::SubFOp>(loc, x, y).getResult(); };
    auto div = [&](Value x, Value y) { return b.create<arith::DivFOp>(loc, x, y).getResult(); };
    Value rate;
    if (kind == "constant") {
      rate = f64(lr);
    } else if (kind == "step") {
      Value periods = b.create<math::FloorOp>(
          loc, div(sub(t, f64(1)), f64(static_cast<double>(s.getEvery()))));
      rate = mul(f64(lr), b.create<math::PowFOp>(loc, f64(s.getGamma().convertToDouble()), periods));
    } else {
      // progress = clamp((t - warmup) / max(1, total - warmup), 0, 1)
      Value span = b.create<arith::MaximumFOp>(loc, f64(1), sub(total, f64(warmup)));
      Value progress = div(sub(t, f64(warmup)), span);
      progress = b.create<arith::MinimumFOp>(loc, f64(1),
                                             b.create<arith::MaximumFOp>(loc, f64(0), progress));
      if (kind == "cosine") {
        double mn = s.getMin().convertToDouble();
        Value c = b.create<math::CosOp>(loc, mul(f64(M_PI), progress));
        rate = add(f64(mn), mul(f64((lr - mn) * 0.5), add(f64(1), c)));
      } else { // linear
        double fin = s.getFinal().convertToDouble();
        rate = add(f64(lr), mul(f64(fin - lr), progress));
      }
      if (warmup > 0) {
        Value inWarmup = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLE, t, f64(warmup));
        rate = b.create<arith::SelectOp>(loc, inWarmup, mul(f64(lr / warmup), t), rate);
      }
    }
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
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        entries.push_back(fn);
    for (func::FuncOp fn : entries) {
      EntryLowering lowering(module, fn, arena.getInt());
      if (failed(lowering.run()))
        return signalPassFailure();
      fn.erase();
    }
    for (GlobalOp g : llvm::make_early_inc_range(module.getOps<GlobalOp>()))
      g.erase();
  }
};

} // namespace
