//===- NumberSpans.cpp - the ops that become spans of a trace -------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A span is one op's work as the run records it: code generation brackets
// the op with dtrt_span_begin/end(N), the manifest says what N is. The number
// must be decided once, here, for both to agree; and it must be decided on the
// planned module, because whether a load or store is a copy or an alias is the
// plan's decision (the same test dt-convert-dt-to-kernels makes).
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dt {
#define GEN_PASS_DEF_NUMBERSPANS
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

struct NumberSpansPass : public dt::impl::NumberSpansBase<NumberSpansPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr("dt.arena_bytes")) {
      module.emitError("dt-number-spans needs dt-plan-memory's offsets (no "
                       "dt.arena_bytes on the module)");
      return signalPassFailure();
    }
    Builder b(module.getContext());
    int64_t next = 0;
    WalkResult walk = module.walk([&](func::FuncOp fn) {
      if (fn.isExternal())
        return WalkResult::advance();
      for (Operation &op : fn.getBody().front()) {
        FailureOr<bool> works = doesWork(module, &op);
        if (failed(works))
          return WalkResult::interrupt();
        if (*works)
          op.setAttr(names::kSpanAttr, b.getI64IntegerAttr(next++));
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }

  /// Whether code generation emits anything for `op`.
  static FailureOr<bool> doesWork(ModuleOp module, Operation *op) {
    if (op->hasTrait<OpTrait::IsTerminator>() || isa<ReshapeOp>(op))
      return false;
    auto offsetOfGlobal = [&](FlatSymbolRefAttr name) -> FailureOr<int64_t> {
      auto g = module.lookupSymbol<GlobalOp>(name);
      if (!g || !g.getOffset())
        return op->emitError("dt-number-spans needs the planned offset of "
                             "global ")
               << name;
      return int64_t(*g.getOffset());
    };
    if (auto l = dyn_cast<LoadOp>(op)) {
      FailureOr<int64_t> at = offsetOfGlobal(l.getGlobalAttr());
      if (failed(at))
        return failure();
      return plannedOffset(l.getResult()) != *at;
    }
    if (auto s = dyn_cast<StoreOp>(op)) {
      FailureOr<int64_t> at = offsetOfGlobal(s.getGlobalAttr());
      if (failed(at))
        return failure();
      return plannedOffset(s.getValue()) != *at;
    }
    return true;
  }
};

} // namespace
