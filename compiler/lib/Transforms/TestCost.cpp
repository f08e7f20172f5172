//===- TestCost.cpp - remarks of the cost model's counts ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Analysis/Cost.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

namespace dt {
#define GEN_PASS_DEF_TESTCOST
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;

namespace {

std::string describe(const dt::Cost &c) {
  return llvm::formatv("flops {0}, bytes {1}", int64_t(c.flops),
                       int64_t(c.bytes))
      .str();
}

struct TestCostPass : public dt::impl::TestCostBase<TestCostPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    for (Operation &op : fn.getBody().getOps()) {
      dt::Cost c = dt::costOf(&op);
      if (c.flops > 0 || c.bytes > 0)
        op.emitRemark(describe(c));
    }
    fn.emitRemark("total: " + describe(dt::costOf(fn)));
  }
};

} // namespace
