//===- Passes.td - dt transformation passes ----------------------*- tablegen -*-===//
//
// The passes between MLIRGen and lowering, in pipeline order. Each has a lit test of
// the same name in test/Transforms/.
//
//===----------------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_PASSES_TD
#define DT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"dt-autodiff", "mlir::ModuleOp"> {
  let summary = "Differentiates the loss into the grad_step entry point";
  let description = [{
    Replaces `func.func @loss() -> tensor<f32>` by `func.func @grad_step()`, which
    evaluates the loss, stores it into the output global `out/loss`, and stores the
    gradient of every parameter `P` (a `dt.global param`) into a new global `grad/P`.

    Reverse mode over the straight-line body: only ops that depend on a parameter and
    feed the loss are differentiated, and each op builds only the operand adjoints that
    lead to a parameter (no gradient is ever built for input data). With the module
    attribute `dt.accumulation = N > 1`, gradients are added to the values already in
    `grad/P` instead of overwriting them.
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

def Optimizer : Pass<"dt-optimizer", "mlir::ModuleOp"> {
  let summary = "Builds the apply_step entry point: clipping, LR schedule, optimizer update";
  let description = [{
    From the module attributes `dt.optimizer` (`{kind = "sgd" | "adam" | "adamw", lr, ...}`),
    `dt.schedule` (optional, `{kind, warmup, min, final, every, gamma}`), `dt.clip`
    (optional global-norm bound) and `dt.accumulation`, builds `func.func @apply_step()`:
    it advances the `step` state, computes the learning rate (`out/lr`), the global
    gradient norm (`out/grad_norm`), clips, and updates every parameter and its optimizer
    state (`adamw.m/P`, `adamw.v/P`, `sgd.momentum/P`, ...) with elementwise dt ops that
    fusion turns into one pass over memory per parameter. The formulas are PyTorch's;
    weight decay applies to parameters of rank >= 2 (weights and embeddings), not to
    biases and norm gains.
  }];
  let dependentDialects = ["::dt::DTDialect", "::mlir::func::FuncDialect"];
}

def FuseElementwise : Pass<"dt-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Groups elementwise ops into dt.fused regions";
  let description = [{
    Greedy producer-consumer fusion over a straight-line body: an elementwise op joins
    the groups of its elementwise producers of the same shape when every value those
    groups make that is used elsewhere is used after it (so the fused op can sit where
    the op was). `dt.broadcast_to` feeding a group is absorbed as a broadcast operand and
    splat constants are cloned into the body. Every remaining elementwise op and
    broadcast becomes a dt.fused of its own, so lowering has one elementwise form.
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

def PlanMemory : Pass<"dt-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assigns every global and every tensor value a static arena offset";
  let description = [{
    Globals are laid out first (the persistent region). Then each entry point's values
    get offsets in the transient region that follows, by liveness over its straight-line
    body (first fit, 64-byte alignment); entry points share the transient region, which
    is as large as the largest of them needs. `dt.load` results and `dt.reshape` results
    alias their source; a value stored into a global is computed directly into that
    global's buffer when no read of the old value can follow (an elementwise update may
    read and write the same element), otherwise the store copies. Results:
    `offset` on every dt.global, `dt.offsets` (one per result) on every op that makes
    tensors, `dt.arena_bytes` and `dt.persistent_bytes` on the module.
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

#endif // DT_TRANSFORMS_PASSES_TD
