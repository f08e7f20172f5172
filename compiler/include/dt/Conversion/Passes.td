//===- Passes.td - dt lowering passes ----------------------*- tablegen -*-===//
//
// From planned dt entry points to LLVM: dt ops become loops (via linalg) and kernel
// calls over the arena, then upstream conversions take everything to the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#ifndef DT_CONVERSION_PASSES_TD
#define DT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertDTToKernels : Pass<"convert-dt-to-kernels", "mlir::ModuleOp"> {
  let summary = "Lowers planned dt entry points to loops and kernel calls over the arena";
  let description = [{
    Needs dt-plan-memory's offsets. Each entry point `@name` becomes
    `func.func @dt_name(%arena: memref<Nxi8>)` and every tensor becomes a `memref.view`
    of the arena at its planned offset, so no tensor SSA value survives:

    - `dt.fused` becomes one loop nest whose innermost loop works on vectors of one
      512-bit register (with a scalar remainder), its body built from the ops' scalar
      bodies; 0-d operands are loaded once, broadcast operands are indexed NumPy-style,
      and when nothing broadcasts the nest is one flat loop;
    - sums over all, the leading or the trailing axes accumulate in vectors; other
      reductions, transposes, splits, concatenations, iota and fills become linalg ops;
    - matmul and the neural-network ops become calls to the kernels of
      kernels/include/dtk/kernels.h with pointers into the arena;
    - `dt.schedule` becomes scalar arithmetic; loads and stores become nothing (when the
      plan put the value in the global's buffer) or copies.

    The dt.global ops are removed: their layout has been recorded in the manifest.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"];
}

def ConvertFusedToGPU : Pass<"convert-dt-fused-to-gpu", "mlir::ModuleOp"> {
  let summary = "Generates a GPU kernel for every planned elementwise or data-movement op";
  let description = [{
    Needs dt-plan-memory's offsets. Adds `gpu.module @dt_kernels` with one
    `gpu.func @<entry>_k<n>(%arena: !llvm.ptr) kernel` per generated-kernel op of each
    entry point, in order (dt/Conversion/GPUKernels.h: `dt.fused` regions, transposes,
    splits, concats, slices, pads, `dt.reduce_sum`, iota, splat constants, the
    schedule). Fused regions are built from the same scalar bodies
    (ScalarizableOpInterface) as the CPU loops. The plan is static, so a kernel takes
    only the arena's base: every operand and result is a constant offset from it.
    Threads walk the elements in a grid-stride loop (any launch size computes
    everything, once); broadcast operands are indexed NumPy-style; a reduction gives
    each output element to one thread, which sums its inputs in order. `dtc --emit=ptx`
    takes the module through NVVM to PTX for sm_90; the GPU plan
    (dt/Target/CudaPlan.h) launches the kernels. In a kernel of at least
    kGpuUnrollFrom elements (or terms a block), a thread takes `unroll` at a time,
    their loads first (GPUKernels.h).
  }];
  let options = [
    Option<"unroll", "unroll", "int64_t", /*default=*/"dt::kGpuUnroll",
           "Elements (or terms) a thread loads before it stores (or adds) any; "
           "1 for one at a time">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"];
}

def VerifyArena : Pass<"dt-verify-arena", "mlir::ModuleOp"> {
  let summary = "Checks that every access to the arena lies inside its planned buffer";
  let description = [{
    Runs on the output of convert-dt-to-kernels, where it checks every view and kernel
    pointer against the buffer it is tagged with (`dt.buffer`, one of the function's
    `dt.plan`), every kernel call's footprint (from its size arguments) and every
    loop-indexed load and store (over the loops' constant bounds); and again after
    dt-lower-to-llvm, where it checks every constant offset from the arena. An access
    outside its buffer or the arena, or one it cannot bound, is an internal error at the
    op. dtc runs it on every compilation.
  }];
}

def CheckArena : Pass<"dt-check-arena", "mlir::ModuleOp"> {
  let summary = "Adds run-time checks of every arena access against the plan (dtc --checked)";
  let description = [{
    On the output of convert-dt-to-kernels (after dt-verify-arena): each view of the
    arena is checked once per entry call (`dtrt_check_view`), and each kernel call's
    pointers with their footprints right before the call (`dtrt_check_span(site, base,
    ptr, bytes, buffer offset, buffer bytes)`); kernel calls are bracketed by
    `dtrt_guard_begin` and `dtrt_guard_end`, with which the checked runtime poisons the
    bytes around the call's spans under AddressSanitizer.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect"];
}

def ApproximateMath : Pass<"dt-approximate-math"> {
  let summary = "Replaces f32 tanh, exp, log, ... by polynomial approximations";
  let description = [{
    MLIR's polynomial approximations keep transcendental functions inside fused loops
    as plain arithmetic that LLVM can vectorise, instead of one libm call per element.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // DT_CONVERSION_PASSES_TD
