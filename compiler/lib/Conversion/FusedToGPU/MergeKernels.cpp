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
    Value block = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
    llvm::DenseMap<Type, SmallVector<BlockArgument>> workgroup;
    int64_t first = 0;
    for (auto [name, count] : llvm::zip_equal(m.members, m.blocks)) {
      auto member = kernels.lookupSymbol<gpu::GPUFuncOp>(name);
      if (!member || !member.getBody().hasOneBlock())
        return emitError(loc) << "cannot merge kernel '" << name << "' into '"
                              << m.name << "'";
      auto index = [&](int64_t v) {
        return b.create<arith::ConstantIndexOp>(loc, v).getResult();
      };
      Value from = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge,
                                           block, index(first));
      Value to = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, block,
                                         index(first + count));
      auto branch = b.create<scf::IfOp>(
          loc, b.create<arith::AndIOp>(loc, from, to).getResult(),
          /*withElseRegion=*/false);
      OpBuilder inner = branch.getThenBodyBuilder();
      // The member's own view of the grid.
      Value local = inner.create<arith::SubIOp>(
          loc, block, inner.create<arith::ConstantIndexOp>(loc, first));
      Value grid = inner.create<arith::ConstantIndexOp>(loc, count);
      IRMapping map;
      map.map(member.getArgument(0), fn.getArgument(0));
      // A block runs one member, so the members share workgroup buffers:
      // the n-th of a type that a member has is the launch's n-th of it.
      llvm::DenseMap<Type, size_t> used;
      for (BlockArgument shared : member.getWorkgroupAttributions()) {
        auto type = llvm::cast<MemRefType>(shared.getType());
        SmallVector<BlockArgument> &pool = workgroup[type];
        size_t n = used[type]++;
        if (n == pool.size())
          pool.push_back(fn.addWorkgroupAttribution(type, shared.getLoc()));
        map.map(shared, pool[n]);
      }
      for (Operation &op : member.getBody().front().without_terminator())
        inner.clone(op, map);
      branch.getThenRegion().walk([&](Operation *op) {
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
      first += count;
    }
    b.setInsertionPointToEnd(&fn.getBody().front());
    b.create<gpu::ReturnOp>(loc);
  }
  return success();
}

} // namespace dt
