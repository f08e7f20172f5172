// RUN: dt-opt %s -split-input-file -dt-fuse-epilogues | FileCheck %s

// Pattern: fused(mm, b) { s = add(a0, a1); relu(s) } => fused(mm_bias(x, w, b)) { relu(a0) }
// The backward's twin region recomputes the same sum from the product: it reads the
// biased product too, and neither region reads the bias any more.
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>, %[[G:.*]]: tensor<4x16xf32>)
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>,
                       %g: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK-NOT: dt.matmul %
  // CHECK: %[[MM:.*]] = dt.matmul_bias %[[X]], %[[W]], %[[B]] {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>
  // CHECK: dt.fused(%[[MM]]) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<4x16xf32>):
  // CHECK-NEXT:   %[[R:.*]] = dt.relu %[[A0]]
  // CHECK-NEXT:   dt.yield %[[R]]
  // CHECK: dt.fused(%[[MM]], %[[G]]) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK-NEXT: ^bb0(%[[C0:.*]]: tensor<4x16xf32>, %[[C1:.*]]: tensor<4x16xf32>):
  // CHECK-NEXT:   %[[S:.*]] = dt.step %[[C0]]
  // CHECK-NEXT:   dt.mul %[[C1]], %[[S]]
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %h = dt.fused(%mm, %b) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = dt.add %a0, %a1 : tensor<4x16xf32>
    %r = dt.relu %s : tensor<4x16xf32>
    dt.yield %r : tensor<4x16xf32>
  }
  %dh = dt.fused(%mm, %b, %g) : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%c0: tensor<4x16xf32>, %c1: tensor<4x16xf32>, %c2: tensor<4x16xf32>):
    %s = dt.add %c1, %c0 : tensor<4x16xf32>
    %t = dt.step %s : tensor<4x16xf32>
    %u = dt.mul %c2, %t : tensor<4x16xf32>
    dt.yield %u : tensor<4x16xf32>
  }
  return %h, %dh : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Pattern: fused(mm, b) { yield add(a0, a1) } => mm_bias(x, w, b)
// A region that only added the bias is gone; a result that forwarded the sum is read
// from the product itself. The bias is loaded after the product, so the product moves
// after the load.
dt.global param @bias : tensor<16xf32> {init = {kind = "constant", value = 0.0 : f64}}
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x3x8xf32>, %w: tensor<2x8x16xf32>) -> (tensor<2x3x16xf32>, tensor<2x3x16xf32>) {
  // CHECK: %[[B:.*]] = dt.load @bias
  // CHECK-NEXT: %[[MM:.*]] = dt.matmul_bias %{{.*}}, %{{.*}}, %[[B]] : tensor<2x3x8xf32>, tensor<2x8x16xf32>, tensor<16xf32> -> tensor<2x3x16xf32>
  // CHECK-NEXT: %[[T:.*]] = dt.fused(%[[MM]])
  // CHECK: dt.tanh
  // CHECK: return %[[MM]], %[[T]]
  %mm = dt.matmul %x, %w : tensor<2x3x8xf32>, tensor<2x8x16xf32> -> tensor<2x3x16xf32>
  %b = dt.load @bias : tensor<16xf32>
  %y = dt.fused(%mm, %b) : (tensor<2x3x16xf32>, tensor<16xf32>) -> tensor<2x3x16xf32> {
  ^bb0(%a0: tensor<2x3x16xf32>, %a1: tensor<2x3x16xf32>):
    %s = dt.add %a0, %a1 : tensor<2x3x16xf32>
    dt.yield %s : tensor<2x3x16xf32>
  }
  %t = dt.fused(%mm, %b) : (tensor<2x3x16xf32>, tensor<16xf32>) -> (tensor<2x3x16xf32>) {
  ^bb0(%a0: tensor<2x3x16xf32>, %a1: tensor<2x3x16xf32>):
    %s = dt.add %a0, %a1 : tensor<2x3x16xf32>
    %r = dt.tanh %s : tensor<2x3x16xf32>
    dt.yield %r : tensor<2x3x16xf32>
  }
  return %y, %t : tensor<2x3x16xf32>, tensor<2x3x16xf32>
}

// -----

// A product some use reads without the bias keeps its own pass: the store needs the
// bare product.
dt.global output @out : tensor<4x16xf32>
// CHECK-LABEL: func.func @bare_use
func.func @bare_use(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  // CHECK: dt.matmul %
  // CHECK-NOT: dt.matmul_bias
  %mm = dt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = dt.fused(%mm, %b) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = dt.add %a0, %a1 : tensor<4x16xf32>
    dt.yield %s : tensor<4x16xf32>
  }
  dt.store %mm, @out : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Nothing folds when the regions add different biases, when the product reaches the
// body's sum only after another op, or when the addend is not a row vector.
// CHECK-LABEL: func.func @no_common_bias
func.func @no_common_bias(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>,
                          %c: tensor<16xf32>, %d: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK-NOT: dt.matmul_bias
  %m1 = dt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y1 = dt.fused(%m1, %b) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = dt.add %a0, %a1 : tensor<4x16xf32>
    dt.yield %s : tensor<4x16xf32>
  }
  %y2 = dt.fused(%m1, %c) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = dt.add %a0, %a1 : tensor<4x16xf32>
    dt.yield %s : tensor<4x16xf32>
  }
  %m2 = dt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y3 = dt.fused(%m2, %b) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %r = dt.relu %a0 : tensor<4x16xf32>
    %s = dt.add %r, %a1 : tensor<4x16xf32>
    dt.yield %s : tensor<4x16xf32>
  }
  %m3 = dt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y4 = dt.fused(%m3, %d) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = dt.add %a0, %a1 : tensor<4x16xf32>
    dt.yield %s : tensor<4x16xf32>
  }
  return %y1, %y2, %y3, %y4 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A sum over the rows of the biased product stays a reduction region: it still has
// work to do after the addition goes.
// CHECK-LABEL: func.func @summed
func.func @summed(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  // CHECK: %[[MM:.*]] = dt.matmul_bias
  // CHECK: dt.fused(%[[MM]]) {reduce_axes = array<i64: 0>} : (tensor<4x16xf32>) -> tensor<16xf32>
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x16xf32>):
  // CHECK-NEXT: dt.yield %[[A]]
  %mm = dt.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = dt.fused(%mm, %b) {reduce_axes = array<i64: 0>} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %y = dt.add %a0, %a1 : tensor<4x16xf32>
    dt.yield %y : tensor<4x16xf32>
  }
  return %s : tensor<16xf32>
}

// -----

// Pattern: fused(reshape(mm), b) { add(a0, a1) } => reshape(mm_bias(x, w, b))
// MLIRGen flattens x[B, T, C] @ w into one 2-D product and reshapes it back; the
// reshape keeps the rows, so the bias still lands on each. The product and its reshape
// move after the bias's load; the region that only added it is gone.
dt.global param @qkv.bias : tensor<24xf32> {init = {kind = "constant", value = 0.0 : f64}}
// CHECK-LABEL: func.func @flattened
func.func @flattened(%x: tensor<6x8xf32>, %w: tensor<24x8xf32>) -> tensor<2x3x24xf32> {
  // CHECK: %[[B:.*]] = dt.load @qkv.bias
  // CHECK-NEXT: %[[MM:.*]] = dt.matmul_bias %{{.*}}, %{{.*}}, %[[B]] {transpose_rhs}
  // CHECK-NEXT: %[[R:.*]] = dt.reshape %[[MM]] : tensor<6x24xf32> -> tensor<2x3x24xf32>
  // CHECK-NEXT: return %[[R]]
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<6x8xf32>, tensor<24x8xf32> -> tensor<6x24xf32>
  %r = dt.reshape %mm : tensor<6x24xf32> -> tensor<2x3x24xf32>
  %b = dt.load @qkv.bias : tensor<24xf32>
  %y = dt.fused(%r, %b) : (tensor<2x3x24xf32>, tensor<24xf32>) -> tensor<2x3x24xf32> {
  ^bb0(%a0: tensor<2x3x24xf32>, %a1: tensor<2x3x24xf32>):
    %s = dt.add %a0, %a1 : tensor<2x3x24xf32>
    dt.yield %s : tensor<2x3x24xf32>
  }
  return %y : tensor<2x3x24xf32>
}

// -----

// A reshape that mixes columns into rows would put the bias on the wrong elements.
// CHECK-LABEL: func.func @columns_moved
func.func @columns_moved(%x: tensor<6x8xf32>, %w: tensor<4x8xf32>, %b: tensor<2xf32>) -> tensor<12x2xf32> {
  // CHECK-NOT: dt.matmul_bias
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<6x8xf32>, tensor<4x8xf32> -> tensor<6x4xf32>
  %r = dt.reshape %mm : tensor<6x4xf32> -> tensor<12x2xf32>
  %y = dt.fused(%r, %b) : (tensor<12x2xf32>, tensor<2xf32>) -> tensor<12x2xf32> {
  ^bb0(%a0: tensor<12x2xf32>, %a1: tensor<12x2xf32>):
    %s = dt.add %a0, %a1 : tensor<12x2xf32>
    dt.yield %s : tensor<12x2xf32>
  }
  return %y : tensor<12x2xf32>
}

// -----

// Pattern: h = narrow(mm); fused(h, b16) { add(widen(a0), widen(a1)) ... }
//          => h = narrow(mm_bias(x, w, widen(b16))); fused(h) { widen(a0) ... }
// A bf16 program narrows the product before its regions widen it and add the bf16
// bias: the bias goes into the product's f32 sums, widened, before the one rounding.
// The narrowing and its reshape move after the bias; the region that only added it
// (before a split) is gone, and the residual's region reads the narrowed sum.
dt.global param @qkv.b : tensor<24xf32> {init = {kind = "constant", value = 0.0 : f64}}
// CHECK-LABEL: func.func @narrowed
func.func @narrowed(%x: tensor<6x8xf32>, %w: tensor<24x8xf32>, %res: tensor<2x3x24xbf16>)
    -> (tensor<2x3x24xbf16>, tensor<2x3x24xbf16>) {
  // CHECK: %[[B:.*]] = dt.load @qkv.b
  // CHECK-NEXT: %[[B16:.*]] = dt.fused(%[[B]]) : (tensor<24xf32>) -> tensor<24xbf16>
  // CHECK: %[[W:.*]] = dt.fused(%[[B16]]) : (tensor<24xbf16>) -> tensor<24xf32> {
  // CHECK-NEXT: ^bb0(%[[BA:.*]]: tensor<24xbf16>):
  // CHECK-NEXT:   %[[BW:.*]] = dt.convert %[[BA]] : tensor<24xbf16> to tensor<24xf32>
  // CHECK-NEXT:   dt.yield %[[BW]]
  // CHECK: %[[MM:.*]] = dt.matmul_bias %{{.*}}, %{{.*}}, %[[W]] {transpose_rhs}
  // CHECK-NEXT: %[[H:.*]] = dt.fused(%[[MM]]) : (tensor<6x24xf32>) -> tensor<6x24xbf16>
  // CHECK: %[[R:.*]] = dt.reshape %[[H]] : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  // CHECK-NEXT: %[[Y:.*]] = dt.fused(%[[R]], %{{.*}}) : (tensor<2x3x24xbf16>, tensor<2x3x24xbf16>) -> tensor<2x3x24xbf16> {
  // CHECK-NEXT: ^bb0(%[[P:.*]]: tensor<2x3x24xbf16>, %[[Q:.*]]: tensor<2x3x24xbf16>):
  // CHECK-NEXT:   %[[PW:.*]] = dt.convert %[[P]] : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
  // CHECK-NEXT:   %[[QW:.*]] = dt.convert %[[Q]] : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
  // CHECK-NEXT:   %[[S:.*]] = dt.add %[[PW]], %[[QW]]
  // CHECK: return %[[R]], %[[Y]]
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<6x8xf32>, tensor<24x8xf32> -> tensor<6x24xf32>
  %h = dt.fused(%mm) : (tensor<6x24xf32>) -> tensor<6x24xbf16> {
  ^bb0(%a: tensor<6x24xf32>):
    %n = dt.convert %a : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  %r = dt.reshape %h : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  %b = dt.load @qkv.b : tensor<24xf32>
  %b16 = dt.fused(%b) : (tensor<24xf32>) -> tensor<24xbf16> {
  ^bb0(%a: tensor<24xf32>):
    %n = dt.convert %a : tensor<24xf32> to tensor<24xbf16>
    dt.yield %n : tensor<24xbf16>
  }
  // Adds the bias and rounds: once the bias is in the product, a round trip.
  %qkv = dt.fused(%r, %b16) : (tensor<2x3x24xbf16>, tensor<24xbf16>) -> tensor<2x3x24xbf16> {
  ^bb0(%a0: tensor<2x3x24xbf16>, %a1: tensor<2x3x24xbf16>):
    %w0 = dt.convert %a0 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %w1 = dt.convert %a1 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %s = dt.add %w0, %w1 : tensor<2x3x24xf32>
    %n = dt.convert %s : tensor<2x3x24xf32> to tensor<2x3x24xbf16>
    dt.yield %n : tensor<2x3x24xbf16>
  }
  // Adds the bias, rounds, then adds a residual: the residual's sum stays.
  %y = dt.fused(%r, %b16, %res) : (tensor<2x3x24xbf16>, tensor<24xbf16>, tensor<2x3x24xbf16>) -> tensor<2x3x24xbf16> {
  ^bb0(%a0: tensor<2x3x24xbf16>, %a1: tensor<2x3x24xbf16>, %a2: tensor<2x3x24xbf16>):
    %w0 = dt.convert %a0 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %w1 = dt.convert %a1 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %s = dt.add %w0, %w1 : tensor<2x3x24xf32>
    %n = dt.convert %s : tensor<2x3x24xf32> to tensor<2x3x24xbf16>
    %wn = dt.convert %n : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %w2 = dt.convert %a2 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %t = dt.add %wn, %w2 : tensor<2x3x24xf32>
    %o = dt.convert %t : tensor<2x3x24xf32> to tensor<2x3x24xbf16>
    dt.yield %o : tensor<2x3x24xbf16>
  }
  return %qkv, %y : tensor<2x3x24xbf16>, tensor<2x3x24xbf16>
}

// -----

// A use of the narrowed product that does not add the bias keeps the product as it is.
// CHECK-LABEL: func.func @narrowed_read_alone
func.func @narrowed_read_alone(%x: tensor<6x8xf32>, %w: tensor<24x8xf32>, %b16: tensor<24xbf16>)
    -> (tensor<6x24xbf16>, tensor<6x24xbf16>) {
  // CHECK-NOT: dt.matmul_bias
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<6x8xf32>, tensor<24x8xf32> -> tensor<6x24xf32>
  %h = dt.fused(%mm) : (tensor<6x24xf32>) -> tensor<6x24xbf16> {
  ^bb0(%a: tensor<6x24xf32>):
    %n = dt.convert %a : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  %y = dt.fused(%h, %b16) : (tensor<6x24xbf16>, tensor<24xbf16>) -> tensor<6x24xbf16> {
  ^bb0(%a0: tensor<6x24xbf16>, %a1: tensor<6x24xbf16>):
    %w0 = dt.convert %a0 : tensor<6x24xbf16> to tensor<6x24xf32>
    %w1 = dt.convert %a1 : tensor<6x24xbf16> to tensor<6x24xf32>
    %s = dt.add %w0, %w1 : tensor<6x24xf32>
    %n = dt.convert %s : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  return %h, %y : tensor<6x24xbf16>, tensor<6x24xbf16>
}

// -----

// GELU after a narrowed product: one region narrows the f32 sums (the
// pre-activation, which backward reads) and their GELU, rather than GELU of
// the rounded sums, as cuBLASLt's GELU_AUX epilogue computes them; the
// region that widened, took GELU and narrowed again goes.
// CHECK-LABEL: func.func @gelu_narrowed
func.func @gelu_narrowed(%x: tensor<6x8xf32>, %w: tensor<24x8xf32>)
    -> (tensor<2x3x24xbf16>, tensor<2x3x24xbf16>) {
  // CHECK: %[[MM:.*]] = dt.matmul %{{.*}}, %{{.*}} {transpose_rhs}
  // CHECK-NEXT: %[[BOTH:.*]]:2 = dt.fused(%[[MM]]) : (tensor<6x24xf32>) -> (tensor<6x24xbf16>, tensor<6x24xbf16>) {
  // CHECK-NEXT: ^bb0(%[[S:.*]]: tensor<6x24xf32>):
  // CHECK-NEXT:   %[[PRE:.*]] = dt.convert %[[S]] : tensor<6x24xf32> to tensor<6x24xbf16>
  // CHECK-NEXT:   %[[G:.*]] = dt.gelu %[[S]] : tensor<6x24xf32>
  // CHECK-NEXT:   %[[G16:.*]] = dt.convert %[[G]] : tensor<6x24xf32> to tensor<6x24xbf16>
  // CHECK-NEXT:   dt.yield %[[PRE]], %[[G16]]
  // CHECK: %[[R:.*]] = dt.reshape %[[BOTH]]#0 : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  // CHECK: %[[A:.*]] = dt.reshape %[[BOTH]]#1 : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  // CHECK-NOT: dt.fused
  // CHECK: return %[[R]], %[[A]]
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<6x8xf32>, tensor<24x8xf32> -> tensor<6x24xf32>
  %h = dt.fused(%mm) : (tensor<6x24xf32>) -> tensor<6x24xbf16> {
  ^bb0(%a: tensor<6x24xf32>):
    %n = dt.convert %a : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  %r = dt.reshape %h : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  %act = dt.fused(%r) : (tensor<2x3x24xbf16>) -> tensor<2x3x24xbf16> {
  ^bb0(%a: tensor<2x3x24xbf16>):
    %w0 = dt.convert %a : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %g = dt.gelu %w0 : tensor<2x3x24xf32>
    %n = dt.convert %g : tensor<2x3x24xf32> to tensor<2x3x24xbf16>
    dt.yield %n : tensor<2x3x24xbf16>
  }
  return %r, %act : tensor<2x3x24xbf16>, tensor<2x3x24xbf16>
}

// -----

// GELU's gradient by a narrowed product (backward's dY w^T): the f32 sums
// times the derivative at the pre-activation, rounded once, right after the
// product (cuBLASLt's DGELU epilogue), instead of the rounded product times
// the rounded derivative.
// CHECK-LABEL: func.func @gelu_grad_narrowed
func.func @gelu_grad_narrowed(%pre: tensor<2x3x24xbf16>, %dy: tensor<6x8xf32>,
                              %w: tensor<8x24xf32>) -> tensor<2x3x24xbf16> {
  // CHECK: %[[MM:.*]] = dt.matmul %{{.*}}, %{{.*}} :
  // CHECK-NEXT: %[[P:.*]] = dt.reshape %{{.*}} : tensor<2x3x24xbf16> -> tensor<6x24xbf16>
  // CHECK-NEXT: %[[D:.*]] = dt.fused(%[[MM]], %[[P]]) : (tensor<6x24xf32>, tensor<6x24xbf16>) -> tensor<6x24xbf16> {
  // CHECK-NEXT: ^bb0(%[[S:.*]]: tensor<6x24xf32>, %[[X:.*]]: tensor<6x24xbf16>):
  // CHECK-NEXT:   %[[XW:.*]] = dt.convert %[[X]] : tensor<6x24xbf16> to tensor<6x24xf32>
  // CHECK-NEXT:   %[[DD:.*]] = dt.gelu_deriv %[[XW]]
  // CHECK-NEXT:   %[[M:.*]] = dt.mul %[[S]], %[[DD]]
  // CHECK-NEXT:   %[[M16:.*]] = dt.convert %[[M]] : tensor<6x24xf32> to tensor<6x24xbf16>
  // CHECK-NEXT:   dt.yield %[[M16]]
  // CHECK: %[[V:.*]] = dt.reshape %[[D]] : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  // CHECK-NOT: dt.fused
  // CHECK: return %[[V]]
  %mm = dt.matmul %dy, %w : tensor<6x8xf32>, tensor<8x24xf32> -> tensor<6x24xf32>
  %h = dt.fused(%mm) : (tensor<6x24xf32>) -> tensor<6x24xbf16> {
  ^bb0(%a: tensor<6x24xf32>):
    %n = dt.convert %a : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  %r = dt.reshape %h : tensor<6x24xbf16> -> tensor<2x3x24xbf16>
  %grad = dt.fused(%pre, %r) : (tensor<2x3x24xbf16>, tensor<2x3x24xbf16>) -> tensor<2x3x24xbf16> {
  ^bb0(%a0: tensor<2x3x24xbf16>, %a1: tensor<2x3x24xbf16>):
    %w0 = dt.convert %a0 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %d = dt.gelu_deriv %w0 : tensor<2x3x24xf32>
    %d16 = dt.convert %d : tensor<2x3x24xf32> to tensor<2x3x24xbf16>
    %w1 = dt.convert %a1 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %w2 = dt.convert %d16 : tensor<2x3x24xbf16> to tensor<2x3x24xf32>
    %m = dt.mul %w1, %w2 : tensor<2x3x24xf32>
    %n = dt.convert %m : tensor<2x3x24xf32> to tensor<2x3x24xbf16>
    dt.yield %n : tensor<2x3x24xbf16>
  }
  return %grad : tensor<2x3x24xbf16>
}

// -----

// A narrowed product that something else reads too keeps its rounding: the
// gradient's region stays as it is.
// CHECK-LABEL: func.func @gelu_grad_read_twice
func.func @gelu_grad_read_twice(%pre: tensor<6x24xbf16>, %dy: tensor<6x8xf32>,
                                %w: tensor<8x24xf32>) -> (tensor<6x24xbf16>, tensor<6x24xbf16>) {
  // CHECK: %[[H:.*]] = dt.fused(%{{.*}}) : (tensor<6x24xf32>) -> tensor<6x24xbf16>
  // CHECK: dt.fused(%{{.*}}, %[[H]]) : (tensor<6x24xbf16>, tensor<6x24xbf16>) -> tensor<6x24xbf16>
  %mm = dt.matmul %dy, %w : tensor<6x8xf32>, tensor<8x24xf32> -> tensor<6x24xf32>
  %h = dt.fused(%mm) : (tensor<6x24xf32>) -> tensor<6x24xbf16> {
  ^bb0(%a: tensor<6x24xf32>):
    %n = dt.convert %a : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  %grad = dt.fused(%pre, %h) : (tensor<6x24xbf16>, tensor<6x24xbf16>) -> tensor<6x24xbf16> {
  ^bb0(%a0: tensor<6x24xbf16>, %a1: tensor<6x24xbf16>):
    %w0 = dt.convert %a0 : tensor<6x24xbf16> to tensor<6x24xf32>
    %d = dt.gelu_deriv %w0 : tensor<6x24xf32>
    %d16 = dt.convert %d : tensor<6x24xf32> to tensor<6x24xbf16>
    %w1 = dt.convert %a1 : tensor<6x24xbf16> to tensor<6x24xf32>
    %w2 = dt.convert %d16 : tensor<6x24xbf16> to tensor<6x24xf32>
    %m = dt.mul %w1, %w2 : tensor<6x24xf32>
    %n = dt.convert %m : tensor<6x24xf32> to tensor<6x24xbf16>
    dt.yield %n : tensor<6x24xbf16>
  }
  return %h, %grad : tensor<6x24xbf16>, tensor<6x24xbf16>
}

// -----

// A bias's gradient (dY's sum over its rows) moves to right after the weight
// gradient's product dY^T x, which reads the same dY, with the rounding that
// reads it; so that on a GPU BGRADB computes it in the product's epilogue.
// Nothing else changes.
// CHECK-LABEL: func.func @bias_grad_sunk
func.func @bias_grad_sunk(%dy: tensor<2x3x8xbf16>, %x: tensor<6x4xbf16>)
    -> (tensor<8xf32>, tensor<8x4xf32>) {
  // CHECK: %[[MM:.*]] = dt.matmul %{{.*}}, %{{.*}} {transpose_lhs}
  // CHECK-NEXT: %[[DB:.*]] = dt.fused(%{{.*}}) {reduce_axes = array<i64: 0, 1>} : (tensor<2x3x8xbf16>) -> tensor<8xf32>
  // CHECK: %[[R:.*]] = dt.fused(%[[DB]]) : (tensor<8xf32>) -> tensor<8xf32>
  // CHECK: return %[[R]], %[[MM]]
  %db = dt.fused(%dy) {reduce_axes = array<i64: 0, 1>} : (tensor<2x3x8xbf16>) -> tensor<8xf32> {
  ^bb0(%a: tensor<2x3x8xbf16>):
    %w = dt.convert %a : tensor<2x3x8xbf16> to tensor<2x3x8xf32>
    dt.yield %w : tensor<2x3x8xf32>
  }
  %r = dt.fused(%db) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %n = dt.convert %a : tensor<8xf32> to tensor<8xbf16>
    %w = dt.convert %n : tensor<8xbf16> to tensor<8xf32>
    dt.yield %w : tensor<8xf32>
  }
  %flat = dt.reshape %dy : tensor<2x3x8xbf16> -> tensor<6x8xbf16>
  %dyw = dt.fused(%flat) : (tensor<6x8xbf16>) -> tensor<6x8xf32> {
  ^bb0(%a: tensor<6x8xbf16>):
    %w = dt.convert %a : tensor<6x8xbf16> to tensor<6x8xf32>
    dt.yield %w : tensor<6x8xf32>
  }
  %xw = dt.fused(%x) : (tensor<6x4xbf16>) -> tensor<6x4xf32> {
  ^bb0(%a: tensor<6x4xbf16>):
    %w = dt.convert %a : tensor<6x4xbf16> to tensor<6x4xf32>
    dt.yield %w : tensor<6x4xf32>
  }
  %dw = dt.matmul %dyw, %xw {transpose_lhs} : tensor<6x8xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  return %r, %dw : tensor<8xf32>, tensor<8x4xf32>
}

// -----

// A sum that the product does not read transposed (here dY x, not dY^T x)
// stays where it is.
// CHECK-LABEL: func.func @bias_grad_other_product
func.func @bias_grad_other_product(%dy: tensor<6x8xbf16>, %x: tensor<8x4xbf16>)
    -> (tensor<8xf32>, tensor<6x4xf32>) {
  // CHECK: dt.fused(%{{.*}}) {reduce_axes = array<i64: 0>}
  // CHECK: dt.matmul
  %db = dt.fused(%dy) {reduce_axes = array<i64: 0>} : (tensor<6x8xbf16>) -> tensor<8xf32> {
  ^bb0(%a: tensor<6x8xbf16>):
    %w = dt.convert %a : tensor<6x8xbf16> to tensor<6x8xf32>
    dt.yield %w : tensor<6x8xf32>
  }
  %dyw = dt.fused(%dy) : (tensor<6x8xbf16>) -> tensor<6x8xf32> {
  ^bb0(%a: tensor<6x8xbf16>):
    %w = dt.convert %a : tensor<6x8xbf16> to tensor<6x8xf32>
    dt.yield %w : tensor<6x8xf32>
  }
  %xw = dt.fused(%x) : (tensor<8x4xbf16>) -> tensor<8x4xf32> {
  ^bb0(%a: tensor<8x4xbf16>):
    %w = dt.convert %a : tensor<8x4xbf16> to tensor<8x4xf32>
    dt.yield %w : tensor<8x4xf32>
  }
  %y = dt.matmul %dyw, %xw : tensor<6x8xf32>, tensor<8x4xf32> -> tensor<6x4xf32>
  return %db, %y : tensor<8xf32>, tensor<6x4xf32>
}
