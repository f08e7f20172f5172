//===- GPUKernels.cpp - which planned ops become generated GPU kernels ----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/GPUKernels.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Transforms/Passes.h" // plannedOffset

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace dt {

bool isGeneratedKernelOp(Operation *op) {
  // Constants too: a dense one is refused where its kernel is built.
  return llvm::isa<ConstantOp, FusedOp, TransposeOp, SplitOp, ConcatOp, SliceOp, PadOp,
                   ReduceSumOp, IotaOp, ScheduleOp>(op);
}

void forEachGeneratedKernel(
    ModuleOp module,
    llvm::function_ref<void(Operation *, const std::string &)> fn) {
  for (auto entry : module.getOps<func::FuncOp>()) {
    if (entry.isExternal())
      continue;
    int n = 0;
    for (Operation &op : entry.getBody().front())
      if (isGeneratedKernelOp(&op))
        fn(&op, (entry.getSymName() + "_k" + llvm::Twine(n++)).str());
  }
}

static int64_t numel(Value v) {
  return std::max<int64_t>(
      1, llvm::cast<RankedTensorType>(v.getType()).getNumElements());
}

ReductionSplit splitReduction(int64_t outputs, int64_t perOutput) {
  // A block sums 4096 terms (16 a thread) at least; outputs enough to fill
  // the GPU by themselves keep a block each.
  constexpr int64_t kChunk = 4096, kEnoughOutputs = 256;
  if (!reducesByBlock(outputs, perOutput) || outputs >= kEnoughOutputs ||
      perOutput < 2 * kChunk)
    return {};
  return {(perOutput + kChunk - 1) / kChunk, kChunk};
}

std::optional<std::pair<int64_t, int64_t>> reductionShape(Operation *op) {
  if (auto f = llvm::dyn_cast<FusedOp>(op)) {
    std::optional<ArrayRef<int64_t>> axes = f.getReduceAxes();
    if (!axes)
      return std::nullopt;
    ArrayRef<int64_t> iteration = f.getIterationShape();
    int64_t outputs = 1, perOutput = 1;
    for (int64_t d = 0; d < int64_t(iteration.size()); ++d)
      (llvm::is_contained(*axes, d) ? perOutput : outputs) *= iteration[d];
    return std::pair{outputs, perOutput};
  }
  if (auto r = llvm::dyn_cast<ReduceSumOp>(op)) {
    int64_t outputs = numel(r.getResult());
    return std::pair{outputs, numel(r.getInput()) / outputs};
  }
  return std::nullopt;
}

/// The reduced axes of a reduction kernel's op and its iteration's rank.
static std::optional<std::pair<ArrayRef<int64_t>, int64_t>>
reducedAxes(Operation *op) {
  if (auto f = llvm::dyn_cast<FusedOp>(op)) {
    std::optional<ArrayRef<int64_t>> axes = f.getReduceAxes();
    if (!axes)
      return std::nullopt;
    return std::pair{*axes, int64_t(f.getIterationShape().size())};
  }
  if (auto r = llvm::dyn_cast<ReduceSumOp>(op))
    return std::pair{
        r.getAxes(),
        int64_t(
            llvm::cast<RankedTensorType>(r.getInput().getType()).getRank())};
  return std::nullopt;
}

bool sumsColumns(Operation *op) {
  auto shape = reductionShape(op);
  auto axes = reducedAxes(op);
  if (!shape || !axes)
    return false;
  auto [outputs, perOutput] = *shape;
  auto [reduced, rank] = *axes;
  if (!reducesByBlock(outputs, perOutput) || outputs < kGpuColumnTile ||
      reduced.empty() || int64_t(reduced.size()) >= rank)
    return false;
  for (auto [i, d] : llvm::enumerate(reduced))
    if (d != int64_t(i))
      return false;
  return true;
}

ReductionSplit reductionSplit(Operation *op) {
  auto shape = reductionShape(op);
  if (!shape)
    return {};
  auto [outputs, perOutput] = *shape;
  if (!sumsColumns(op))
    return splitReduction(outputs, perOutput);
  // As many blocks as an H100 or H200 holds at once (8 of 256 threads on
  // each of 132 multiprocessors): a lane loads 2 or 4 bytes at a time, so it
  // takes every thread to keep enough loads in flight. Each block sums 256
  // rows of its tile at least (32 a warp).
  constexpr int64_t kBlocks = 8 * 132, kLeastRows = 256;
  int64_t tiles = (outputs + kGpuColumnTile - 1) / kGpuColumnTile;
  int64_t chunks =
      std::min((kBlocks + tiles - 1) / tiles, perOutput / kLeastRows);
  if (chunks < 2)
    return {};
  // Whole rows for each of the eight warps.
  int64_t chunk = ((perOutput + chunks - 1) / chunks + 7) / 8 * 8;
  return {(perOutput + chunk - 1) / chunk, chunk};
}

static int64_t alignTo8(int64_t bytes) { return (bytes + 7) / 8 * 8; }

llvm::DenseMap<Operation *, ReductionScratch>
reductionScratch(ModuleOp module) {
  llvm::DenseMap<Operation *, ReductionScratch> spans;
  auto arena = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
  int64_t at = alignTo8(arena ? arena.getInt() : 0);
  forEachGeneratedKernel(module, [&](Operation *op, const std::string &) {
    auto shape = reductionShape(op);
    if (!shape)
      return;
    auto [outputs, perOutput] = *shape;
    ReductionSplit split = reductionSplit(op);
    if (!split.split())
      return;
    int64_t bytes = alignTo8(outputs * 4) +
                    outputs * split.chunks * int64_t(op->getNumResults()) * 8;
    spans[op] = {at, bytes};
    at += bytes;
  });
  return spans;
}

int64_t gpuArenaBytes(ModuleOp module) {
  auto arena = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
  int64_t bytes = arena ? arena.getInt() : 0;
  for (auto &[op, span] : reductionScratch(module))
    bytes = std::max(bytes, span.offset + span.bytes);
  return bytes;
}

/// The bytes of a `t` element in a vector, or 0 where vectors do not take
/// it (i1, index).
static int64_t vectorElementBytes(Type t) {
  if (!t.isIntOrFloat())
    return 0;
  unsigned bits = t.getIntOrFloatBitWidth();
  return bits >= 8 && bits <= 64 && bits % 8 == 0 ? bits / 8 : 0;
}

static ArrayRef<int64_t> dimsOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

int64_t vectorWidth(Operation *op, int64_t unroll) {
  if (unroll < 2)
    return 1;
  // The tensors the groups load or store as vectors, and the extents along
  // the last dimension that every group must lie within.
  SmallVector<Value> vectors;
  SmallVector<int64_t> extents;
  auto pieces = [&](Value whole, ValueRange parts, int64_t axis,
                    int64_t start) {
    vectors.push_back(whole);
    int64_t last = int64_t(dimsOf(whole).size()) - 1;
    for (Value part : parts) {
      vectors.push_back(part);
      extents.push_back(dimsOf(part).back());
      if (axis == last) {
        extents.push_back(start);
        start += dimsOf(part).back();
      }
    }
    extents.push_back(dimsOf(whole).back());
  };
  if (auto f = llvm::dyn_cast<FusedOp>(op)) {
    ArrayRef<int64_t> iteration = f.getIterationShape();
    if (f.getReduceAxes() || iteration.empty())
      return 1;
    extents.push_back(iteration.back());
    for (Value in : f.getInputs()) {
      ArrayRef<int64_t> shape = dimsOf(in);
      // Broadcast along the last dimension: one scalar a group.
      if (!shape.empty() && shape.back() != 1)
        vectors.push_back(in);
    }
    llvm::append_range(vectors, f.getResults());
  } else if (auto t = llvm::dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> perm = t.getPerm();
    if (perm.empty() || perm.back() != int64_t(perm.size()) - 1)
      return 1;
    vectors = {t.getInput(), t.getResult()};
    extents.push_back(dimsOf(t.getResult()).back());
  } else if (auto s = llvm::dyn_cast<SplitOp>(op)) {
    pieces(s.getInput(), s.getResults(), s.getAxis(), 0);
  } else if (auto c = llvm::dyn_cast<ConcatOp>(op)) {
    pieces(c.getResult(), c.getInputs(), c.getAxis(), 0);
  } else if (auto s = llvm::dyn_cast<SliceOp>(op)) {
    pieces(s.getInput(), s.getResult(), s.getAxis(), s.getStart());
  } else {
    return 1;
  }
  // Each vector's arena offset and element bytes; an unplanned or
  // byte-less one (i1) takes no groups.
  SmallVector<std::pair<int64_t, int64_t>> placed;
  int64_t widest = 0, narrowest = kGpuVectorBytes;
  for (Value v : vectors) {
    auto result = llvm::dyn_cast<OpResult>(v);
    int64_t bytes = vectorElementBytes(
        llvm::cast<RankedTensorType>(v.getType()).getElementType());
    if (dimsOf(v).empty() || !bytes || !result ||
        !result.getOwner()->hasAttr("dt.offsets"))
      return 1;
    placed.push_back({plannedOffset(v), bytes});
    widest = std::max(widest, bytes);
    narrowest = std::min(narrowest, bytes);
  }
  auto fits = [&](int64_t width) {
    return llvm::all_of(extents, [&](int64_t e) { return e % width == 0; }) &&
           llvm::all_of(placed, [&](auto &p) {
             return p.first % (width * p.second) == 0;
           });
  };
  for (int64_t width =
           std::min(kGpuVectorBytes / narrowest, 2 * kGpuVectorBytes / widest);
       width >= 2; width /= 2)
    if (fits(width))
      return width;
  return 1;
}

int64_t launchElements(Operation *op, int64_t unroll) {
  int64_t width = vectorWidth(op, unroll);
  // A reduction by blocks walks its outputs (or their chunks) a block each;
  // a column sum, its tiles of kGpuColumnTile outputs (or their chunks).
  if (auto shape = reductionShape(op)) {
    auto [outputs, perOutput] = *shape;
    if (!reducesByBlock(outputs, perOutput))
      return outputs;
    int64_t blocks = sumsColumns(op)
                         ? (outputs + kGpuColumnTile - 1) / kGpuColumnTile
                         : outputs;
    return blocks * reductionSplit(op).chunks * kGpuThreadsPerBlock;
  }
  if (auto s = llvm::dyn_cast<SplitOp>(op)) {
    int64_t n = 1;
    for (Value r : s.getResults())
      n = std::max(n, numel(r));
    return n / width;
  }
  if (auto c = llvm::dyn_cast<ConcatOp>(op)) {
    int64_t n = 1;
    for (Value in : c.getInputs())
      n = std::max(n, numel(in));
    return n / width;
  }
  if (llvm::isa<ScheduleOp>(op))
    return 1;
  return numel(op->getResult(0)) / width;
}

Value buildScheduleRate(OpBuilder &b, Location loc, ScheduleOp s, Value t,
                        Value total) {
  auto f64 = [&](double v) -> Value {
    return b.create<arith::ConstantFloatOp>(loc, APFloat(v), b.getF64Type());
  };
  auto mul = [&](Value x, Value y) -> Value {
    return b.create<arith::MulFOp>(loc, x, y);
  };
  auto add = [&](Value x, Value y) -> Value {
    return b.create<arith::AddFOp>(loc, x, y);
  };
  auto sub = [&](Value x, Value y) -> Value {
    return b.create<arith::SubFOp>(loc, x, y);
  };
  auto div = [&](Value x, Value y) -> Value {
    return b.create<arith::DivFOp>(loc, x, y);
  };
  double lr = s.getLr().convertToDouble();
  double warmup = static_cast<double>(s.getWarmup());
  StringRef kind = s.getKind();
  Value rate;
  if (kind == "constant") {
    rate = f64(lr);
  } else if (kind == "step") {
    Value periods = b.create<math::FloorOp>(
        loc, div(sub(t, f64(1)), f64(static_cast<double>(s.getEvery()))));
    rate = mul(f64(lr), b.create<math::PowFOp>(
                            loc, f64(s.getGamma().convertToDouble()), periods));
  } else {
    // progress = clamp((t - 1 - warmup) / max(1, total - warmup), 0, 1): the
    // first step after warm-up runs at exactly lr (as Hugging Face's
    // schedules do).
    Value span =
        b.create<arith::MaximumFOp>(loc, f64(1), sub(total, f64(warmup)));
    Value progress = div(sub(t, f64(warmup + 1)), span);
    progress = b.create<arith::MinimumFOp>(
        loc, f64(1), b.create<arith::MaximumFOp>(loc, f64(0), progress));
    if (kind == "cosine") {
      double mn = s.getMin().convertToDouble();
      Value c = b.create<math::CosOp>(loc, mul(f64(M_PI), progress));
      rate = add(f64(mn), mul(f64((lr - mn) * 0.5), add(f64(1), c)));
    } else { // linear
      double fin = s.getFinal().convertToDouble();
      rate = add(f64(lr), mul(f64(fin - lr), progress));
    }
    if (warmup > 0) {
      Value inWarmup = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLE,
                                               t, f64(warmup));
      rate = b.create<arith::SelectOp>(loc, inWarmup,
                                       mul(f64(lr / warmup), t), rate);
    }
  }
  return rate;
}

} // namespace dt
