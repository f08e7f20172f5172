//===- DTOps.td - dt dialect operations --------------------*- tablegen -*-===//
//
// The operations of the dt dialect: state (globals, loads, stores), constants,
// elementwise math, shape manipulation, linear algebra, the neural-network ops with
// hand-written kernels, their gradient ops, the LR schedule, and fused regions.
//
//===----------------------------------------------------------------------===//

#ifndef DT_OPS_TD
#define DT_OPS_TD

include "dt/Dialect/DT/IR/DTAttributes.td"
include "dt/Dialect/DT/IR/DTDialect.td"
include "dt/Dialect/DT/IR/DTInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Types and attributes
//===----------------------------------------------------------------------===//

def DT_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def DT_IntTensor : StaticShapeTensorOf<[I32, I64]>;
def DT_Tensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def DT_FloatScalar : 0DTensorOf<[F16, BF16, F32, F64]>;
def DT_IntScalar : 0DTensorOf<[I32, I64]>;
/// An i64 scalar (a counter, an offset), which the assembly format need not
/// spell out.
def DT_I64Scalar : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

def DT_RoleParam : I32EnumAttrCase<"param", 0>;
def DT_RoleGrad : I32EnumAttrCase<"grad", 1>;
def DT_RoleState : I32EnumAttrCase<"state", 2>;
def DT_RoleInput : I32EnumAttrCase<"input", 3>;
def DT_RoleOutput : I32EnumAttrCase<"output", 4>;
// An activation or gradient passed between pipeline stages, or one a stage's
// forward keeps for its backward: moved by the runtime, never checkpointed.
def DT_RolePipe : I32EnumAttrCase<"pipe", 5>;
def DT_RoleAttr : I32EnumAttr<"Role", "what a global holds and who writes it",
    [DT_RoleParam, DT_RoleGrad, DT_RoleState, DT_RoleInput, DT_RoleOutput,
     DT_RolePipe]> {
  let cppNamespace = "::dt";
}

def DifferentiableOp : DeclareOpInterfaceMethods<DT_DifferentiableOpInterface>;
def ScalarizableOp : DeclareOpInterfaceMethods<DT_ScalarizableOpInterface>;
def ShardableOp : DeclareOpInterfaceMethods<DT_ShardableOpInterface>;

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

def DT_GlobalOp : DT_Op<"global", [Symbol]> {
  let summary = "a persistent tensor of the program";
  let description = [{
    A tensor that outlives entry-point calls: a parameter, its gradient, optimizer state,
    an input batch staged by the runtime, or an output the runtime reads. Parameters carry
    their initialiser (`{kind = "uniform", low, high}`, `{kind = "normal", mean, std}` or
    `{kind = "constant", value}`); memory planning assigns every global its byte `offset`
    in the arena.

    In a program for a mesh of ranks, `sharding` is the global's layout
    over the mesh (dt-shard-globals); once dt-spmd-partition made the program
    of one rank, `type` is the rank's shard and `global_type` the whole
    tensor's type.

    ```mlir
    dt.global param @"fc1.weight" : tensor<256x784xf32>
        {init = {kind = "uniform", low = -0.0357 : f64, high = 0.0357 : f64}}
    dt.global input @"in/train.x" : tensor<128x784xf32>
    dt.global state @"adamw.m/fc2.weight" : tensor<3x512xf32>
        {global_type = tensor<10x512xf32>, sharding = #dt.shard<[dp, _]>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<DT_Tensor>:$type,
                       DT_RoleAttr:$role,
                       OptionalAttr<DictionaryAttr>:$init,
                       OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<DT_ShardingAttr>:$sharding,
                       OptionalAttr<TypeAttrOf<DT_Tensor>>:$global_type);
  let assemblyFormat = "$role $sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The whole tensor's type: `global_type` in a partitioned program, else
    /// `type`.
    ::mlir::RankedTensorType getGlobalTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(
          getGlobalType() ? *getGlobalType() : getType());
    }
  }];
}

def DT_LoadOp : DT_Op<"load", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                               MemoryEffects<[MemRead]>]> {
  let summary = "reads the current value of a global";
  let description = [{
    ```mlir
    %w = dt.load @"fc1.weight" : tensor<256x784xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$global);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$global attr-dict `:` type($result)";
}

def DT_StoreOp : DT_Op<"store", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                                 MemoryEffects<[MemWrite]>]> {
  let summary = "replaces the value of a global";
  let description = [{
    ```mlir
    dt.store %new, @"fc1.weight" : tensor<256x784xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$value, FlatSymbolRefAttr:$global);
  let assemblyFormat = "$value `,` $global attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def DT_ConstantOp : DT_Op<"constant", [ConstantLike, Pure, ScalarizableOp, ShardableOp,
                                       AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %half = dt.constant dense<5.000000e-01> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def DT_IotaOp : DT_Op<"iota", [ShardableOp, Pure]> {
  let summary = "0, 1, ..., n-1";
  let description = [{
    ```mlir
    %pos = dt.iota : tensor<128xi32>
    ```
  }];
  let results = (outs 1DTensorOf<[I32, I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class DT_UnaryOp<string mnemonic, list<Trait> traits = []>
    : DT_Op<mnemonic, !listconcat([Pure, Elementwise, SameOperandsAndResultType,
                                   ScalarizableOp, ShardableOp], traits)> {
  let arguments = (ins DT_Tensor:$input);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class DT_FloatUnaryOp<string mnemonic, string formula>
    : DT_UnaryOp<mnemonic, [DifferentiableOp]> {
  let summary = "elementwise " # formula;
  let description = [{
    ```mlir
    %y = dt.}] # mnemonic # [{ %x : tensor<128x256xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input);
  let results = (outs DT_FloatTensor:$result);
}

def DT_NegOp : DT_UnaryOp<"neg", [DifferentiableOp]> {
  let summary = "elementwise -x";
}
def DT_ReluOp : DT_FloatUnaryOp<"relu", "max(x, 0)">;
def DT_GeluOp : DT_FloatUnaryOp<"gelu",
    "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's tanh approximation">;
def DT_GeluErfOp : DT_FloatUnaryOp<"gelu_erf",
    "0.5 x (1 + erf(x / sqrt(2))), the exact GELU (BERT's, PyTorch's default)">;
def DT_TanhOp : DT_FloatUnaryOp<"tanh", "tanh(x)">;
def DT_SigmoidOp : DT_FloatUnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def DT_ExpOp : DT_FloatUnaryOp<"exp", "exp(x)">;
def DT_LogOp : DT_FloatUnaryOp<"log", "log(x)">;
def DT_SqrtOp : DT_FloatUnaryOp<"sqrt", "sqrt(x)">;

// Derivative helpers: they appear in backward graphs and have no derivative themselves.
def DT_StepOp : DT_UnaryOp<"step"> {
  let summary = "elementwise Heaviside step: 1 where x > 0, else 0";
  let description = [{ The derivative of `relu`, and the selector of `maximum`/`minimum`. }];
  let arguments = (ins DT_FloatTensor:$input);
  let results = (outs DT_FloatTensor:$result);
}
def DT_GeluDerivOp : DT_UnaryOp<"gelu_deriv"> {
  let summary = "elementwise derivative of dt.gelu";
  let arguments = (ins DT_FloatTensor:$input);
  let results = (outs DT_FloatTensor:$result);
}
def DT_GeluErfDerivOp : DT_UnaryOp<"gelu_erf_deriv"> {
  let summary = "elementwise derivative of dt.gelu_erf: Phi(x) + x phi(x)";
  let arguments = (ins DT_FloatTensor:$input);
  let results = (outs DT_FloatTensor:$result);
}

def DT_ConvertOp : DT_Op<"convert", [Pure, Elementwise, SameOperandsAndResultShape,
                                     ScalarizableOp, DifferentiableOp,
                                     ShardableOp]> {
  let summary = "elementwise element-type conversion";
  let description = [{
    Integer to float, float to float (rounding to nearest even), float to integer
    (truncating) and integer to integer.

    ```mlir
    %t = dt.convert %step : tensor<i64> to tensor<f32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

class DT_BinaryOp<string mnemonic, string formula, list<Trait> traits = []>
    : DT_Op<mnemonic, !listconcat([Pure, Elementwise, SameOperandsAndResultType,
                                   ScalarizableOp, DifferentiableOp, ShardableOp],
                                  traits)> {
  let summary = "elementwise " # formula;
  let description = [{
    Operands have equal types; MLIRGen makes NumPy broadcasting explicit.

    ```mlir
    %z = dt.}] # mnemonic # [{ %x, %y : tensor<128x256xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$lhs, DT_Tensor:$rhs);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def DT_AddOp : DT_BinaryOp<"add", "x + y", [Commutative]>;
def DT_SubOp : DT_BinaryOp<"sub", "x - y">;
def DT_MulOp : DT_BinaryOp<"mul", "x * y", [Commutative]>;
def DT_DivOp : DT_BinaryOp<"div", "x / y">;
def DT_PowOp : DT_BinaryOp<"pow", "x ^ y (floats)"> {
  let arguments = (ins DT_FloatTensor:$lhs, DT_FloatTensor:$rhs);
  let results = (outs DT_FloatTensor:$result);
}
def DT_MaximumOp : DT_BinaryOp<"maximum", "max(x, y)", [Commutative]>;
def DT_MinimumOp : DT_BinaryOp<"minimum", "min(x, y)", [Commutative]>;

def DT_SelectOp : DT_Op<"select", [Pure, Elementwise, SameOperandsAndResultType,
                                   ScalarizableOp, ShardableOp]> {
  let summary = "elementwise cond != 0 ? x : y";
  let description = [{
    Where `cond` is non-zero, `x`; elsewhere `y`, whatever `x` holds (an inf or a NaN
    in the branch not taken does not reach the result, which is why an f16
    optimizer step that overflowed can keep the old parameters). The condition has
    the type of the values; it is not differentiated.

    ```mlir
    %p = dt.select %finite, %updated, %old : tensor<256x784xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$cond, DT_Tensor:$x, DT_Tensor:$y);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$cond `,` $x `,` $y attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def DT_BroadcastToOp : DT_Op<"broadcast_to", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "NumPy broadcasting to a larger shape";
  let description = [{
    Dimensions are aligned on the right; an operand dimension equals the result's or is 1,
    and missing leading dimensions are added.

    ```mlir
    %b2 = dt.broadcast_to %b : tensor<256xf32> -> tensor<128x256xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DT_ReshapeOp : DT_Op<"reshape", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "the same elements in row-major order, another shape";
  let description = [{
    ```mlir
    %h = dt.reshape %x : tensor<4x32x128xf32> -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DT_TransposeOp : DT_Op<"transpose", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "a permutation of dimensions";
  let description = [{
    Result dimension i is operand dimension `perm[i]`.

    ```mlir
    %t = dt.transpose %x [0, 2, 1, 3] : tensor<4x128x4x32xf32> -> tensor<4x4x128x32xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input $perm attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def DT_SplitOp : DT_Op<"split", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "consecutive pieces along one axis";
  let description = [{
    ```mlir
    %q, %k, %v = dt.split %qkv axis 2 : tensor<4x128x384xf32>
        -> tensor<4x128x128xf32>, tensor<4x128x128xf32>, tensor<4x128x128xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<DT_Tensor>:$results);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def DT_ConcatOp : DT_Op<"concat", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "tensors joined along one axis";
  let description = [{
    ```mlir
    %c = dt.concat %a, %b axis 1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Variadic<DT_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def DT_SliceOp : DT_Op<"slice", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "a contiguous range of one axis";
  let description = [{
    The entries `[start, start + n)` of `axis`, where `n` is the result's size
    there: the builtin `slice` (BERT's pooler takes the first token), and what
    the partitioner uses to drop the padding of uneven shards after an
    all-gather. Its adjoint puts the gradient back between zeros.

    ```mlir
    %w = dt.slice %g axis 0 start 0 : tensor<12x512xf32> -> tensor<10x512xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input, I64Attr:$axis, I64Attr:$start);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input `axis` $axis `start` $start attr-dict `:` type($input) "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def DT_PadOp : DT_Op<"pad", [ShardableOp, Pure]> {
  let summary = "zeros appended to one axis";
  let description = [{
    The operand followed by zeros along `axis`, up to the result's size. The
    partitioner pads a tensor to a whole number of equal shards before a
    reduce-scatter.

    ```mlir
    %p = dt.pad %g axis 0 : tensor<10x512xf32> -> tensor<12x512xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input, I64Attr:$axis);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and linear algebra
//===----------------------------------------------------------------------===//

def DT_ReduceSumOp : DT_Op<"reduce_sum", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "sum over some axes, which are removed";
  let description = [{
    ```mlir
    %db = dt.reduce_sum %g [0] : tensor<128x256xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input $axes attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def DT_MatmulOp : DT_Op<"matmul", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "matrix product, batched over equal leading dimensions";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_lhs`), `rhs` is `[..., K, N]`
    (`[..., N, K]` with `transpose_rhs`); both have the same leading (batch) dimensions and
    the result is `[..., M, N]`. MLIRGen flattens `x[B, T, C] @ w[C, N]` into one 2-D
    product, so a 2-D right operand never needs broadcasting here.

    ```mlir
    %y = dt.matmul %x, %w {transpose_rhs}
        : tensor<128x784xf32>, tensor<256x784xf32> -> tensor<128x256xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$lhs, DT_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def DT_MatmulBiasOp : DT_Op<"matmul_bias", [Pure]> {
  let summary = "matrix product plus a bias added to every row, in the product's output pass";
  let description = [{
    `dt.matmul` (same operands, transposes and result) with `bias`, a vector of the
    result's last dimension, added to every row. Made only after fusion, by
    `dt-fuse-epilogues`, from a product whose every use adds the same bias first: the
    library starts the output from the bias and accumulates the product into it, so
    the sum never makes a pass of its own over memory.

    ```mlir
    %h = dt.matmul_bias %x, %w, %b {transpose_rhs}
        : tensor<128x784xf32>, tensor<256x784xf32>, tensor<256xf32> -> tensor<128x256xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$lhs, DT_FloatTensor:$rhs, DT_FloatTensor:$bias,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $bias attr-dict `:` type($lhs) `,` type($rhs) "
                       "`,` type($bias) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Neural-network ops (hand-written kernels) and their gradients
//===----------------------------------------------------------------------===//

def DT_SoftmaxOp : DT_Op<"softmax", [Pure, SameOperandsAndResultType, DifferentiableOp,
                                     ShardableOp]> {
  let summary = "softmax along one axis";
  let description = [{
    ```mlir
    %p = dt.softmax %x axis 1 : tensor<128x10xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, I64Attr:$axis);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DT_LayerNormOp : DT_Op<"layer_norm", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) * weight + bias`, with the biased variance, over the last
    dimension of `x`; `weight` and `bias` have that dimension's size.

    ```mlir
    %y = dt.layer_norm %x, %w, %b {eps = 1.0e-05 : f64}
        : tensor<4x128x128xf32>, tensor<128xf32>, tensor<128xf32> -> tensor<4x128x128xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$weight, DT_FloatTensor:$bias,
                       F64Attr:$eps);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` type($input) `,` "
                       "type($weight) `,` type($bias) `->` type($result)";
  let hasVerifier = 1;
}

def DT_LayerNormGradOp : DT_Op<"layer_norm_grad", [ShardableOp, Pure]> {
  let summary = "the gradients of dt.layer_norm";
  let description = [{
    Given the layer-norm input, its weight and the adjoint of its result, the adjoints of
    input, weight and bias (statistics are recomputed, not stored).
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$weight,
                       DT_FloatTensor:$result_grad, F64Attr:$eps);
  let results = (outs DT_FloatTensor:$input_grad, DT_FloatTensor:$weight_grad,
                      DT_FloatTensor:$bias_grad);
  let assemblyFormat = "$input `,` $weight `,` $result_grad attr-dict `:` type($input) `,` "
                       "type($weight) `,` type($result_grad) `->` type(results)";
  let hasVerifier = 1;
}

def DT_RMSNormOp : DT_Op<"rms_norm", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "RMS normalisation over the last dimension (LLaMA's)";
  let description = [{
    `x / sqrt(mean(x^2) + eps) * weight` over the last dimension of `x`; `weight` has
    that dimension's size.

    ```mlir
    %y = dt.rms_norm %x, %w {eps = 1.0e-06 : f64}
        : tensor<4x128x128xf32>, tensor<128xf32> -> tensor<4x128x128xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$weight, F64Attr:$eps);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight) "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def DT_RMSNormGradOp : DT_Op<"rms_norm_grad", [ShardableOp, Pure]> {
  let summary = "the gradients of dt.rms_norm";
  let description = [{
    Given the RMS-norm input, its weight and the adjoint of its result, the adjoints of
    input and weight (the statistics are recomputed, not stored).
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$weight,
                       DT_FloatTensor:$result_grad, F64Attr:$eps);
  let results = (outs DT_FloatTensor:$input_grad, DT_FloatTensor:$weight_grad);
  let assemblyFormat = "$input `,` $weight `,` $result_grad attr-dict `:` type($input) `,` "
                       "type($weight) `,` type($result_grad) `->` type(results)";
  let hasVerifier = 1;
}

def DT_RopeOp : DT_Op<"rope", [Pure, SameOperandsAndResultType, DifferentiableOp,
                               ShardableOp]> {
  let summary = "rotary position embedding (rotate-half, as Hugging Face's LLaMA)";
  let description = [{
    Rotates pairs of the last dimension (D, even) of `x: [..., T, D]` by the position
    `t` along dimension -2: for `i < D/2`, with `f = theta^(-2i/D)`,
    `y[t, i] = x[t, i] cos(t f) - x[t, i + D/2] sin(t f)` and
    `y[t, i + D/2] = x[t, i + D/2] cos(t f) + x[t, i] sin(t f)`.
    With `inverse`, the rotation by `-t f` (its transpose, hence its gradient).

    `scaling = [factor, low_freq_factor, high_freq_factor, original]` slows the
    rotations as Hugging Face's `rope_scaling` does (`f` is then computed in f64
    from the same rule): with `original = 0` every `f` is divided by `factor`
    ("linear"); otherwise LLaMA 3's rule, with wavelength `w = 2π/f`: `f / factor`
    where `w > original / low_freq_factor`, `f` where `w < original /
    high_freq_factor`, and between them `(1 - s) f / factor + s f` with
    `s = (original / w - low_freq_factor) / (high_freq_factor - low_freq_factor)`.

    ```mlir
    %q2 = dt.rope %q {theta = 1.0e+04 : f64} : tensor<2x4x16x8xf32>
    %k2 = dt.rope %k {theta = 5.0e+05 : f64, scaling = array<f64: 32.0, 1.0, 4.0, 8192.0>}
        : tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, F64Attr:$theta, UnitAttr:$inverse,
                       OptionalAttr<DenseF64ArrayAttr>:$scaling);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DT_DropoutOp : DT_Op<"dropout", [Pure, AllTypesMatch<["input", "result"]>,
                                     DifferentiableOp, ShardableOp]> {
  let summary = "inverted dropout with masks drawn from global coordinates";
  let description = [{
    `y = x / (1 - p)` where the element's draw keeps it, else 0. The draw of an
    element is Philox4x32-10 (kernels/include/dtk/philox.h) keyed by `seed`, at
    counter (g / 4, `step`, `site`), word g % 4, where g is the element's index
    in the optimizer step's batch: `micro` (which micro-batch of the step this
    is) times the element count of `shape`, plus its row-major index in
    `shape`. `shape` is the tensor as the program declares it; `firsts` (none,
    or one per dimension) say where the input's block of it starts, so a rank
    holding a slice draws what the whole tensor would, and the masks do not
    depend on the layout or on how the batch splits into micro-batches. The
    mask does not depend on `x`: the gradient is the same dropout of the
    adjoint.

    ```mlir
    %y = dt.dropout %x step %step micro %micro {p = 1.0e-01 : f64, seed = 42,
        site = 0, shape = array<i64: 4, 16, 64>} : tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_I64Scalar:$step,
                       DT_I64Scalar:$micro, Variadic<DT_I64Scalar>:$firsts,
                       F64Attr:$p,
                       I64Attr:$seed, I64Attr:$site,
                       DenseI64ArrayAttr:$shape);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `step` $step `micro` $micro (`firsts` `(` $firsts^ `)`)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// How the kernels find each local element's index in the step's batch
    /// (DropoutIndexing; the CPU kernel and the GPU's take the same).
    DropoutIndexing getIndexing();
  }];
}

class DT_Conv2dOpBase<string mnemonic, list<Trait> traits = []>
    : DT_Op<mnemonic, !listconcat([Pure, ShardableOp], traits)> {
  let hasVerifier = 1;
  code conv2dExtra = [{
    /// The sizes of the convolution this op belongs to: input [N, C, H, W],
    /// weight [O, C / groups, KH, KW], result [N, O, OH, OW].
    Conv2dShape getConv2dShape();
  }];
  let extraClassDeclaration = conv2dExtra;
}

def DT_Conv2dOp : DT_Conv2dOpBase<"conv2d", [DifferentiableOp]> {
  let summary = "2-D convolution (cross-correlation), NCHW, as PyTorch's conv2d";
  let description = [{
    `result[n, o, i, j] = sum over c, u, v of input[n, g C/groups + c, i s0 - p0 +
    u d0, j s1 - p1 + v d1] weight[o, c, u, v]`, g = o / (O / groups), reading zeros
    outside the input; `OH = (H + 2 p0 - d0 (KH - 1) - 1) / s0 + 1`, likewise OW. No
    bias: a layer adds it.

    ```mlir
    %y = dt.conv2d %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 3, 3>,
        dilation = array<i64: 1, 1>, groups = 1 : i64}
        : tensor<8x3x32x32xf32>, tensor<64x3x7x7xf32> -> tensor<8x64x16x16xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` "
                       "type($weight) `->` type($result)";
}

def DT_Conv2dInputGradOp : DT_Conv2dOpBase<"conv2d_input_grad"> {
  let summary = "the gradient of dt.conv2d with respect to its input";
  let description = [{
    The transposed convolution of `result_grad` [N, O, OH, OW] by `weight`: the
    adjoint of the input [N, C, H, W] of the dt.conv2d with these attributes.
  }];
  let arguments = (ins DT_FloatTensor:$result_grad, DT_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs DT_FloatTensor:$input_grad);
  let assemblyFormat = "$result_grad `,` $weight attr-dict `:` type($result_grad) "
                       "`,` type($weight) `->` type($input_grad)";
}

def DT_Conv2dWeightGradOp : DT_Conv2dOpBase<"conv2d_weight_grad"> {
  let summary = "the gradient of dt.conv2d with respect to its weight";
  let description = [{
    The correlation of `input` [N, C, H, W] with `result_grad` [N, O, OH, OW],
    summed over the batch: the adjoint of the weight [O, C / groups, KH, KW].
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$result_grad,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs DT_FloatTensor:$weight_grad);
  let assemblyFormat = "$input `,` $result_grad attr-dict `:` type($input) `,` "
                       "type($result_grad) `->` type($weight_grad)";
}

class DT_Pool2dOpBase<string mnemonic, list<Trait> traits = []>
    : DT_Op<mnemonic, !listconcat([Pure, ShardableOp], traits)> {
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The pooling as a convolution of one channel per group: input [N, C,
    /// H, W], window kernel, result [N, C, OH, OW].
    Conv2dShape getPool2dShape();
  }];
}

def DT_MaxPool2dOp : DT_Pool2dOpBase<"max_pool2d", [DifferentiableOp]> {
  let summary = "2-D max pooling, NCHW, as PyTorch's max_pool2d";
  let description = [{
    The largest input of each window (`kernel`, `stride`, implicit -inf
    `padding` of at most half the window); its gradient goes to the first
    largest input of the window, in row-major order, as PyTorch's CPU kernel.

    ```mlir
    %y = dt.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>,
        padding = array<i64: 1, 1>} : tensor<8x64x16x16xf32> -> tensor<8x64x8x8xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def DT_MaxPool2dGradOp : DT_Pool2dOpBase<"max_pool2d_grad"> {
  let summary = "the gradient of dt.max_pool2d";
  let description = [{
    Each window's adjoint added to its first largest input (recomputed from
    `input`), zeros elsewhere.
  }];
  let arguments = (ins DT_FloatTensor:$input, DT_FloatTensor:$result_grad,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs DT_FloatTensor:$input_grad);
  let assemblyFormat = "$input `,` $result_grad attr-dict `:` type($input) `,` "
                       "type($result_grad) `->` type($input_grad)";
}

def DT_AvgPool2dOp : DT_Pool2dOpBase<"avg_pool2d", [DifferentiableOp]> {
  let summary = "2-D average pooling, NCHW, as PyTorch's avg_pool2d";
  let description = [{
    The mean of each window, zero padding counted (PyTorch's default
    `count_include_pad`): the sum over the window divided by its size.

    ```mlir
    %y = dt.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>,
        padding = array<i64: 0, 0>} : tensor<8x64x8x8xf32> -> tensor<8x64x4x4xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def DT_AvgPool2dGradOp : DT_Pool2dOpBase<"avg_pool2d_grad"> {
  let summary = "the gradient of dt.avg_pool2d";
  let description = [{
    Each window's adjoint divided by the window's size and added to each of
    its inputs; the result type is the pooled input's.
  }];
  let arguments = (ins DT_FloatTensor:$result_grad, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs DT_FloatTensor:$input_grad);
  let assemblyFormat = "$result_grad attr-dict `:` type($result_grad) `->` "
                       "type($input_grad)";
}

def DT_EmbeddingOp : DT_Op<"embedding", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "rows of a table picked by integer ids";
  let description = [{
    ```mlir
    %h = dt.embedding %table, %ids
        : tensor<256x128xf32>, tensor<4x128xi32> -> tensor<4x128x128xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$table, DT_IntTensor:$ids);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat =
      "$table `,` $ids attr-dict `:` type($table) `,` type($ids) `->` type($result)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def DT_EmbeddingGradOp : DT_Op<"embedding_grad", [ShardableOp, Pure]> {
  let summary = "the gradient of dt.embedding with respect to its table";
  let description = [{
    Scatter-adds the rows of `result_grad` into a zero table at the rows named by `ids`.
  }];
  let arguments = (ins DT_IntTensor:$ids, DT_FloatTensor:$result_grad);
  let results = (outs DT_FloatTensor:$table_grad);
  let assemblyFormat = "$ids `,` $result_grad attr-dict `:` type($ids) `,` "
                       "type($result_grad) `->` type($table_grad)";
  let hasVerifier = 1;
}

def DT_CrossEntropyOp : DT_Op<"cross_entropy", [ShardableOp, Pure, DifferentiableOp]> {
  let summary = "mean softmax cross-entropy over labelled positions";
  let description = [{
    `logits` are `[..., C]`, `labels` `[...]` integers in `[0, C)`; a negative label marks a
    position to ignore (padding). The result is the mean over non-ignored positions (0 when
    there are none).

    ```mlir
    %l = dt.cross_entropy %logits, %y : tensor<128x10xf32>, tensor<128xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$logits, DT_IntTensor:$labels);
  let results = (outs DT_FloatScalar:$result);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($result)";
  let hasVerifier = 1;
}

def DT_CrossEntropyGradOp : DT_Op<"cross_entropy_grad", [ShardableOp, Pure]> {
  let summary = "the gradient of dt.cross_entropy with respect to its logits";
  let description = [{ `(softmax(logits) - onehot(labels)) * result_grad / count`. }];
  let arguments = (ins DT_FloatTensor:$logits, DT_IntTensor:$labels,
                       DT_FloatScalar:$result_grad);
  let results = (outs DT_FloatTensor:$logits_grad);
  let assemblyFormat = "$logits `,` $labels `,` $result_grad attr-dict `:` type($logits) `,` "
                       "type($labels) `,` type($result_grad) `->` type($logits_grad)";
  let hasVerifier = 1;
}

def DT_CountCorrectOp : DT_Op<"count_correct", [ShardableOp, Pure]> {
  let summary = "how many positions' arg-max equals their (non-negative) label";
  let description = [{
    ```mlir
    %n = dt.count_correct %logits, %y : tensor<128x10xf32>, tensor<128xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$logits, DT_IntTensor:$labels);
  let results = (outs DT_FloatScalar:$result);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($result)";
  let hasVerifier = 1;
}

def DT_AttentionOp : DT_Op<"attention", [ShardableOp, Pure, DifferentiableOp,
    AllTypesMatch<["query", "key", "value", "result"]>]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(q k^T / sqrt(D) [+ causal mask]) v` over `[..., H, T, D]` operands, and
    each query row's log-sum-exp `lse = log sum_j exp(q k_j^T / sqrt(D))` over the keys
    it sees, `[..., H, T]`, in f32 (f64 for f64 operands) whatever the operands' type:
    what `dt.attention_grad` needs to rebuild the probabilities without a pass over the
    keys for their maxima and sums (FlashAttention-2's saved statistics).

    ```mlir
    %o, %lse = dt.attention %q, %k, %v {causal} : tensor<4x4x128x32xf32>, tensor<4x4x128xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$query, DT_FloatTensor:$key, DT_FloatTensor:$value,
                       UnitAttr:$causal);
  let results = (outs DT_FloatTensor:$result, DT_FloatTensor:$lse);
  let assemblyFormat =
      "$query `,` $key `,` $value attr-dict `:` type($result) `,` type($lse)";
  let extraClassDeclaration = [{
    /// The log-sum-exp's type for a result of type `result`: its shape less
    /// the head dimension, in f32 (f64 for f64).
    static mlir::RankedTensorType lseType(mlir::Type result);
  }];
  let hasVerifier = 1;
}

def DT_AttentionGradOp : DT_Op<"attention_grad", [ShardableOp, Pure,
    AllTypesMatch<["query", "key", "value", "result", "result_grad", "query_grad",
                   "key_grad", "value_grad"]>]> {
  let summary = "the gradients of dt.attention";
  let description = [{
    The adjoints of query, key and value given the forward's result O, its log-sum-exp
    and the adjoint dO of O. The probabilities are recomputed as `exp(s - lse)` from the
    scores s, and each row's `D = sum_j P_j dP_j` as `rowsum(dO * O)` (FlashAttention-2),
    so no pass over the keys precedes the gradients' own.

    ```mlir
    %dq, %dk, %dv = dt.attention_grad %q, %k, %v, %o, %lse, %do {causal}
        : tensor<4x4x128x32xf32>, tensor<4x4x128xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$query, DT_FloatTensor:$key, DT_FloatTensor:$value,
                       DT_FloatTensor:$result, DT_FloatTensor:$lse,
                       DT_FloatTensor:$result_grad, UnitAttr:$causal);
  let results = (outs DT_FloatTensor:$query_grad, DT_FloatTensor:$key_grad,
                      DT_FloatTensor:$value_grad);
  let assemblyFormat = "$query `,` $key `,` $value `,` $result `,` $lse `,` $result_grad "
                       "attr-dict `:` type($result_grad) `,` type($lse)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives (made by dt-overlap-collectives)
//===----------------------------------------------------------------------===//

def DT_WaitOp : DT_Op<"wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the end of a collective issued asynchronously";
  let description = [{
    `pending` is the result of a mesh collective marked `dt.async`, which the
    runtime runs beside the ops that follow it; this op waits for it, and its
    result is the collective's result (the same buffer). `keep` are the
    collective's operands: they are read until here, so the memory plan keeps
    them, and nothing may write them before.

    ```mlir
    %p = mesh.all_reduce %g on @mesh mesh_axes = [0] {dt.async} : tensor<8xf32> -> tensor<8xf32>
    ...
    %s = dt.wait %p, %g : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins DT_Tensor:$pending, Variadic<DT_Tensor>:$keep);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$pending (`,` $keep^)? attr-dict `:` type($pending) (`,` type($keep)^)? "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def DT_PipelineSumOp : DT_Op<"pipeline_sum", [Pure, SameOperandsAndResultType,
                                              ShardableOp]> {
  let summary = "the sum of a value over the ranks of the pipeline axis";
  let description = [{
    Each rank of a pipeline holds the parameters of its own stages, so what the
    optimizer needs from every stage is a sum over the pipeline axis: the
    gradient of a parameter that several stages use (a tied embedding), and the
    partial squared norms of the gradients. dt-optimizer builds this op in each
    rank's `@apply_step` variant; dt-spmd-partition turns it into a
    `mesh.all_reduce` over `axis`.

    ```mlir
    %n = dt.pipeline_sum %partial {axis = "pp"} : tensor<f32>
    ```
  }];
  let arguments = (ins DT_Tensor:$input, StrAttr:$axis);
  let results = (outs DT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Vocabulary parallelism (ops of partitioned programs, made by dt-spmd-partition)
//===----------------------------------------------------------------------===//

def DT_ShardStartOp : DT_Op<"shard_start", [Pure]> {
  let summary = "where this rank's block of a split dimension starts";
  let description = [{
    The global index of the first entry of this rank's block when a dimension is
    split over mesh `axes` (the first the coarsest) into blocks of `size`: the
    rank's index in the group over `axes`, times `size`.

    ```mlir
    %first = dt.shard_start {axes = array<i16: 1>, size = 128} : tensor<i64>
    ```
  }];
  let arguments = (ins DenseI16ArrayAttr:$axes, I64Attr:$size);
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DT_EmbeddingShardOp : DT_Op<"embedding_shard", [Pure]> {
  let summary = "dt.embedding on a block of the table's rows";
  let description = [{
    `table` holds rows `[first, first + n)` of a table of `rows` rows. Ids in that
    range read their row; the others read zeros, so the sum over the ranks that
    hold the blocks is the lookup in the whole table. An id outside `[0, rows)` is
    a fault.

    ```mlir
    %h = dt.embedding_shard %table, %ids, %first {rows = 256}
        : tensor<128x64xf32>, tensor<4x16xi32>, tensor<i64> -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$table, DT_IntTensor:$ids, 0DTensorOf<[I64]>:$first,
                       I64Attr:$rows);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids `,` $first attr-dict `:` type($table) `,` type($ids) "
                       "`,` type($first) `->` type($result)";
  let hasVerifier = 1;
}

def DT_EmbeddingGradShardOp : DT_Op<"embedding_grad_shard", [Pure]> {
  let summary = "dt.embedding_grad for a block of the table's rows";
  let description = [{
    Rows `[first, first + n)` of the gradient of a table of `rows` rows: the rows
    of `result_grad` whose ids fall in the block, scatter-added.

    ```mlir
    %g = dt.embedding_grad_shard %ids, %dh, %first {rows = 256}
        : tensor<4x16xi32>, tensor<4x16x64xf32>, tensor<i64> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins DT_IntTensor:$ids, DT_FloatTensor:$result_grad,
                       0DTensorOf<[I64]>:$first, I64Attr:$rows);
  let results = (outs DT_FloatTensor:$table_grad);
  let assemblyFormat = "$ids `,` $result_grad `,` $first attr-dict `:` type($ids) `,` "
                       "type($result_grad) `,` type($first) `->` type($table_grad)";
  let hasVerifier = 1;
}

def DT_ClassStatsOp : DT_Op<"class_stats", [Pure]> {
  let summary = "what a block of classes contributes to a cross-entropy";
  let description = [{
    `logits` `[..., n]` are classes `[first, first + n)` of `classes`; `labels` `[...]`.
    The result `[4, ...]` holds per position: the maximum of the block's logits
    (-inf when the block has none), the sum of `exp(logit - maximum)` over the
    block, the label's logit when the label is in the block (else 0), and the
    global index of the block's first maximum. All-gathered over the ranks that
    hold the blocks, they give the loss (`dt.cross_entropy_stats`), its gradient
    (`dt.cross_entropy_grad_shard`) and the arg-max (`dt.count_correct_stats`)
    without any rank holding all the classes: Megatron's vocabulary-parallel
    cross-entropy.

    ```mlir
    %s = dt.class_stats %logits, %y, %first {classes = 256}
        : tensor<64x128xf32>, tensor<64xi32>, tensor<i64> -> tensor<4x64xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$logits, DT_IntTensor:$labels,
                       0DTensorOf<[I64]>:$first, I64Attr:$classes);
  let results = (outs DT_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $first attr-dict `:` type($logits) `,` "
                       "type($labels) `,` type($first) `->` type($result)";
  let hasVerifier = 1;
}

def DT_CrossEntropyStatsOp : DT_Op<"cross_entropy_stats", [Pure]> {
  let summary = "dt.cross_entropy from the statistics of every block of classes";
  let description = [{
    `stats` `[g, 4, ...]` are the `dt.class_stats` of the `g` blocks; the result is
    the mean over labelled positions of `logsumexp - label's logit`, as
    `dt.cross_entropy` of the whole logits.

    ```mlir
    %l = dt.cross_entropy_stats %all, %y : tensor<2x4x64xf32>, tensor<64xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$stats, DT_IntTensor:$labels);
  let results = (outs DT_FloatScalar:$result);
  let assemblyFormat = "$stats `,` $labels attr-dict `:` type($stats) `,` type($labels) `->` "
                       "type($result)";
  let hasVerifier = 1;
}

def DT_CrossEntropyGradShardOp : DT_Op<"cross_entropy_grad_shard", [Pure]> {
  let summary = "dt.cross_entropy_grad for a block of classes";
  let description = [{
    The gradient of the mean cross-entropy with respect to `logits`, classes
    `[first, first + n)` of `classes`, with the softmax's denominator from the
    statistics of every block: `(exp(logit - logsumexp) - onehot(label)) *
    result_grad / count`.

    ```mlir
    %d = dt.cross_entropy_grad_shard %logits, %y, %all, %g, %first {classes = 256}
        : tensor<64x128xf32>, tensor<64xi32>, tensor<2x4x64xf32>, tensor<f32>, tensor<i64>
          -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$logits, DT_IntTensor:$labels, DT_FloatTensor:$stats,
                       DT_FloatScalar:$result_grad, 0DTensorOf<[I64]>:$first,
                       I64Attr:$classes);
  let results = (outs DT_FloatTensor:$logits_grad);
  let assemblyFormat = "$logits `,` $labels `,` $stats `,` $result_grad `,` $first attr-dict `:` "
                       "type($logits) `,` type($labels) `,` type($stats) `,` type($result_grad) "
                       "`,` type($first) `->` type($logits_grad)";
  let hasVerifier = 1;
}

def DT_CountCorrectStatsOp : DT_Op<"count_correct_stats", [Pure]> {
  let summary = "dt.count_correct from the statistics of every block of classes";
  let description = [{
    How many labelled positions' arg-max (the first maximum over all classes) is
    their label, from the `dt.class_stats` of every block.

    ```mlir
    %n = dt.count_correct_stats %all, %y : tensor<2x4x64xf32>, tensor<64xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins DT_FloatTensor:$stats, DT_IntTensor:$labels);
  let results = (outs DT_FloatScalar:$result);
  let assemblyFormat = "$stats `,` $labels attr-dict `:` type($stats) `,` type($labels) `->` "
                       "type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def DT_ScheduleOp : DT_Op<"schedule", [ShardableOp, Pure]> {
  let summary = "the learning rate at an optimizer step";
  let description = [{
    `step` is the 1-based optimizer step, `total` the run's number of steps. `kind` is
    `constant`, `cosine` (`warmup`, `min`), `linear` (`warmup`, `final`) or `step`
    (`every`, `gamma`); `lr` is the base rate. Warm-up is linear from `lr / warmup`
    at step 1 to `lr` at step `warmup`; then cosine and linear decay with progress
    `(step - 1 - warmup) / max(1, total - warmup)`, so the first step after warm-up
    runs at `lr`.

    ```mlir
    %lr = dt.schedule %t, %total {kind = "cosine", lr = 1.0e-03 : f64,
                                  warmup = 100 : i64, min = 0.0 : f64}
        : tensor<i64>, tensor<i64> -> tensor<f32>
    ```
  }];
  let arguments = (ins DT_IntScalar:$step, DT_IntScalar:$total, StrAttr:$kind, F64Attr:$lr,
                       DefaultValuedAttr<I64Attr, "0">:$warmup,
                       DefaultValuedAttr<F64Attr, "0.0">:$min,
                       DefaultValuedAttr<F64Attr, "0.0">:$final,
                       DefaultValuedAttr<I64Attr, "1">:$every,
                       DefaultValuedAttr<F64Attr, "1.0">:$gamma);
  let results = (outs DT_FloatScalar:$result);
  let assemblyFormat = "$step `,` $total attr-dict `:` type($step) `,` type($total) `->` "
                       "type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def DT_FusedOp : DT_Op<"fused", [IsolatedFromAbove, SingleBlock]> {
  let summary = "a fused elementwise region, code-generated as one loop nest";
  let description = [{
    The body computes values of the iteration shape. The body's block arguments have the
    iteration shape and the operands' element types; an operand of a smaller shape is
    broadcast to the iteration shape (NumPy rules), which is how `dt.broadcast_to` is
    absorbed. The body holds only elementwise ops (`ScalarizableOpInterface`) and ends with
    `dt.yield`.

    Without `reduce_axes`, the results are the yielded values (so they have the iteration
    shape). With `reduce_axes`, every result is its yielded value summed over those axes
    of the iteration shape, which lets a reduction consume an elementwise chain without
    the chain ever reaching memory (e.g. the sum of squares of a gradient).

    ```mlir
    %h = dt.fused (%y, %b) : (tensor<128x256xf32>, tensor<256xf32>) -> tensor<128x256xf32> {
    ^bb0(%a: tensor<128x256xf32>, %c: tensor<128x256xf32>):
      %s = dt.add %a, %c : tensor<128x256xf32>
      %r = dt.relu %s : tensor<128x256xf32>
      dt.yield %r : tensor<128x256xf32>
    }
    %n = dt.fused (%g) {reduce_axes = array<i64: 0, 1>} : (tensor<256x784xf32>) -> tensor<f32> {
    ^bb0(%a: tensor<256x784xf32>):
      %sq = dt.mul %a, %a : tensor<256x784xf32>
      dt.yield %sq : tensor<256x784xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<DT_Tensor>:$inputs,
                       OptionalAttr<DenseI64ArrayAttr>:$reduce_axes);
  let results = (outs Variadic<DT_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "`(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The shape the body computes and the loop nest iterates over.
    ::llvm::ArrayRef<int64_t> getIterationShape() {
      return ::llvm::cast<::mlir::RankedTensorType>(
                 getBody().front().getTerminator()->getOperand(0).getType())
          .getShape();
    }
    /// Whether the results are sums of the yielded values.
    bool isReduction() { return getReduceAxes().has_value(); }
  }];
}

def DT_YieldOp : DT_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">]> {
  let summary = "the results of a dt.fused region";
  let arguments = (ins Variadic<DT_Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // DT_OPS_TD
