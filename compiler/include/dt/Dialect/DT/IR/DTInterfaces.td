//===- DTInterfaces.td - dt op interfaces ------------------*- tablegen -*-===//
//
// The interfaces through which passes ask ops about themselves instead of
// switching over op kinds: autodiff asks for a vector-Jacobian product, fusion
// lowering for the scalar computation of an elementwise op, and the sharding
// passes for how the op's dimensions may be split.
//
//===----------------------------------------------------------------------===//

#ifndef DT_INTERFACES_TD
#define DT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def DT_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::dt";
  let description = [{
    An op that can be differentiated in reverse mode. Given the adjoints of its results
    (a null Value for a result whose adjoint is zero), the op builds the adjoints of the
    operands that `needed` asks for, at the builder's insertion point, and appends one
    Value per operand to `operandGrads` (null where not needed or where the operand is
    not differentiable, e.g. integer labels). Ops whose derivative is not available
    (second-order derivative ops) emit an error and fail.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the vector-Jacobian product of this op.",
      "::mlir::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def DT_ScalarizableOpInterface : OpInterface<"ScalarizableOpInterface"> {
  let cppNamespace = "::dt";
  let description = [{
    An elementwise op that can compute elements from the elements of its operands.
    Fusion lowering builds the body of a single loop nest from these bodies, once for
    `lanes` elements at a time (the vectorised loop) and once for one element (the
    remainder).
  }];
  let methods = [
    InterfaceMethod<
      "Builds the computation of `lanes` elements; operands are scalars of the "
      "operands' element types when `lanes` is 1, and vectors of `lanes` of them "
      "otherwise. Returns the result, of the same form.",
      "::mlir::Value", "buildScalar",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::ValueRange":$operands, "unsigned":$lanes)>
  ];
}

def DT_ShardableOpInterface : OpInterface<"ShardableOpInterface"> {
  let cppNamespace = "::dt";
  let description = [{
    An op that computes on tensors and can run split over the device mesh:
    it describes its dimensions in factors (dt/Dialect/DT/IR/ShardingRule.h),
    from which sharding propagation chooses layouts and the partitioner
    clones it on local shapes. Every op a train step can hold implements it,
    except the state ops (dt.load, dt.store), which the sharding passes treat
    themselves.
  }];
  let methods = [
    InterfaceMethod<
      "The op's dimensions as factors, for its current operand and result "
      "types.",
      "::dt::ShardingRule", "getShardingRule", (ins)>
  ];
}

#endif // DT_INTERFACES_TD
