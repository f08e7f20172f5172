// RUN: dt-opt %s -split-input-file -dt-overlap-collectives | FileCheck %s

// Backward with two gradients: the first one's all-reduce can run while the second
// is computed. It is marked dt.async and waited for where its result is first
// needed; the reshape that only feeds its store moves down to the stores first.
// The second all-reduce has nothing to hide behind and stays synchronous.
// CHECK-LABEL: func.func @grad_step
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global grad @"grad/a" : tensor<4x4xf32>
  dt.global grad @"grad/b" : tensor<4x4xf32>
  func.func @grad_step(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) {
    // CHECK: %[[GA:.*]] = dt.matmul %arg0, %arg1
    // CHECK: %[[SA:.*]] = mesh.all_reduce %[[GA]] on @mesh mesh_axes = [0] {dt.async} : tensor<4x4xf32> -> tensor<4x4xf32>
    // CHECK: %[[GB:.*]] = dt.matmul %arg1, %arg0
    // CHECK: %[[SB:.*]] = mesh.all_reduce %[[GB]] on @mesh mesh_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
    // CHECK: %[[WA:.*]] = dt.wait %[[SA]], %[[GA]] : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    // CHECK: %[[RA:.*]] = dt.reshape %[[WA]] : tensor<4x4xf32> -> tensor<16xf32>
    // CHECK: %[[BA:.*]] = dt.reshape %[[RA]] : tensor<16xf32> -> tensor<4x4xf32>
    // CHECK: dt.store %[[BA]], @"grad/a"
    // CHECK: dt.store %[[SB]], @"grad/b"
    %ga = dt.matmul %x, %y : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %sa = mesh.all_reduce %ga on @mesh mesh_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %ra = dt.reshape %sa : tensor<4x4xf32> -> tensor<16xf32>
    %ba = dt.reshape %ra : tensor<16xf32> -> tensor<4x4xf32>
    %gb = dt.matmul %y, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %sb = mesh.all_reduce %gb on @mesh mesh_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
    dt.store %ba, @"grad/a" : tensor<4x4xf32>
    dt.store %sb, @"grad/b" : tensor<4x4xf32>
    return
  }
}

// -----

// A gather with work before its first use runs beside that work (a parameter
// gathered before the layer ahead of its own: a prefetch), and is waited for where
// it is used.
// CHECK-LABEL: func.func @prefetch
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global param @w : tensor<2x4xf32> {init = {kind = "constant", value = 0.0 : f64}}
  func.func @prefetch(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // CHECK: %[[W:.*]] = dt.load @w
    // CHECK: %[[G:.*]] = mesh.all_gather %[[W]] on @mesh mesh_axes = [0] gather_axis = 0 {dt.async}
    // CHECK: %[[H:.*]] = dt.relu %arg0
    // CHECK: %[[WW:.*]] = dt.wait %[[G]], %[[W]] : tensor<4x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    // CHECK: dt.matmul %[[H]], %[[WW]]
    %w = dt.load @w : tensor<2x4xf32>
    %g = mesh.all_gather %w on @mesh mesh_axes = [0] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
    %h = dt.relu %x : tensor<4x4xf32>
    %y = dt.matmul %h, %g : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }
}
