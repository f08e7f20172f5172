// RUN: dt-opt %s -convert-dt-to-kernels -dt-lower-to-llvm | FileCheck %s
// RUN: dt-opt %s -convert-dt-to-kernels -dt-lower-to-llvm | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR

// The whole lowering reaches the LLVM dialect; an entry point is `void dt_f(ptr arena)`
// and GELU's tanh is a polynomial, not a libm call.
module attributes {dt.arena_bytes = 512 : i64} {
  // CHECK-NOT: memref.
  // CHECK-NOT: linalg.
  // CHECK: llvm.func @dt_f(%{{.*}}: !llvm.ptr)
  // IR: define void @dt_f(ptr %0)
  // IR-NOT: call float @tanhf
  func.func @f() {
    %c = dt.constant {dt.offsets = [0]} dense<0.5> : tensor<4x8xf32>
    %g = dt.fused(%c) {dt.offsets = [128]} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>):
      %x = dt.gelu %a : tensor<4x8xf32>
      dt.yield %x : tensor<4x8xf32>
    }
    return
  }
}
