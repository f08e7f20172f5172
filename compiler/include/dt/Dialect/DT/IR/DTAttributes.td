//===- DTAttributes.td - dt dialect attributes -------------*- tablegen -*-===//
//
// `#dt.shard`: how a tensor is laid out over the device mesh. It names mesh
// axes (the `dt.axes` of `mesh.mesh @mesh`) so that lit tests and `--emit`
// output read like the program's `parallel` block.
//
//===----------------------------------------------------------------------===//

#ifndef DT_ATTRIBUTES_TD
#define DT_ATTRIBUTES_TD

include "dt/Dialect/DT/IR/DTDialect.td"
include "mlir/IR/AttrTypeBase.td"

def DT_ShardingAttr : AttrDef<DT_Dialect, "Sharding"> {
  let mnemonic = "shard";
  let summary = "the layout of a tensor over the device mesh";
  let description = [{
    One entry per tensor dimension: `_` (whole on every rank), an axis (`dp`), or
    several axes, outermost first (`(dp, tp)`), each splitting what the previous
    one left. `3 x tp` views the dimension as 3 equal blocks and splits each block
    over `tp` (Megatron's per-head layout of a fused q/k/v projection). A
    dimension that an axis does not divide is padded: every rank holds
    `ceil(n / k)` entries, the last ones zero. `partial = (dp)` marks a value
    every rank holds a summand of (a data-parallel gradient before its
    all-reduce).

    ```mlir
    #dt.shard<[dp, _]>                      // rows split over dp
    #dt.shard<[_, _], partial = (dp)>       // a partial sum over dp
    #dt.shard<[3 x tp, _]>                  // q, k and v rows split per head
    #dt.shard<[]>                           // a replicated scalar
    ```
  }];
  // dims: one ArrayAttr of axis names (StringAttr) per dimension; blocks: one
  // entry per dimension (1: not blocked); partial: axis names.
  let parameters = (ins "::mlir::ArrayAttr":$dims,
                        "::mlir::DenseI64ArrayAttr":$blocks,
                        "::mlir::ArrayAttr":$partial);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // DT_ATTRIBUTES_TD
