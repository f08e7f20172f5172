//===- DTDialect.td - the dt dialect -----------------------*- tablegen -*-===//
//
// The dt dialect: a training job's computation on static-shaped tensors. MLIRGen emits
// the forward computation and the loss; autodiff and the optimizer pass turn it into
// entry points (grad_step, apply_step, eval_step); fusion, memory planning and lowering
// take it to LLVM. Persistent state (parameters, gradients, optimizer state, input
// batches, outputs) lives in `dt.global`s that entry points `dt.load` and `dt.store`.
//
//===----------------------------------------------------------------------===//

#ifndef DT_DIALECT_TD
#define DT_DIALECT_TD

include "mlir/IR/OpBase.td"

def DT_Dialect : Dialect {
  let name = "dt";
  let cppNamespace = "::dt";
  let summary = "Declarative training: tensor computations, state and train steps";
  let description = [{
    Values are builtin ranked tensors with static shapes (the batch, the sequence length
    and the mesh are compile-time constants in a dt program). Operands of elementwise ops
    have equal types: NumPy broadcasting is made explicit with `dt.broadcast_to` by MLIRGen.
    Every differentiable op supplies its vector-Jacobian product through
    `DifferentiableOpInterface`; every elementwise op supplies its scalar body through
    `ScalarizableOpInterface` so that fused regions can be code-generated as one loop.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // Sharded programs name `mesh.mesh @mesh` and hold mesh collectives.
  let dependentDialects = ["::mlir::mesh::MeshDialect"];
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class DT_Op<string mnemonic, list<Trait> traits = []>
    : Op<DT_Dialect, mnemonic, traits>;

#endif // DT_DIALECT_TD
