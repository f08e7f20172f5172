//===- SpmdPartition.cpp - The program of one rank ------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Rewrites a propagated program (every value has a layout) into the program
// every rank runs. The algorithm:
//
//   1. Globals take their local type (their layout's shard, padded) and keep
//      the whole tensor's type as `global_type`.
//   2. Each entry point is rewritten in program order. An op's operands are
//      fetched in the layouts the op needs (`dt.operand_shardings`, else
//      their own): where a value's layout differs, the plan of Layouts.h is
//      emitted as mesh collectives, memoised per value and layout so that a
//      gradient is summed once however many ops read it. A parameter that
//      ZeRO-3 keeps as a shard is gathered anew for each op that uses it, so
//      that the whole tensor lives only as long as that op.
//   3. The op is cloned on local shapes. A cross-entropy over positions split
//      across ranks divides by the number of labels over all of them: each
//      rank scales its mean by (its labels / all labels), so the partial
//      losses add up to the exact mean however the labels fall.
//   4. A store fetches its value in the global's layout.
//
// Uneven shards are padded. Collectives only ever run along the leading axis
// of a tensor (others are transposed there and back); dt.pad makes a tensor a
// whole number of shards before a reduce-scatter and dt.slice drops the
// padding a gather brings. Padding must hold zeros wherever it could be
// summed or stored: a conservative analysis tracks which values have zero
// padding, and a sum over padding or a store into a padded global that it
// cannot prove zero is an internal error rather than a wrong result.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"
#include "dt/Dialect/DT/IR/DTBuilder.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/Path.h"

namespace dt {
#define GEN_PASS_DEF_SPMDPARTITION
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// A value of the rank's program and what it holds.
struct Local {
  Value value;
  Sharding layout;
  /// Whether its padding (if any) is zero.
  bool zeroPadded = true;
};

/// Whether an op maps zero padding to zero padding, given which operands
/// have it.
bool keepsZeroPadding(Operation *op, ArrayRef<bool> zero) {
  auto all = [&] { return llvm::all_of(zero, [](bool z) { return z; }); };
  if (isa<NegOp, ReluOp, SqrtOp, StepOp, GeluOp, GeluErfOp, TanhOp, ConvertOp,
          PipelineSumOp, BroadcastToOp, ReshapeOp, TransposeOp, ReduceSumOp,
          SliceOp, PadOp>(op))
    return zero[0];
  if (isa<AddOp, SubOp, MaximumOp, MinimumOp, ConcatOp, SplitOp>(op))
    return all();
  if (isa<MulOp>(op))
    return zero[0] || zero[1];
  // Padded rows come from the lhs, padded columns from the rhs.
  if (isa<MatmulOp>(op))
    return zero[0] && zero[1];
  if (isa<DivOp>(op))
    return zero[0];
  if (auto c = dyn_cast<ConstantOp>(op)) {
    auto value = cast<DenseElementsAttr>(c.getValue());
    if (!value.isSplat())
      return false;
    Attribute v = value.getSplatValue<Attribute>();
    if (auto f = dyn_cast<FloatAttr>(v))
      return f.getValue().isZero();
    return cast<IntegerAttr>(v).getValue().isZero();
  }
  return false;
}

class FunctionPartitioner {
public:
  FunctionPartitioner(func::FuncOp fn, const MeshInfo &mesh)
      : fn(fn), mesh(mesh), b(fn.getContext()) {}

  LogicalResult run();

private:
  LogicalResult partition(Operation *op);
  LogicalResult partitionLoad(LoadOp load);
  LogicalResult partitionStore(StoreOp store);
  /// cross_entropy, its gradient and count_correct over positions split
  /// across ranks (a mean over all of them) and classes split across ranks
  /// (vocabulary parallelism).
  LogicalResult partitionLogits(Operation *op, ArrayRef<Local> operands,
                                ArrayRef<Sharding> needed);
  /// An embedding or its gradient on a block of the table's rows.
  LogicalResult partitionDropout(DropoutOp op, ArrayRef<Local> operands);
  LogicalResult partitionEmbedding(Operation *op, ArrayRef<Local> operands,
                                   const DimSharding &rows);
  /// The first global index of this rank's block of a dimension split as
  /// `dim` into blocks of `size`.
  Value shardStart(const DimSharding &dim, int64_t size);
  /// This rank's share of the global label count.
  Value labelShare(Value labels, const Local &local, const Sharding &layout);
  /// The class statistics of every block of `logits` (dt.class_stats,
  /// all-gathered), and the first class of this rank's block.
  std::pair<Value, Value> classStats(Value logits, Value labels,
                                     ArrayRef<Local> operands,
                                     const DimSharding &classes);

  /// `v` (a value of the global program) in `layout`, in the rank's program.
  FailureOr<Local> fetch(Value v, const Sharding &layout, StringRef what);
  FailureOr<Local> reshard(const Local &from, const Sharding &to,
                           ArrayRef<int64_t> shape, StringRef what);
  /// The layout `v` has for its users (its producer's `dt.sharding`).
  Sharding declared(Value v) const;
  /// What a collective moving `v` says it moves.
  std::string nameOf(Value v) const;

  // Collectives along one axis of a local tensor, through the leading axis.
  Value gatherAlong(Value x, int64_t axis, AxisId meshAxis, StringRef what);
  Value scatterAlong(Value x, int64_t axis, AxisId meshAxis, bool reduce,
                     StringRef what);
  /// Moves mesh axis `meshAxis` from splitting dimension `from` (its
  /// innermost axis, even pieces) to splitting `to`: one all-to-all.
  Value exchangeAlong(Value x, int64_t from, int64_t to, AxisId meshAxis,
                      StringRef what);
  Value moveToFront(Value x, int64_t axis);
  Value moveBack(Value x, int64_t axis, ArrayRef<int64_t> shape);
  Value reshape(Value x, ArrayRef<int64_t> shape);
  Value tag(Operation *op, StringRef what) {
    op->setAttr(layout::kWhat, b.getStringAttr(what));
    return op->getResult(0);
  }
  DenseI16ArrayAttr axesAttr(ArrayRef<AxisId> axes) {
    return b.getDenseI16ArrayAttr(SmallVector<int16_t>(axes));
  }
  FlatSymbolRefAttr meshRef() {
    return FlatSymbolRefAttr::get(b.getContext(), MeshInfo::kSymbol);
  }

  func::FuncOp fn;
  const MeshInfo &mesh;
  OpBuilder b;
  Location loc = UnknownLoc::get(fn.getContext());
  llvm::DenseMap<Value, Local> locals;
  /// Reshards already made: (value, layout) -> local value.
  llvm::DenseMap<std::pair<Value, Attribute>, Local> reshards;
  /// Every layout a value was made in, in order.
  llvm::DenseMap<Value, SmallVector<Local, 1>> madeOf;
  /// Values that are re-gathered for each user (ZeRO-3 parameters).
  llvm::DenseSet<Value> perUse;
  /// Per labels value: this rank's share of the global label count.
  llvm::DenseMap<Value, Value> labelShares;
  /// Per (logits, labels): the gathered class statistics and the first class.
  llvm::DenseMap<std::pair<Value, Value>, std::pair<Value, Value>> stats;
};

Sharding FunctionPartitioner::declared(Value v) const {
  if (std::optional<Sharding> s = layoutOfValue(v, mesh))
    return *s;
  return Sharding::replicated(tensorType(v).getRank());
}

std::string FunctionPartitioner::nameOf(Value v) const {
  Operation *def = v.getDefiningOp();
  if (auto load = dyn_cast_or_null<LoadOp>(def))
    return load.getGlobal().str();
  if (!def)
    return "a value";
  // The op and where it comes from: the layer that made it, else its line.
  std::string name = def->getName().getStringRef().str();
  Location where = def->getLoc();
  if (auto named = dyn_cast<NameLoc>(where))
    return name + " in " + named.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(where))
    name += " at " + llvm::sys::path::filename(file.getFilename()).str() + ":" +
            std::to_string(file.getLine());
  return name;
}

LogicalResult FunctionPartitioner::run() {
  SmallVector<Operation *> ops;
  for (Operation &op : fn.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (isa<func::ReturnOp>(op))
      continue;
    b.setInsertionPoint(op);
    loc = op->getLoc();
    if (failed(partition(op)))
      return failure();
  }
  for (Operation *op : llvm::reverse(ops))
    if (!isa<func::ReturnOp>(op)) {
      op->dropAllUses();
      op->erase();
    }
  return success();
}

LogicalResult FunctionPartitioner::partition(Operation *op) {
  if (auto load = dyn_cast<LoadOp>(op))
    return partitionLoad(load);
  if (auto store = dyn_cast<StoreOp>(op))
    return partitionStore(store);
  auto shardable = dyn_cast<ShardableOpInterface>(op);
  if (!shardable)
    return op->emitOpError("dt-spmd-partition cannot partition it");

  // The layouts the op needs its operands in.
  SmallVector<Sharding> needed;
  auto attrs = op->getAttrOfType<ArrayAttr>(layout::kOperands);
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    if (attrs) {
      FailureOr<Sharding> s = Sharding::fromAttr(
          cast<ShardingAttr>(attrs[i]), mesh, [&] { return op->emitError(); });
      if (failed(s))
        return failure();
      needed.push_back(*s);
    } else {
      needed.push_back(declared(v));
    }
  }
  SmallVector<Local> operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    FailureOr<Local> l = fetch(v, needed[i], nameOf(v));
    if (failed(l))
      return failure();
    operands.push_back(*l);
  }

  // A sum over padding must add zeros.
  if (auto sum = dyn_cast<ReduceSumOp>(op)) {
    ArrayRef<int64_t> shape = shapeOf(sum.getInput());
    for (int64_t axis : sum.getAxes()) {
      Sharding one = Sharding::replicated(shape.size());
      one.dims[axis] = needed[0].dims[axis];
      if (one.isPadded(shape, mesh) && !operands[0].zeroPadded)
        return op->emitError("internal error: dt-spmd-partition would sum the "
                             "padding of an uneven shard, which it cannot "
                             "prove is zero");
    }
  }

  // A contraction over padding must add zeros: one side's padding is zero.
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    ArrayRef<int64_t> lhs = shapeOf(mm.getLhs());
    size_t k = mm.getTransposeLhs() ? lhs.size() - 2 : lhs.size() - 1;
    Sharding one = Sharding::replicated(lhs.size());
    one.dims[k] = needed[0].dims[k];
    if (one.isPadded(lhs, mesh) && !operands[0].zeroPadded &&
        !operands[1].zeroPadded)
      return op->emitError("internal error: dt-spmd-partition would contract "
                           "over the padding of uneven shards, which it "
                           "cannot prove is zero");
  }

  // Vocabulary parallelism: tables split by rows, logits by classes; and
  // means over positions split across ranks.
  if (isa<EmbeddingOp>(op) && needed[0].dims[0].isSplit())
    return partitionEmbedding(op, operands, needed[0].dims[0]);
  if (isa<EmbeddingGradOp>(op)) {
    Sharding table = declared(op->getResult(0));
    if (table.dims[0].isSplit())
      return partitionEmbedding(op, operands, table.dims[0]);
  }
  if (isa<CrossEntropyOp, CrossEntropyGradOp, CountCorrectOp>(op)) {
    bool classes = needed[0].dims.back().isSplit();
    bool mean = !isa<CountCorrectOp>(op) && !needed[1].splitAxes().empty();
    if (classes || mean)
      return partitionLogits(op, operands, needed);
  }

  // Dropout draws from global coordinates: say where the block starts.
  if (auto dropout = dyn_cast<DropoutOp>(op))
    return partitionDropout(dropout, operands);

  // Clone on local shapes.
  SmallVector<Sharding> results;
  for (Value r : op->getResults())
    results.push_back(declared(r));
  Operation *local;
  if (auto c = dyn_cast<ConstantOp>(op)) {
    auto value = cast<DenseElementsAttr>(c.getValue());
    auto type = RankedTensorType::get(
        results[0].localShape(tensorType(c).getShape(), mesh),
        tensorType(c).getElementType());
    if (type != c.getType()) {
      if (!value.isSplat())
        return op->emitError("internal error: a dense constant was split");
      value = DenseElementsAttr::get(type, value.getSplatValue<Attribute>());
    }
    local = b.create<ConstantOp>(loc, value);
  } else if (auto sum = dyn_cast<PipelineSumOp>(op)) {
    // Each pipeline rank holds its summand in the same layout.
    std::optional<AxisId> axis = mesh.find(sum.getAxis());
    if (!axis)
      return op->emitError("the pipeline axis '")
             << sum.getAxis() << "' is not an axis of the mesh";
    local = tag(b.create<mesh::AllReduceOp>(
                    loc, operands[0].value.getType(), meshRef(),
                    axesAttr({*axis}), operands[0].value,
                    mesh::ReductionKindAttr::get(b.getContext(),
                                                 mesh::ReductionKind::Sum)),
                "a sum over the pipeline")
                .getDefiningOp();
  } else {
    IRMapping mapping;
    for (auto [v, l] : llvm::zip(op->getOperands(), operands))
      mapping.map(v, l.value);
    local = b.clone(*op, mapping);
    local->removeAttr(layout::kResults);
    local->removeAttr(layout::kOperands);
    for (auto [r, s] : llvm::zip(local->getResults(), results)) {
      auto t = tensorType(r);
      r.setType(
          RankedTensorType::get(s.localShape(t.getShape(), mesh),
                                t.getElementType()));
    }
  }
  SmallVector<bool> zero;
  for (const Local &l : operands)
    zero.push_back(l.zeroPadded);
  bool zeroOut = keepsZeroPadding(op, zero);
  for (auto [r, l, s] :
       llvm::zip(op->getResults(), local->getResults(), results))
    locals[r] = {l, s,
                 zeroOut || !s.isPadded(tensorType(r).getShape(), mesh)};
  return success();
}

LogicalResult FunctionPartitioner::partitionLoad(LoadOp load) {
  GlobalOp g = lookupGlobal(load, load.getGlobal());
  FailureOr<Sharding> storage = storageLayout(g, mesh);
  if (failed(storage))
    return failure();
  auto local = b.create<LoadOp>(loc, g.getType(), g.getSymName());
  locals[load.getResult()] = {local, *storage, true};
  // A parameter stored as a shard but used whole (ZeRO-3) is gathered for
  // each user.
  if (g.getRole() == Role::param && declared(load.getResult()) != *storage)
    perUse.insert(load.getResult());
  return success();
}

LogicalResult FunctionPartitioner::partitionStore(StoreOp store) {
  GlobalOp g = lookupGlobal(store, store.getGlobal());
  FailureOr<Sharding> storage = storageLayout(g, mesh);
  if (failed(storage))
    return failure();
  FailureOr<Local> v = fetch(store.getValue(), *storage, g.getSymName());
  if (failed(v))
    return failure();
  if (storage->isPadded(g.getGlobalTensorType().getShape(), mesh) &&
      !v->zeroPadded)
    return store.emitError("internal error: dt-spmd-partition would store "
                           "non-zero padding into '")
           << g.getSymName() << "', whose shards are uneven";
  b.create<StoreOp>(loc, v->value, g.getSymName());
  return success();
}

Value FunctionPartitioner::labelShare(Value labels, const Local &local,
                                      const Sharding &layout) {
  // share = (labels here) / max(1, labels on all ranks): the mean this rank
  // computes, times share, is its summand of the global mean.
  Value &share = labelShares[labels];
  if (share)
    return share;
  DTBuilder e{b, loc};
  auto t = tensorType(local.value);
  auto f32 = RankedTensorType::get(t.getShape(), b.getF32Type());
  Value asFloat = b.create<ConvertOp>(loc, f32, local.value);
  // Labels >= 0 count; -1 marks padding.
  Value valid = b.create<StepOp>(loc, e.add(asFloat, e.like(asFloat, 1.0)));
  Value here = e.sumAll(valid);
  AxisList axes = layout.splitAxes();
  llvm::sort(axes);
  Value all = tag(b.create<mesh::AllReduceOp>(
                      loc, here.getType(), meshRef(), axesAttr(axes), here,
                      mesh::ReductionKindAttr::get(b.getContext(),
                                                   mesh::ReductionKind::Sum)),
                  "the label count");
  Value denominator = b.create<MaximumOp>(loc, all, e.like(all, 1.0));
  share = e.div(here, denominator);
  return share;
}

Value FunctionPartitioner::shardStart(const DimSharding &dim, int64_t size) {
  return b.create<ShardStartOp>(loc, RankedTensorType::get({}, b.getI64Type()),
                                b.getDenseI16ArrayAttr(SmallVector<int16_t>(
                                    dim.axes.begin(), dim.axes.end())),
                                b.getI64IntegerAttr(size));
}

std::pair<Value, Value>
FunctionPartitioner::classStats(Value logits, Value labels,
                                ArrayRef<Local> operands,
                                const DimSharding &classes) {
  auto &cached = stats[{logits, labels}];
  if (cached.first)
    return cached;
  ArrayRef<int64_t> local = shapeOf(operands[0].value);
  Value first = shardStart(classes, local.back());
  SmallVector<int64_t> shape{4};
  llvm::append_range(shape, local.drop_back());
  auto f32 = b.getF32Type();
  Value mine = b.create<ClassStatsOp>(
      loc, RankedTensorType::get(shape, f32), operands[0].value,
      operands[1].value, first,
      b.getI64IntegerAttr(shapeOf(logits).back()));
  AxisList axes = classes.axes;
  llvm::sort(axes);
  int64_t blocks = mesh.size(axes);
  SmallVector<int64_t> gathered(shape);
  gathered[0] *= blocks;
  Value all = tag(b.create<mesh::AllGatherOp>(
                      loc, RankedTensorType::get(gathered, f32), meshRef(),
                      axesAttr(axes), mine, b.getIndexAttr(0)),
                  "the class statistics of the logits");
  shape.insert(shape.begin(), blocks);
  cached = {reshape(all, shape), first};
  return cached;
}

LogicalResult FunctionPartitioner::partitionLogits(Operation *op,
                                                   ArrayRef<Local> operands,
                                                   ArrayRef<Sharding> needed) {
  Value logits = op->getOperand(0), labels = op->getOperand(1);
  const DimSharding &classes = needed[0].dims.back();
  if (classes.isSplit() && classes.blocks != 1)
    return op->emitError("internal error: dt-spmd-partition cannot split "
                         "classes in blocks");
  Value share;
  if (!isa<CountCorrectOp>(op) && !needed[1].splitAxes().empty())
    share = labelShare(labels, operands[1], needed[1]);
  std::pair<Value, Value> all;
  if (classes.isSplit())
    all = classStats(logits, labels, operands, classes);

  DTBuilder e{b, loc};
  Value y = operands[1].value;
  Value local;
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    Value mean =
        all.first
            ? b.create<CrossEntropyStatsOp>(loc, ce.getType(), all.first, y)
                  .getResult()
            : b.create<CrossEntropyOp>(loc, ce.getType(), operands[0].value, y)
                  .getResult();
    local = share ? e.mul(mean, share) : mean;
  } else if (isa<CrossEntropyGradOp>(op)) {
    Value g = share ? e.mul(operands[2].value, share) : operands[2].value;
    Type type = operands[0].value.getType();
    local = all.first ? b.create<CrossEntropyGradShardOp>(
                             loc, type, operands[0].value, y, all.first, g,
                             all.second,
                             b.getI64IntegerAttr(shapeOf(logits).back()))
                            .getResult()
                      : b.create<CrossEntropyGradOp>(
                             loc, type, operands[0].value, y, g)
                            .getResult();
  } else {
    local = b.create<CountCorrectStatsOp>(loc, op->getResult(0).getType(),
                                          all.first, y);
  }
  Sharding layout = declared(op->getResult(0));
  // Padded classes get no gradient.
  locals[op->getResult(0)] = {
      local, layout,
      classes.isSplit() ||
          !layout.isPadded(tensorType(op->getResult(0)).getShape(), mesh)};
  return success();
}

LogicalResult FunctionPartitioner::partitionDropout(DropoutOp op,
                                                    ArrayRef<Local> operands) {
  Sharding layout = declared(op.getResult());
  auto type = tensorType(op.getResult());
  auto localType = RankedTensorType::get(
      layout.localShape(type.getShape(), mesh), type.getElementType());
  SmallVector<Value> firsts;
  if (llvm::any_of(layout.dims, [](const DimSharding &d) { return d.isSplit(); })) {
    auto scalar = RankedTensorType::get({}, b.getI64Type());
    Value zero = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(scalar, b.getI64IntegerAttr(0)));
    for (auto [d, dim] : llvm::enumerate(layout.dims)) {
      if (!dim.isSplit()) {
        firsts.push_back(zero);
        continue;
      }
      // A rank's blocks of such a dimension are not one run of indices.
      if (dim.blocks != 1)
        return op.emitError("dropout on a tensor whose dimension ")
               << d << " is split in " << dim.blocks
               << " blocks (a fused projection's output) is not supported "
                  "yet: apply it after the blocks are split apart";
      firsts.push_back(shardStart(dim, localType.getDimSize(d)));
    }
  }
  Value local = b.create<DropoutOp>(
      loc, operands[0].value, operands[1].value, operands[2].value, firsts,
      op.getPAttr(), op.getSeedAttr(), op.getSiteAttr(), op.getShapeAttr());
  // Zeros stay zeros.
  locals[op.getResult()] = {
      local, layout,
      operands[0].zeroPadded || !layout.isPadded(type.getShape(), mesh)};
  return success();
}

LogicalResult FunctionPartitioner::partitionEmbedding(Operation *op,
                                                      ArrayRef<Local> operands,
                                                      const DimSharding &rows) {
  if (rows.blocks != 1)
    return op->emitError("internal error: dt-spmd-partition cannot split a "
                         "table's rows in blocks");
  Sharding layout = declared(op->getResult(0));
  auto resultType = tensorType(op->getResult(0));
  auto localType = RankedTensorType::get(
      layout.localShape(resultType.getShape(), mesh),
      resultType.getElementType());
  Value local;
  if (auto lookup = dyn_cast<EmbeddingOp>(op)) {
    int64_t total = shapeOf(lookup.getTable())[0];
    Value first = shardStart(rows, shapeOf(operands[0].value)[0]);
    local = b.create<EmbeddingShardOp>(loc, localType, operands[0].value,
                                       operands[1].value, first,
                                       b.getI64IntegerAttr(total));
  } else {
    int64_t total = resultType.getShape()[0];
    Value first = shardStart(rows, localType.getShape()[0]);
    local = b.create<EmbeddingGradShardOp>(loc, localType, operands[0].value,
                                           operands[1].value, first,
                                           b.getI64IntegerAttr(total));
  }
  // Ids of padding rows never occur: their gradient rows stay zero.
  locals[op->getResult(0)] = {
      local, layout,
      isa<EmbeddingGradOp>(op) ||
          !layout.isPadded(resultType.getShape(), mesh)};
  return success();
}

FailureOr<Local> FunctionPartitioner::fetch(Value v, const Sharding &layout,
                                            StringRef what) {
  auto it = locals.find(v);
  if (it == locals.end())
    return emitError(loc, "internal error: dt-spmd-partition reached a value "
                          "before its definition"),
           failure();
  const Local &cur = it->second;
  if (cur.layout == layout)
    return cur;
  // A splat is made anew in any layout; as a partial sum over axes of k
  // ranks, each holds 1/k of it (zeros stay zeros).
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    auto value = cast<DenseElementsAttr>(c.getValue());
    bool zero = keepsZeroPadding(c, {});
    auto f = dyn_cast<FloatType>(value.getElementType());
    if (value.isSplat() && (layout.partial.empty() || zero || f)) {
      auto type = RankedTensorType::get(
          layout.localShape(tensorType(v).getShape(), mesh),
          tensorType(v).getElementType());
      Attribute element = value.getSplatValue<Attribute>();
      if (!layout.partial.empty() && !zero)
        element = FloatAttr::get(
            f, cast<FloatAttr>(element).getValueAsDouble() /
                   double(mesh.size(layout.partial)));
      Value splat =
          b.create<ConstantOp>(loc, DenseElementsAttr::get(type, element));
      return Local{splat, layout, zero};
    }
  }
  // A broadcast of a scalar is made anew in any whole-valued layout.
  if (auto bc = v.getDefiningOp<BroadcastToOp>();
      bc && shapeOf(bc.getInput()).empty() && layout.partial.empty()) {
    FailureOr<Local> scalar = fetch(bc.getInput(), Sharding::replicated(0),
                                    nameOf(bc.getInput()));
    if (failed(scalar))
      return failure();
    auto type = RankedTensorType::get(
        layout.localShape(tensorType(v).getShape(), mesh),
        tensorType(v).getElementType());
    Value made = b.create<BroadcastToOp>(loc, type, scalar->value);
    return Local{made, layout,
                 !layout.isPadded(tensorType(v).getShape(), mesh)};
  }
  Attribute key = layout.toAttr(b.getContext(), mesh);
  bool memoise = !perUse.contains(v);
  ArrayRef<int64_t> shape = tensorType(v).getShape();
  Local from = cur;
  if (memoise) {
    if (auto found = reshards.find({v, key}); found != reshards.end())
      return found->second;
    // A layout made earlier that slicing alone turns into this one (a
    // gradient summed whole is sliced, not summed again).
    for (const Local &made : madeOf[v]) {
      FailureOr<ReshardPlan> plan =
          planReshard(made.layout, layout, shape, mesh);
      if (succeeded(plan) &&
          llvm::all_of(*plan, [](const ReshardStep &s) {
            return s.kind == ReshardStep::Kind::Slice;
          })) {
        from = made;
        break;
      }
    }
  }
  FailureOr<Local> l = reshard(from, layout, shape, what);
  if (succeeded(l) && memoise)
    madeOf[v].push_back(*l);
  if (succeeded(l) && memoise)
    reshards[{v, key}] = *l;
  return l;
}

FailureOr<Local> FunctionPartitioner::reshard(const Local &from,
                                              const Sharding &to,
                                              ArrayRef<int64_t> shape,
                                              StringRef what) {
  FailureOr<ReshardPlan> plan =
      planReshard(from.layout, to, shape, mesh);
  if (failed(plan))
    return emitError(loc, "internal error: no collectives turn ")
               << from.layout.toAttr(b.getContext(), mesh) << " into "
               << to.toAttr(b.getContext(), mesh),
           failure();
  Local cur = from;
  for (const ReshardStep &step : *plan) {
    Value x = cur.value;
    auto t = tensorType(x);
    SmallVector<int64_t> before(t.getShape()), after =
                                                   step.after.localShape(shape, mesh);
    switch (step.kind) {
    case ReshardStep::Kind::AllReduce:
      x = tag(b.create<mesh::AllReduceOp>(
                  loc, t, meshRef(), axesAttr(step.axes), x,
                  mesh::ReductionKindAttr::get(b.getContext(),
                                               mesh::ReductionKind::Sum)),
              what);
      break;
    case ReshardStep::Kind::Distribute: {
      auto c = x.getDefiningOp<ConstantOp>();
      bool zero = c && keepsZeroPadding(c, {});
      if (!zero) {
        DTBuilder e{b, loc};
        x = e.mul(x, e.like(x, 1.0 / double(mesh.size(step.axes))));
      }
      break;
    }
    case ReshardStep::Kind::AllToAll:
      x = exchangeAlong(x, step.dim, step.toDim, step.axes[0], what);
      x = reshape(x, after);
      break;
    case ReshardStep::Kind::AllGather:
    case ReshardStep::Kind::ReduceScatter:
    case ReshardStep::Kind::Slice: {
      // View the dimension as [blocks, entries] so that the collective runs
      // on the entries of every block.
      int64_t d = step.dim;
      const DimSharding &wide = step.kind == ReshardStep::Kind::AllGather
                                    ? cur.layout.dims[d]
                                    : step.after.dims[d];
      int64_t blocks = wide.blocks;
      int64_t axis = d;
      SmallVector<int64_t> split(before);
      if (blocks > 1) {
        split[d] = before[d] / blocks;
        split.insert(split.begin() + d, blocks);
        axis = d + 1;
        x = reshape(x, split);
      }
      int64_t entriesAfter = after[d] / blocks;
      AxisId a = step.axes[0];
      int64_t k = mesh.size(a);
      if (step.kind == ReshardStep::Kind::AllGather) {
        x = gatherAlong(x, axis, a, what);
        if (shapeOf(x)[axis] != entriesAfter) {
          SmallVector<int64_t> kept(shapeOf(x));
          kept[axis] = entriesAfter;
          x = b.create<SliceOp>(loc,
                                RankedTensorType::get(kept, t.getElementType()),
                                x, axis, 0);
        }
      } else {
        if (shapeOf(x)[axis] != k * entriesAfter) {
          SmallVector<int64_t> padded(shapeOf(x));
          padded[axis] = k * entriesAfter;
          x = b.create<PadOp>(loc,
                              RankedTensorType::get(padded, t.getElementType()),
                              x, axis);
        }
        x = scatterAlong(x, axis, a,
                         step.kind == ReshardStep::Kind::ReduceScatter, what);
      }
      x = reshape(x, after);
      break;
    }
    }
    cur = {x, step.after, cur.zeroPadded};
  }
  return cur;
}

Value FunctionPartitioner::exchangeAlong(Value x, int64_t from, int64_t to,
                                         AxisId meshAxis, StringRef what) {
  int64_t k = mesh.size(meshAxis);
  // [.., from, .., to, ..] -> [k, to / k, others...]: block j of `to` goes to
  // the group's member j ...
  Value y = moveToFront(x, to);
  SmallVector<int64_t> blocked(shapeOf(y));
  int64_t pieces = blocked[0] / k;
  blocked[0] = pieces;
  blocked.insert(blocked.begin(), k);
  y = reshape(y, blocked);
  y = tag(b.create<mesh::AllToAllOp>(loc, y.getType(), meshRef(),
                                     axesAttr({meshAxis}), y,
                                     b.getIndexAttr(0), b.getIndexAttr(0)),
          what);
  // ... and block j received is member j's piece of `from`, the major part of
  // the joined dimension: put it before `from` and merge them.
  int64_t at = 2 + (from < to ? from : from - 1);
  y = moveBack(y, at - 1, shapeOf(y));
  SmallVector<int64_t> joined(shapeOf(y));
  joined[at - 1] *= joined[at];
  joined.erase(joined.begin() + at);
  y = reshape(y, joined);
  return moveBack(y, to, shapeOf(y));
}

Value FunctionPartitioner::reshape(Value x, ArrayRef<int64_t> shape) {
  DTBuilder e{b, loc};
  return e.reshape(x, shape);
}

/// Brings `axis` to the front: a reshape when only size-1 dimensions precede
/// it (the bytes are already in that order), else a transpose.
Value FunctionPartitioner::moveToFront(Value x, int64_t axis) {
  ArrayRef<int64_t> shape = shapeOf(x);
  if (axis == 0)
    return x;
  SmallVector<int64_t> perm{axis};
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d != axis)
      perm.push_back(d);
  SmallVector<int64_t> moved;
  for (int64_t p : perm)
    moved.push_back(shape[p]);
  if (llvm::all_of(shape.take_front(axis), [](int64_t s) { return s == 1; }))
    return reshape(x, moved);
  return b.create<TransposeOp>(
      loc, RankedTensorType::get(moved, tensorType(x).getElementType()), x,
      b.getDenseI64ArrayAttr(perm));
}

/// The inverse of moveToFront for a result of `shape` (axis at the front).
Value FunctionPartitioner::moveBack(Value x, int64_t axis,
                                   ArrayRef<int64_t> shape) {
  if (axis == 0)
    return x;
  SmallVector<int64_t> original(shape.drop_front());
  original.insert(original.begin() + axis, shape[0]);
  if (llvm::all_of(ArrayRef(original).take_front(axis),
                   [](int64_t s) { return s == 1; }))
    return reshape(x, original);
  SmallVector<int64_t> perm;
  for (int64_t d = 1; d <= axis; ++d)
    perm.push_back(d);
  perm.push_back(0);
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d)
    perm.push_back(d);
  return b.create<TransposeOp>(
      loc, RankedTensorType::get(original, tensorType(x).getElementType()), x,
      b.getDenseI64ArrayAttr(perm));
}

Value FunctionPartitioner::gatherAlong(Value x, int64_t axis, AxisId meshAxis,
                                       StringRef what) {
  Value front = moveToFront(x, axis);
  SmallVector<int64_t> shape(shapeOf(front));
  shape[0] *= mesh.size(meshAxis);
  Value gathered = tag(
      b.create<mesh::AllGatherOp>(
          loc, RankedTensorType::get(shape, tensorType(x).getElementType()),
          meshRef(), axesAttr({meshAxis}), front, b.getIndexAttr(0)),
      what);
  return moveBack(gathered, axis, shape);
}

Value FunctionPartitioner::scatterAlong(Value x, int64_t axis,
                                        AxisId meshAxis, bool reduce,
                                        StringRef what) {
  Value front = moveToFront(x, axis);
  SmallVector<int64_t> shape(shapeOf(front));
  shape[0] /= mesh.size(meshAxis);
  auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
  Operation *op;
  if (reduce)
    op = b.create<mesh::ReduceScatterOp>(
        loc, type, meshRef(), axesAttr({meshAxis}), front,
        mesh::ReductionKindAttr::get(b.getContext(), mesh::ReductionKind::Sum),
        b.getIndexAttr(0));
  else
    op = b.create<mesh::AllSliceOp>(loc, type, meshRef(), axesAttr({meshAxis}),
                                    front, b.getIndexAttr(0));
  return moveBack(tag(op, what), axis, shape);
}

struct SpmdPartitionPass
    : public dt::impl::SpmdPartitionBase<SpmdPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshInfo> mesh = MeshInfo::get(module);
    if (failed(mesh))
      return signalPassFailure();
    if (mesh->rank() == 0)
      return;
    // 1. Globals: the shard each rank stores.
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      if (g.getGlobalType())
        continue;
      FailureOr<Sharding> layout = storageLayout(g, *mesh);
      if (failed(layout) ||
          failed(layout->verify(g.getTensorType().getShape(), *mesh,
                                [&] { return g.emitError(); })))
        return signalPassFailure();
      RankedTensorType whole = g.getTensorType();
      g.setGlobalTypeAttr(TypeAttr::get(whole));
      g.setType(RankedTensorType::get(
          layout->localShape(whole.getShape(), *mesh),
          whole.getElementType()));
    }
    // 2-4. Entry points.
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (failed(FunctionPartitioner(fn, *mesh).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
