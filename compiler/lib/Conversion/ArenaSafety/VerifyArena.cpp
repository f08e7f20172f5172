//===- VerifyArena.cpp - every arena access inside its planned buffer -----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A lowering bug that addresses the wrong bytes of the arena does not crash:
// it trains silently wrong. This pass makes that class of bug a compile-time
// internal error. It runs on every compilation, twice:
//
// After convert-dt-to-kernels (func.func over `memref<Nxi8>`), completely:
//   1. every use of the arena is a memref.view, or the base address from which
//      kernel pointers are made; every use of the base is an
//      llvm.getelementptr; anything else is an access this pass cannot check,
//      and an error;
//   2. every view and pointer carries the buffer it is meant to address
//      (dt.buffer), which must be a buffer of the function's plan (dt.plan)
//      and lie inside the arena;
//   3. a view covers [shift, shift + its bytes), which must lie inside its
//      buffer for every value of the shift: a constant, or in a ring of
//      slots (a pipeline stage's stash) the start of slot k, the number the
//      runtime wrote, clamped to the ring, times the slot's size;
//   4. a kernel call touches [offset, offset + footprint) through each pointer
//      argument (KernelFootprint.h, from the call's size arguments), which
//      must lie inside the pointer's buffer;
//   5. loads and stores index their view within its shape, for every value
//      the loop induction variables take (intervals over scf.for bounds
//      through index arithmetic); subviews lie inside their source. A loop
//      outlined to run on the kernels' pool (dt.parallel_range = n) takes its
//      [begin, end) inside [0, n), and its entry point hands it to
//      dtk_parallel_for with that n.
//      linalg ops and copies work on whole views, which linalg's and memref's
//      own verifiers keep consistent with the operands' shapes.
//
// After dt-lower-to-llvm (llvm.func over `!llvm.ptr`), as a second line:
//   6. every address that is the arena plus a constant (through GEPs, the
//      memref descriptors' insert/extractvalue and ptrtoint/inttoptr pairs)
//      must lie inside a planned buffer, and inside its own buffer when it is
//      tagged; every kernel call's constant-offset pointers must hold the
//      call's footprint inside a planned buffer. Dynamic addresses are left to
//      the first run, where loop bounds are still visible.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/ArenaPlan.h"
#include "dt/Conversion/KernelFootprint.h"
#include "dt/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

namespace dt {
#define GEN_PASS_DEF_VERIFYARENA
#include "dt/Conversion/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

std::string str(const ArenaSpan &s) {
  return llvm::formatv("[{0}, {1})", s.offset, s.end()).str();
}

/// The value of an integer constant (arith or llvm), if `v` is one.
std::optional<int64_t> constantOf(Value v) {
  APInt value;
  if (v && matchPattern(v, m_ConstantInt(&value)) &&
      value.getSignificantBits() <= 64)
    return value.getSExtValue();
  return std::nullopt;
}

InFlightDiagnostic internalError(Operation *op) {
  InFlightDiagnostic d = op->emitError("internal error: ");
  d << "'" << op->getName() << "' ";
  return d;
}
constexpr const char *kReport =
    "; this is a bug in dtc, please report it with the program";

/// The checks common to both levels: the plan, the arena, the tags.
class PlanChecker {
public:
  PlanChecker(Operation *fn, int64_t arenaBytes, ArrayRef<ArenaSpan> plan)
      : fn(fn), arena{0, arenaBytes}, plan(plan.begin(), plan.end()) {}

  /// Whether the plan is well formed (inside the arena).
  LogicalResult checkPlan() {
    for (const ArenaSpan &b : plan)
      if (!arena.contains(b))
        return fn->emitError("internal error: the plan's buffer ")
               << str(b) << " lies outside the arena of " << arena.bytes
               << " bytes" << kReport;
    return success();
  }

  /// The buffer `op` is tagged with, checked to be one of the plan's.
  FailureOr<ArenaSpan> tagOf(Operation *op) {
    std::optional<ArenaSpan> tag = getBufferTag(op);
    if (!tag)
      return internalError(op)
             << "addresses the arena without naming its planned buffer "
                "(dt.buffer)"
             << kReport;
    if (!llvm::any_of(plan, [&](const ArenaSpan &b) {
          return b.offset == tag->offset && b.bytes == tag->bytes;
        }))
      return internalError(op) << "names buffer " << str(*tag)
                               << ", which is not in the memory plan" << kReport;
    return *tag;
  }

  /// `access` must lie inside `buffer` (and so inside the arena).
  LogicalResult checkInside(Operation *op, const ArenaSpan &access,
                            const ArenaSpan &buffer, StringRef what) {
    if (buffer.contains(access))
      return success();
    InFlightDiagnostic d = internalError(op);
    d << what << " bytes " << str(access) << " of the arena, outside ";
    if (!arena.contains(access))
      d << "the arena of " << arena.bytes << " bytes";
    else
      d << "its planned buffer " << str(buffer);
    return d << kReport;
  }

  /// `access` must lie inside some buffer of the plan.
  LogicalResult checkInPlan(Operation *op, const ArenaSpan &access,
                            StringRef what) {
    for (const ArenaSpan &b : plan)
      if (b.contains(access))
        return success();
    InFlightDiagnostic d = internalError(op);
    d << what << " bytes " << str(access) << " of the arena, "
      << (arena.contains(access) ? "outside every planned buffer"
                                 : "outside the arena");
    if (!arena.contains(access))
      d << " of " << arena.bytes << " bytes";
    return d << kReport;
  }

  /// The footprint of kernel call `op` per pointer argument.
  FailureOr<SmallVector<int64_t>> footprint(Operation *op, StringRef kernel,
                                            ValueRange args) {
    std::string why;
    FailureOr<SmallVector<int64_t>> bytes =
        kernelFootprint(kernel, args, why);
    if (failed(bytes))
      return internalError(op) << "calls " << kernel
                               << " with arguments whose footprint cannot be "
                                  "bounded: "
                               << why << kReport;
    return bytes;
  }

protected:
  Operation *fn;
  ArenaSpan arena;
  SmallVector<ArenaSpan> plan;
};

//===----------------------------------------------------------------------===//
// After convert-dt-to-kernels
//===----------------------------------------------------------------------===//

/// A closed interval of index values; `empty` when no value is taken (a loop
/// that never runs).
struct Range {
  __int128 lo = 0, hi = 0;
  bool empty = false;
};

class KernelLevelChecker : public PlanChecker {
public:
  using PlanChecker::PlanChecker;

  LogicalResult run(func::FuncOp f) {
    if (failed(checkPlan()))
      return failure();
    Value arenaArg = f.getArgument(0);
    for (Operation *user : arenaArg.getUsers()) {
      LogicalResult ok =
          llvm::TypeSwitch<Operation *, LogicalResult>(user)
              .Case([&](memref::ViewOp v) { return checkView(v); })
              .Case([&](memref::ExtractAlignedPointerAsIndexOp p) {
                return checkBase(p);
              })
              .Case([&](func::CallOp call) { return checkParallelFor(call); })
              .Default([&](Operation *op) {
                return internalError(op)
                       << "uses the arena in a way dt-verify-arena cannot "
                          "check"
                       << kReport;
              });
      if (failed(ok))
        return failure();
    }
    // Every kernel call: its pointers and footprints.
    WalkResult calls = f.walk([&](func::CallOp call) {
      if (!isKernel(call.getCallee()))
        return WalkResult::advance();
      return failed(checkKernelCall(call)) ? WalkResult::interrupt()
                                           : WalkResult::advance();
    });
    return failure(calls.wasInterrupted());
  }

private:
  llvm::DenseMap<Value, Range> ranges;

  LogicalResult checkView(memref::ViewOp v) {
    FailureOr<ArenaSpan> buffer = tagOf(v);
    if (failed(buffer))
      return failure();
    std::optional<int64_t> bytes = staticBytes(v.getType());
    if (!bytes || !v.getSizes().empty())
      return internalError(v) << "is not a view of static shape" << kReport;
    FailureOr<ArenaSpan> covered = spanOf(v, v.getByteShift(), *bytes);
    if (failed(covered) || failed(checkInside(v, *covered, *buffer, "views")))
      return failure();
    return checkUses(v.getResult());
  }

  /// The bytes that `bytes` bytes from `shift` cover for every value `shift`
  /// takes: a constant, or a slot of a ring (the runtime's slot number,
  /// clamped, times the slot's size).
  FailureOr<ArenaSpan> spanOf(Operation *op, Value shift, int64_t bytes) {
    FailureOr<Range> r = rangeOf(op, shift);
    if (failed(r))
      return failure();
    __int128 end = r->hi + bytes;
    if (r->empty || r->lo < INT64_MIN || end > INT64_MAX)
      return internalError(op) << "addresses the arena at an offset "
                                  "dt-verify-arena cannot bound"
                               << kReport;
    return ArenaSpan{int64_t(r->lo), int64_t(end - r->lo)};
  }

  /// call @dtk_parallel_for(n, grain, @loop, %arena): @loop is an outlined
  /// loop whose own range is [0, n), so its accesses, checked against that
  /// range, are the ones this call makes.
  LogicalResult checkParallelFor(func::CallOp call) {
    auto fail = [&] {
      return internalError(call)
             << "passes the arena to a call dt-verify-arena cannot check"
             << kReport;
    };
    if (call.getCallee() != "dtk_parallel_for" || call.getNumOperands() != 4 ||
        call.getOperand(3) != fn->getRegion(0).getArgument(0))
      return fail();
    auto loop = call.getOperand(2).getDefiningOp<func::ConstantOp>();
    std::optional<int64_t> n = constantOf(call.getOperand(0));
    if (!loop || !n)
      return fail();
    Operation *callee = SymbolTable::lookupNearestSymbolFrom(
        call, loop.getValueAttr());
    std::optional<int64_t> range =
        callee ? getParallelRange(callee) : std::nullopt;
    if (!range || *range != *n)
      return internalError(call)
             << "runs " << loop.getValue() << " over [0, "
             << (n ? *n : -1) << "), which is not the range it was built for"
             << kReport;
    return success();
  }

  /// The base address chain: extract_aligned_pointer_as_index, index_cast,
  /// inttoptr; the base may only be offset by GEPs.
  LogicalResult checkBase(memref::ExtractAlignedPointerAsIndexOp address) {
    SmallVector<Value> chain{address.getResult()};
    while (!chain.empty()) {
      Value v = chain.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (llvm::isa<arith::IndexCastOp, LLVM::IntToPtrOp>(user)) {
          chain.push_back(user->getResult(0));
          continue;
        }
        auto gep = llvm::dyn_cast<LLVM::GEPOp>(user);
        if (!gep || gep.getBase() != v)
          return internalError(user)
                 << "uses the arena's base address in a way dt-verify-arena "
                    "cannot check"
                 << kReport;
        if (failed(checkPointer(gep)))
          return failure();
      }
    }
    return success();
  }

  /// The bytes that `bytes` bytes from a tagged `gep` cover, for every byte
  /// offset it takes from the base.
  FailureOr<ArenaSpan> pointerSpan(LLVM::GEPOp gep, int64_t bytes) {
    auto indices = gep.getIndices();
    if (indices.size() != 1 || !gep.getElemType().isInteger(8))
      return internalError(gep) << "is not a byte offset from the arena's base"
                                << kReport;
    auto index = *indices.begin();
    if (auto attr = llvm::dyn_cast_if_present<IntegerAttr>(index))
      return ArenaSpan{attr.getInt(), bytes};
    return spanOf(gep, llvm::cast<Value>(index), bytes);
  }

  /// A pointer: its buffer, and its offset inside it.
  LogicalResult checkPointer(LLVM::GEPOp gep) {
    FailureOr<ArenaSpan> buffer = tagOf(gep);
    if (failed(buffer))
      return failure();
    FailureOr<ArenaSpan> at = pointerSpan(gep, 0);
    if (failed(at) || failed(checkInside(gep, *at, *buffer, "points at")))
      return failure();
    for (Operation *user : gep->getUsers()) {
      auto call = llvm::dyn_cast<func::CallOp>(user);
      if (!call)
        return internalError(user) << "uses an arena pointer in a way "
                                      "dt-verify-arena cannot check"
                                   << kReport;
      // Kernel calls are checked with their footprint below; any other callee
      // (the run-time checks of dtc --checked) only receives the address.
    }
    return success();
  }

  LogicalResult checkKernelCall(func::CallOp call) {
    FailureOr<SmallVector<int64_t>> bytes =
        footprint(call, call.getCallee(), call.getOperands());
    if (failed(bytes))
      return failure();
    unsigned p = 0;
    for (auto [i, arg] : llvm::enumerate(call.getOperands())) {
      if (!llvm::isa<LLVM::LLVMPointerType>(arg.getType()))
        continue;
      auto gep = arg.getDefiningOp<LLVM::GEPOp>();
      if (!gep || !getBufferTag(gep))
        return internalError(call) << "passes argument " << i
                                   << ", which is not an address in the arena"
                                   << kReport;
      FailureOr<ArenaSpan> buffer = tagOf(gep);
      if (failed(buffer))
        return failure();
      FailureOr<ArenaSpan> touched = pointerSpan(gep, (*bytes)[p++]);
      if (failed(touched))
        return failure();
      std::string what =
          llvm::formatv("to {0} touches, through argument {1},",
                        call.getCallee(), i)
              .str();
      if (failed(checkInside(call, *touched, *buffer, what)))
        return failure();
    }
    return success();
  }

  /// The uses of a view (or subview): every element they index must lie
  /// inside it.
  LogicalResult checkUses(Value view) {
    for (Operation *user : view.getUsers()) {
      LogicalResult ok =
          llvm::TypeSwitch<Operation *, LogicalResult>(user)
              .Case([&](memref::LoadOp l) {
                return checkIndices(l, view, l.getIndices(), 1);
              })
              .Case([&](memref::StoreOp s) {
                return checkIndices(s, view, s.getIndices(), 1);
              })
              .Case([&](vector::LoadOp l) {
                return checkIndices(l, view, l.getIndices(),
                                    l.getVectorType().getNumElements());
              })
              .Case([&](vector::StoreOp s) {
                return checkIndices(s, view, s.getIndices(),
                                    s.getVectorType().getNumElements());
              })
              .Case([&](memref::SubViewOp s) { return checkSubview(s); })
              // Whole-view operations: linalg's and memref's verifiers keep
              // their iteration spaces consistent with the operands' shapes.
              .Case<linalg::LinalgOp, memref::CopyOp,
                    memref::ExtractAlignedPointerAsIndexOp,
                    memref::ExtractStridedMetadataOp>(
                  [](Operation *) { return success(); })
              .Default([&](Operation *op) {
                return internalError(op) << "uses an arena view in a way "
                                            "dt-verify-arena cannot check"
                                         << kReport;
              });
      if (failed(ok))
        return failure();
    }
    return success();
  }

  LogicalResult checkSubview(memref::SubViewOp s) {
    ArrayRef<int64_t> source = s.getSourceType().getShape();
    ArrayRef<int64_t> offsets = s.getStaticOffsets(),
                      sizes = s.getStaticSizes(),
                      strides = s.getStaticStrides();
    for (size_t d = 0; d < source.size(); ++d) {
      if (ShapedType::isDynamic(offsets[d]) || ShapedType::isDynamic(sizes[d]) ||
          ShapedType::isDynamic(strides[d]))
        return internalError(s) << "has a dynamic offset, size or stride"
                                << kReport;
      __int128 last = __int128(offsets[d]) +
                      __int128(std::max<int64_t>(sizes[d] - 1, 0)) * strides[d];
      if (sizes[d] > 0 && (offsets[d] < 0 || last >= source[d]))
        return internalError(s)
               << "takes elements " << offsets[d] << ".."
               << int64_t(last) << " of dimension " << d << ", which has "
               << source[d] << kReport;
    }
    return checkUses(s.getResult());
  }

  /// `indices` of an access of `width` consecutive elements of `view`.
  LogicalResult checkIndices(Operation *op, Value view, ValueRange indices,
                             int64_t width) {
    ArrayRef<int64_t> shape = llvm::cast<MemRefType>(view.getType()).getShape();
    for (auto [d, index] : llvm::enumerate(indices)) {
      FailureOr<Range> r = rangeOf(op, index);
      if (failed(r))
        return failure();
      if (r->empty)
        return success(); // inside a loop that never runs
      int64_t extent = d + 1 == indices.size() ? width : 1;
      if (r->lo < 0 || r->hi + extent > shape[d])
        return internalError(op)
               << "indexes dimension " << d << " (of " << shape[d]
               << ") at " << int64_t(r->lo) << ".."
               << int64_t(r->hi + extent - 1) << kReport;
    }
    return success();
  }

  /// The values `v` takes: constants, scf.for induction variables over
  /// constant bounds, and index arithmetic of those.
  FailureOr<Range> rangeOf(Operation *user, Value v) {
    if (auto it = ranges.find(v); it != ranges.end())
      return it->second;
    FailureOr<Range> r = computeRange(user, v);
    if (succeeded(r))
      ranges[v] = *r;
    return r;
  }

  FailureOr<Range> computeRange(Operation *user, Value v) {
    if (std::optional<int64_t> c = constantOf(v))
      return Range{*c, *c};
    // The [begin, end) of an outlined parallel loop lie in [0, n].
    if (auto arg = llvm::dyn_cast<BlockArgument>(v);
        arg && arg.getOwner()->isEntryBlock() &&
        arg.getOwner()->getParentOp() == fn && arg.getArgNumber() > 0)
      if (std::optional<int64_t> n = getParallelRange(fn))
        return Range{0, *n};
    if (scf::ForOp loop = scf::getForInductionVarOwner(v)) {
      std::optional<int64_t> step = constantOf(loop.getStep());
      if (!step || *step <= 0)
        return internalError(loop) << "has a step that is not a positive "
                                      "constant"
                                   << kReport;
      std::optional<int64_t> lb = constantOf(loop.getLowerBound()),
                             ub = constantOf(loop.getUpperBound());
      if (lb && ub) {
        if (*lb >= *ub)
          return Range{0, 0, true};
        __int128 last = *lb + (__int128(*ub) - 1 - *lb) / *step * *step;
        return Range{*lb, last};
      }
      // Bounds that vary: only an outlined loop's [begin, end), whose every
      // value lies in [0, n).
      auto rangeArg = [&](Value bound) -> std::optional<Range> {
        if (std::optional<int64_t> c = constantOf(bound))
          return Range{*c, *c};
        auto arg = llvm::dyn_cast<BlockArgument>(bound);
        std::optional<int64_t> n = getParallelRange(fn);
        if (!arg || !n || arg.getOwner()->getParentOp() != fn ||
            arg.getArgNumber() == 0)
          return std::nullopt;
        return Range{0, *n};
      };
      std::optional<Range> lo = rangeArg(loop.getLowerBound()),
                           hi = rangeArg(loop.getUpperBound());
      if (!lo || !hi)
        return internalError(loop)
               << "has bounds that are not constants (nor the range of an "
                  "outlined parallel loop)"
               << kReport;
      if (lo->lo >= hi->hi)
        return Range{0, 0, true};
      return Range{lo->lo, hi->hi - 1};
    }
    Operation *def = v.getDefiningOp();
    auto binary = [&](auto combine) -> FailureOr<Range> {
      FailureOr<Range> a = rangeOf(user, def->getOperand(0));
      FailureOr<Range> b = rangeOf(user, def->getOperand(1));
      if (failed(a) || failed(b))
        return failure();
      if (a->empty || b->empty)
        return Range{0, 0, true};
      return combine(*a, *b);
    };
    if (llvm::isa_and_present<arith::AddIOp>(def))
      return binary([](Range a, Range b) {
        return Range{a.lo + b.lo, a.hi + b.hi};
      });
    if (llvm::isa_and_present<arith::SubIOp>(def))
      return binary([](Range a, Range b) {
        return Range{a.lo - b.hi, a.hi - b.lo};
      });
    if (llvm::isa_and_present<arith::MulIOp>(def))
      return binary([](Range a, Range b) {
        __int128 p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
        return Range{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      });
    if (llvm::isa_and_present<arith::MaxSIOp>(def))
      return binary([](Range a, Range b) {
        return Range{std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      });
    if (llvm::isa_and_present<arith::MinSIOp>(def))
      return binary([](Range a, Range b) {
        return Range{std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      });
    if (llvm::isa_and_present<arith::IndexCastOp>(def))
      return rangeOf(user, def->getOperand(0));
    // A number the arena holds (a ring's slot number): any i64, which only a
    // clamp above can bound.
    if (auto load = llvm::dyn_cast_or_null<memref::LoadOp>(def);
        load && load.getType().isInteger(64))
      return Range{INT64_MIN, INT64_MAX};
    return internalError(user) << "addresses the arena with a value "
                                  "dt-verify-arena cannot bound"
                               << kReport;
  }
};

//===----------------------------------------------------------------------===//
// After dt-lower-to-llvm
//===----------------------------------------------------------------------===//

class LLVMLevelChecker : public PlanChecker {
public:
  using PlanChecker::PlanChecker;

  LogicalResult run(LLVM::LLVMFuncOp f) {
    if (failed(checkPlan()))
      return failure();
    arenaArg = f.getArgument(0);
    layout.emplace(DataLayout::closest(f));
    WalkResult result = f.walk([&](Operation *op) {
      if (auto gep = llvm::dyn_cast<LLVM::GEPOp>(op))
        return failed(checkGEP(gep)) ? WalkResult::interrupt()
                                     : WalkResult::advance();
      if (auto call = llvm::dyn_cast<LLVM::CallOp>(op))
        if (call.getCallee() && isKernel(*call.getCallee()))
          return failed(checkKernelCall(call)) ? WalkResult::interrupt()
                                               : WalkResult::advance();
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

private:
  Value arenaArg;
  std::optional<DataLayout> layout;
  llvm::DenseMap<Value, std::optional<int64_t>> offsets;

  LogicalResult checkGEP(LLVM::GEPOp gep) {
    std::optional<int64_t> offset = offsetOf(gep.getResult());
    if (!offset)
      return success(); // dynamic: checked before lowering
    if (std::optional<ArenaSpan> tag = getBufferTag(gep))
      return checkInside(gep, {*offset, 0}, *tag, "points at");
    return checkInPlan(gep, {*offset, 0}, "points at");
  }

  LogicalResult checkKernelCall(LLVM::CallOp call) {
    StringRef kernel = *call.getCallee();
    FailureOr<SmallVector<int64_t>> bytes =
        footprint(call, kernel, call.getArgOperands());
    if (failed(bytes))
      return failure();
    unsigned p = 0;
    for (auto [i, arg] : llvm::enumerate(call.getArgOperands())) {
      if (!llvm::isa<LLVM::LLVMPointerType>(arg.getType()))
        continue;
      int64_t extent = (*bytes)[p++];
      std::optional<int64_t> offset = offsetOf(arg);
      if (!offset)
        continue;
      std::string what =
          llvm::formatv("to {0} touches, through argument {1},", kernel, i)
              .str();
      if (failed(checkInPlan(call, {*offset, extent}, what)))
        return failure();
    }
    return success();
  }

  /// The constant byte offset of pointer `v` from the arena, if it has one.
  std::optional<int64_t> offsetOf(Value v) {
    if (auto it = offsets.find(v); it != offsets.end())
      return it->second;
    std::optional<int64_t> offset = computeOffset(v);
    offsets[v] = offset;
    return offset;
  }

  std::optional<int64_t> computeOffset(Value v) {
    if (v == arenaArg)
      return 0;
    Operation *def = v.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (auto gep = llvm::dyn_cast<LLVM::GEPOp>(def)) {
      auto indices = gep.getIndices();
      if (indices.size() != 1)
        return std::nullopt;
      std::optional<int64_t> base = offsetOf(gep.getBase());
      if (!base)
        return std::nullopt;
      auto index = *indices.begin();
      std::optional<int64_t> count;
      if (auto attr = llvm::dyn_cast_if_present<IntegerAttr>(index))
        count = attr.getInt();
      else
        count = constantOf(llvm::cast<Value>(index));
      if (!count)
        return std::nullopt;
      __int128 offset = __int128(*base) +
                        __int128(*count) *
                            int64_t(layout->getTypeSize(gep.getElemType()));
      if (offset < INT64_MIN || offset > INT64_MAX)
        return INT64_MAX; // reported as outside the arena
      return int64_t(offset);
    }
    if (auto extract = llvm::dyn_cast<LLVM::ExtractValueOp>(def)) {
      // A memref descriptor's allocated or aligned pointer: find what was
      // inserted at that position.
      ArrayRef<int64_t> position = extract.getPosition();
      Value container = extract.getContainer();
      while (auto insert = container.getDefiningOp<LLVM::InsertValueOp>()) {
        if (insert.getPosition() == position)
          return offsetOf(insert.getValue());
        container = insert.getContainer();
      }
      return std::nullopt;
    }
    if (auto toPtr = llvm::dyn_cast<LLVM::IntToPtrOp>(def))
      if (auto toInt = toPtr.getArg().getDefiningOp<LLVM::PtrToIntOp>())
        return offsetOf(toInt.getArg());
    return std::nullopt;
  }
};

struct VerifyArenaPass : public dt::impl::VerifyArenaBase<VerifyArenaPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto arena = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
    for (Operation &fn : module.getBody()->getOperations()) {
      std::optional<SmallVector<ArenaSpan>> plan = getPlan(&fn);
      if (!plan)
        continue;
      if (!arena) {
        module.emitError("dt-verify-arena needs the arena's size "
                         "(dt.arena_bytes on the module)");
        return signalPassFailure();
      }
      LogicalResult ok = success();
      if (auto f = llvm::dyn_cast<func::FuncOp>(fn))
        ok = KernelLevelChecker(f, arena.getInt(), *plan).run(f);
      else if (auto f = llvm::dyn_cast<LLVM::LLVMFuncOp>(fn))
        ok = LLVMLevelChecker(f, arena.getInt(), *plan).run(f);
      if (failed(ok))
        return signalPassFailure();
    }
  }
};

} // namespace
