// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels -verify-diagnostics

// expected-error @+1 {{convert-dt-to-kernels needs dt-plan-memory's offsets}}
module {
}

// -----

module attributes {dt.arena_bytes = 1024 : i64} {
  func.func @f64_kernel() {
    %a = dt.constant {dt.offsets = [0]} dense<1.0> : tensor<2x2xf64>
    // expected-error @+1 {{has 'f64' data; the CPU backend's kernels take f32 only}}
    %m = dt.matmul %a, %a {dt.offsets = [64]} : tensor<2x2xf64>, tensor<2x2xf64> -> tensor<2x2xf64>
    return
  }
}

// -----

module attributes {dt.arena_bytes = 1024 : i64} {
  func.func @unfused() {
    %a = dt.constant {dt.offsets = [0]} dense<1.0> : tensor<4xf32>
    // expected-error @+1 {{cannot be lowered by convert-dt-to-kernels (was the module fused and planned?)}}
    %n = dt.neg %a {dt.offsets = [64]} : tensor<4xf32>
    return
  }
}

// -----

// Collectives need their id in the manifest's list (dtc numbers them).
module attributes {dt.arena_bytes = 1024 : i64} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global output @s : tensor<f32> {offset = 0 : i64}
  func.func @step() {
    %c = dt.constant {dt.offsets = [64]} dense<1.0> : tensor<f32>
    // expected-error @+1 {{has no dt.id: number the collectives (dt::numberCollectives) before lowering}}
    %s = mesh.all_reduce %c on @mesh mesh_axes = [0] {dt.offsets = [0]} : tensor<f32> -> tensor<f32>
    dt.store %s, @s : tensor<f32>
    return
  }
}

// -----

// The runtime's collectives sum; a max would be another collective.
module attributes {dt.arena_bytes = 1024 : i64} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global output @s : tensor<f32> {offset = 0 : i64}
  func.func @step() {
    %c = dt.constant {dt.offsets = [64]} dense<1.0> : tensor<f32>
    // expected-error @+1 {{reduces by max; the runtime's collectives sum}}
    %s = mesh.all_reduce %c on @mesh mesh_axes = [0] reduction = <max> {dt.id = 0 : i64, dt.offsets = [0]} : tensor<f32> -> tensor<f32>
    dt.store %s, @s : tensor<f32>
    return
  }
}
