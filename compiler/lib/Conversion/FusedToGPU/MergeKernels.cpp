//===- MergeKernels.cpp - small generated kernels as one launch -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A step launches hundreds of generated kernels of a few blocks each (a
// layer norm's parameters rounded to bf16, the optimizer's update of a
// bias), each paying a launch and a ramp on the GPU for a microsecond of
// work. The GPU plan (dt/Target/CudaPlan.h) puts independent ones side by
// side in one launch, and this builds that launch's kernel: member i takes
// blocks [first_i, first_i + blocks_i) and runs its own kernel's body there,
// with the block index less first_i and the grid its blocks_i. Every block
// takes one member's path whole, so a member's barriers stay block-uniform,
// and the members share their workgroup memory (a launch needs what its
// hungriest member does, not the sum).
// The members' kernels stay in the module as they were (the tests run them
// one by one).
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/GPUKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace dt {

namespace {

/// The body of one merged kernel, `fn`.
class Merger {
public:
  Merger(gpu::GPUModuleOp kernels, gpu::GPUFuncOp fn, const MergedKernel &m)
      : kernels(kernels), fn(fn), m(m), loc(fn.getLoc()) {
    firsts.push_back(0);
    for (int64_t count : m.blocks)
      firsts.push_back(firsts.back() + count);
  }

  LogicalResult build(OpBuilder &b) {
    Value block = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
    return members(b, block, 0, m.members.size());
  }

private:
  /// Members [lo, hi), whose blocks run from firsts[lo] to firsts[hi]: a
  /// binary search on the block's index, so that a block tests a few
  /// bounds rather than every member's (the optimizer's update merges a
  /// hundred and more).
  LogicalResult members(OpBuilder &b, Value block, size_t lo, size_t hi) {
    if (hi - lo == 1)
      return inlineMember(b, block, lo);
    size_t mid = (lo + hi) / 2;
    Value below = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::ult, block,
        b.create<arith::ConstantIndexOp>(loc, firsts[mid]));
    auto branch = b.create<scf::IfOp>(loc, below, /*withElseRegion=*/true);
    OpBuilder low = branch.getThenBodyBuilder(),
              high = branch.getElseBodyBuilder();
    if (failed(members(low, block, lo, mid)))
      return failure();
    return members(high, block, mid, hi);
  }

  /// Member i's body at `b`, its block index less its first block and its
  /// grid its own blocks.
  LogicalResult inlineMember(OpBuilder &b, Value block, size_t i) {
    const std::string &name = m.members[i];
    auto member = kernels.lookupSymbol<gpu::GPUFuncOp>(name);
    if (!member || !member.getBody().hasOneBlock())
      return emitError(loc)
             << "cannot merge kernel '" << name << "' into '" << m.name << "'";
    Value local = b.create<arith::SubIOp>(
        loc, block, b.create<arith::ConstantIndexOp>(loc, firsts[i]));
    Value grid = b.create<arith::ConstantIndexOp>(loc, m.blocks[i]);
    IRMapping map;
    map.map(member.getArgument(0), fn.getArgument(0));
    // A block runs one member, so the members share workgroup buffers: the
    // n-th of a type that a member has is the launch's n-th of it.
    llvm::DenseMap<Type, size_t> used;
    for (BlockArgument shared : member.getWorkgroupAttributions()) {
      auto type = llvm::cast<MemRefType>(shared.getType());
      SmallVector<BlockArgument> &pool = workgroup[type];
      size_t n = used[type]++;
      if (n == pool.size())
        pool.push_back(fn.addWorkgroupAttribution(type, shared.getLoc()));
      map.map(shared, pool[n]);
    }
    // All cloned before any is rewritten: `map` refers to the clones.
    SmallVector<Operation *> clones;
    for (Operation &op : member.getBody().front().without_terminator())
      clones.push_back(b.clone(op, map));
    for (Operation *clone : clones)
      clone->walk([&](Operation *op) {
        if (auto id = llvm::dyn_cast<gpu::BlockIdOp>(op);
            id && id.getDimension() == gpu::Dimension::x) {
          id.replaceAllUsesWith(local);
          id.erase();
        } else if (auto dim = llvm::dyn_cast<gpu::GridDimOp>(op);
                   dim && dim.getDimension() == gpu::Dimension::x) {
          dim.replaceAllUsesWith(grid);
          dim.erase();
        }
      });
    return success();
  }

  gpu::GPUModuleOp kernels;
  gpu::GPUFuncOp fn;
  const MergedKernel &m;
  Location loc;
  SmallVector<int64_t> firsts;
  llvm::DenseMap<Type, SmallVector<BlockArgument>> workgroup;
};

} // namespace

LogicalResult mergeKernels(gpu::GPUModuleOp kernels,
                           ArrayRef<MergedKernel> merged) {
  MLIRContext *ctx = kernels.getContext();
  for (const MergedKernel &m : merged) {
    Location loc = kernels.getLoc();
    OpBuilder b(kernels.getBody()->getTerminator());
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto fn =
        b.create<gpu::GPUFuncOp>(loc, m.name, b.getFunctionType({ptr}, {}));
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    b.setInsertionPointToStart(&fn.getBody().front());
    if (failed(Merger(kernels, fn, m).build(b)))
      return failure();
    b.setInsertionPointToEnd(&fn.getBody().front());
    b.create<gpu::ReturnOp>(loc);
  }
  return success();
}

} // namespace dt
