//===- Passes.td - dt transformation passes ----------------*- tablegen -*-===//
//
// The passes between MLIRGen and lowering, in pipeline order. Each has a lit test of
// the same name in test/Transforms/.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_PASSES_TD
#define DT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PipelineStages : Pass<"dt-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Gives every op of @loss the pipeline stage that runs it";
  let description = [{
    With the module attribute `dt.pipeline`, tags each op of `@loss` and
    `@eval_step` with `dt.stage`, the virtual stage that computes it. An op inside a stage's
    layers (its location names the layer) belongs to that stage; an op that
    reads a staged value belongs to the latest stage among its operands (the
    final norm and the loss go to the last stage); an op inside a stage's
    layers that reads a value of a later stage is an error. The remaining ops
    (loads, constants, the embedding before the first stage) go to the earliest
    stage that uses them, and are copied for each further stage that does, so
    that no stage reads another's parameter loads and each stage's gradient of
    a tied parameter is its own. A parameter whose loads are all on one
    pipeline rank gets `dt.pp_rank`: only that rank holds it. Without the
    attribute the pass does nothing.
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

def PipelineSplit : Pass<"dt-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Splits @grad_step into each stage's forward and backward";
  let description = [{
    With the module attribute `dt.pipeline`, replaces `@grad_step` (whose ops
    carry `dt.stage`, and `dt.backward` for backward's) by the entry points
    `@pipe_fwd_S` and `@pipe_bwd_S` of every virtual stage S, each the ops of
    its stage and direction in their order. Values that cross between them go
    through `pipe` globals the runtime moves: an activation a later stage reads
    leaves its stage's forward in `pipe/sS/send/I` and arrives in the next
    stage's `pipe/sS+1/recv/I` (relayed stage by stage when it goes further); a
    gradient goes back the same way (`gsend`, `grecv`); a value a stage's
    backward reads from forward is kept in `pipe/sS/stash/I`, which the runtime
    saves per micro-batch in flight. Loads of parameters and state and the
    constants made from them are repeated where needed, loads of the batch in
    any forward. Each function lists its buffers (`dt.pipe_send`,
    `dt.pipe_recv`, `dt.pipe_stash`), and carries `dt.entry`, `dt.ranks` and
    `dt.stage` for dt-verify-collectives and the manifest. `@eval_step` is
    split alike into `@pipe_eval_S` (forward only, through `pipe/sS/esend/I`
    and `pipe/sS/erecv/I`).
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

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

def Autocast : Pass<"dt-autocast", "mlir::ModuleOp"> {
  let summary = "Computes @loss and @eval_step in the job's 16-bit precision";
  let description = [{
    With the module attribute `dt.precision = "bf16"` (or `"f16"`), every f32 parameter
    and float input is converted to that type where it is loaded, and every op computes
    in the type of its operands, so activations are 16-bit. The loss functions
    (`dt.cross_entropy`, `dt.mse`) give an f32 loss. An op with an f32 operand that does
    not come from constants alone computes in f32 (the loss's own arithmetic); values
    made only from constants (`x * 0.5`) take the other operand's type, as Python
    scalars do in PyTorch. Stores and the returned loss are converted back to their f32
    globals. Parameters stay f32 master copies: their gradients come back through the
    conversion's VJP as f32, and the optimizer never sees 16-bit values. Without the
    attribute the pass does nothing.
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

def WidenCompute : Pass<"dt-widen-compute", "mlir::ModuleOp"> {
  let summary = "16-bit floats are storage: every op computes in f32 between conversions";
  let description = [{
    Rewrites each op that computes on bf16 or f16 tensors into the same op on f32,
    its 16-bit operands converted up just before it and its results converted down
    just after it, so values keep their 16-bit storage (and memory) while arithmetic,
    kernels and accumulations run in f32, as PyTorch's CPU kernels do for bf16. Ops
    that only move data (reshape, transpose, broadcast_to, split, concat) and loads,
    stores and constants stay 16-bit. A 16-bit operand converted from a value made of
    constants alone is replaced by that f32 value, so constants are not rounded.
    Runs after CSE, which would otherwise merge backward's conversions with
    forward's and keep the f32 copies alive in between.
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

def ShardGlobals : Pass<"dt-shard-globals", "mlir::ModuleOp"> {
  let summary = "Gives every global its layout over the mesh from dt.parallel";
  let description = [{
    Reads the module's `dt.parallel` (`{data = [...], zero = N, tensor = "tp"}`)
    and sets `sharding` on every `dt.global` that lacks one:

    - parameters: their `dt.tensor_dim` split over the tensor axis (Megatron's
      `@column`/`@row`/`@vocab`); with ZeRO-3 also dimension 0 over the data
      axes;
    - gradients: their parameter's layout; a partial sum over the data axes
      (ZeRO-0/1: every rank accumulates its own summand until the optimizer
      needs the sum), or dimension 0 split over them (ZeRO-2/3);
    - optimizer state: its parameter's layout, with ZeRO >= 1 dimension 0
      split over the data axes;
    - batch inputs (`dt.batch`): the sample dimension split over the data axes;
    - everything else (the step counter, scalars in and out): replicated.

    Shards of uneven size are padded (`#dt.shard` says how), never an error.
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

def ShardPropagation : Pass<"dt-shard-propagation", "mlir::ModuleOp"> {
  let summary = "Chooses a layout for every value of every entry point";
  let description = [{
    GSPMD-style propagation over each straight-line entry point:

    1. Seeds: a `dt.load` yields its global's layout; in entry points that
       read a batch, the data axes belong to the batch, so a parameter
       sharded over them (ZeRO-3) is gathered where it is used. A
       `dt.store` asks for its global's layout.
    2. Backward: every value stored into a global prefers that layout, and
       passes the preference on to its operands through each op's sharding
       rule.
    3. Forward: each op picks mesh axes for its factors
       (`ShardableOpInterface`) among those its operands and its results'
       preferences offer, at the lowest cost of resharding (bytes each rank
       sends, plus a latency term per collective; an unsplit value is split
       for free). Partial sums pass through linear ops until something needs
       the sum.

    Results: `dt.sharding` on every op that makes tensors (one `#dt.shard`
    per result) and `dt.operand_shardings` on ops that need an operand in
    another layout than it has (where dt-spmd-partition inserts collectives).
  }];
  let dependentDialects = ["::dt::DTDialect"];
}

def SpmdPartition : Pass<"dt-spmd-partition", "mlir::ModuleOp"> {
  let summary = "Rewrites the global program into the program of one rank";
  let description = [{
    Every global and value takes its local shape; every op is cloned on local
    shapes; wherever a value's layout differs from the one its user needs,
    the collectives that convert it are inserted: `mesh.all_reduce` (partial
    sums), `mesh.reduce_scatter`, `mesh.all_gather` and `mesh.all_slice`
    (taking this rank's piece, no communication), along the leading axis (other
    axes are transposed there and back), with `dt.pad`/`dt.slice` around
    uneven shards. A cross-entropy over split positions divides by the number
    of labels over all ranks, so its value is exact for padded batches too.
    Each collective carries `dt.what`, the value it moves, for run-time
    messages. Globals keep their global type as `global_type`.
  }];
  let dependentDialects = ["::dt::DTDialect", "::mlir::mesh::MeshDialect"];
}

def BucketCollectives : Pass<"dt-bucket-collectives", "mlir::ModuleOp"> {
  let summary = "Fuses small collectives into buckets";
  let description = [{
    On the program of one rank: collectives of one kind over the same axes and
    element type whose operands are small (at most 256 KiB, and `bucket-bytes`;
    a larger one travels alone, as copying it into a bucket would cost more
    than the latency it shares) are issued together,
    as one collective on a concatenated buffer, at the point where the last of
    them has its operand ready (so a bucket of gradients goes out as soon as
    its last gradient is computed), provided none of their results is needed
    before. All-reduces concatenate flat operands; reduce-scatters and
    all-gathers concatenate every rank's block of each member so that each
    rank's part of the bucket stays one block. Thousands of small sums (biases,
    norms) become a few large ones: MPI's latency, not bandwidth, bounds them.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"4194304",
           "collectives of operands up to this size join buckets of at most "
           "this size (0: no buckets)">
  ];
  let dependentDialects = ["::dt::DTDialect", "::mlir::mesh::MeshDialect"];
}

def OverlapCollectives : Pass<"dt-overlap-collectives", "mlir::ModuleOp"> {
  let summary = "Runs collectives beside the ops before their results' first use";
  let description = [{
    On the program of one rank, after dt-bucket-collectives: a collective whose
    result is first used some ops later (a bucket of gradients issued in the
    middle of backward) is marked `dt.async`, and a `dt.wait` before that first
    use takes its result and keeps its operands alive. The runtime starts it at
    its place and runs it on a communication thread, in issue order, while the
    rank computes. Worth it where communication has cores or hardware of its
    own (`dtc --overlap`; bench/overlap.cpp measures a machine).
  }];
  let dependentDialects = ["::dt::DTDialect", "::mlir::mesh::MeshDialect"];
}

def VerifyCollectives : Pass<"dt-verify-collectives", "mlir::ModuleOp"> {
  let summary = "Proves that every rank issues matching collectives in the same order";
  let description = [{
    A job hangs when one rank waits in a collective that another never issues
    or issues with other shapes. For every entry point, this pass derives the
    collectives each rank issues, in order, from the function that rank runs
    (an entry point may have variants for groups of ranks, `dt.ranks`, as
    pipeline stages will), and checks that the members of every group issue the
    same sequence over that group: the same kinds, axes, element types and
    shapes. Collectives must also sit in the entry point's own straight-line
    body, where every rank reaches them. A mismatch is an error naming the
    ranks, the group and the position.
  }];
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

def FuseEpilogues : Pass<"dt-fuse-epilogues", "mlir::func::FuncOp"> {
  let summary = "Folds a bias that every use of a product adds into the product";
  let description = [{
    After dt-fuse-elementwise: a `dt.matmul` whose every use is a `dt.fused` region
    that adds the same bias vector (broadcast over the rows) to it before anything else
    becomes a `dt.matmul_bias`, and the regions read the biased product instead. A
    region left with nothing to compute (`y = x + b` alone) disappears. The library
    starts the product's output from the bias, so the addition costs no pass over
    memory of its own.
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

    With `gpu-zero-copies`, for a program that also runs on a GPU, buffers live
    as long as a GPU's zero copies need (dt/Transforms/ZeroCopyInfo.h): the 16-bit
    source of a widening that a product, the loss, a norm or bf16 attention could
    read directly lives until that reader, and what such an op reads lives until the
    narrowings it could write into are placed. The CPU's program is the same, in
    a slightly larger arena.
  }];
  let options = [
    Option<"gpuZeroCopies", "gpu-zero-copies", "bool", /*default=*/"false",
           "Keep buffers alive as long as a GPU plan's zero copies need">,
  ];
  let dependentDialects = ["::dt::DTDialect"];
}

def NumberSpans : Pass<"dt-number-spans", "mlir::ModuleOp"> {
  let summary = "Numbers the ops that become a span of the run's traces";
  let description = [{
    Runs on a planned module. Every op of an entry point that code generation turns
    into work (a kernel call, a loop nest, a copy, a collective or the wait for one)
    gets `dt.span = N`, numbered from 0 in module order. Views (`dt.reshape`) and the
    loads and stores that the plan made aliases emit no code and get none. The number
    is the op's identity in the program: the manifest's `spans` table (what the op is,
    its layer, FLOPs and bytes), the runtime's trace events and its per-op timings all
    name it, and since every rank runs the same program it is the same on every rank.
  }];
}

def TestCost : Pass<"dt-test-cost", "mlir::func::FuncOp"> {
  let summary = "Remarks each op's and the function's FLOPs and bytes (tests of the cost model)";
  let description = [{
    Emits `flops N, bytes M` as a remark on every op that computes or moves data, and
    the function's totals on the function (dt/Analysis/Cost.h), so lit tests pin the
    counts that `dtc --report`, traces and MFU use.
  }];
}

#endif // DT_TRANSFORMS_PASSES_TD
