// RUN: dt-opt %s -split-input-file -dt-bucket-collectives | FileCheck %s
// RUN: dt-opt %s -split-input-file -dt-bucket-collectives=bucket-bytes=0 | FileCheck %s --check-prefix=OFF

// The gradients' reduce-scatters of an optimizer step move up to their loads and go
// out as one: every rank's block of each gradient side by side, so that its part
// of the bucket is one block. The parameters' all-gathers go out as one after the
// last update, their stores moved to the end.
// CHECK-LABEL: func.func @apply_step
// OFF-LABEL: func.func @apply_step
// OFF-NOT: a bucket
module {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global param @a : tensor<8x2xf32> {init = {kind = "constant", value = 0.0 : f64}}
  dt.global param @b : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}}
  dt.global grad @"grad/a" : tensor<8x2xf32>
  dt.global grad @"grad/b" : tensor<4xf32>
  func.func @apply_step() {
    // CHECK: %[[GA:.*]] = dt.load @"grad/a"
    // CHECK: %[[GB:.*]] = dt.load @"grad/b"
    // CHECK: %[[BA:.*]] = dt.reshape %[[GA]] : tensor<8x2xf32> -> tensor<4x4xf32>
    // CHECK: %[[BB:.*]] = dt.reshape %[[GB]] : tensor<4xf32> -> tensor<4x1xf32>
    // CHECK: %[[J:.*]] = dt.concat %[[BA]], %[[BB]] axis 1 : tensor<4x4xf32>, tensor<4x1xf32> -> tensor<4x5xf32>
    // CHECK: %[[R:.*]] = dt.reshape %[[J]] : tensor<4x5xf32> -> tensor<20xf32>
    // CHECK: %[[S:.*]] = mesh.reduce_scatter %[[R]] on @mesh mesh_axes = [0] scatter_axis = 0 {dt.what = "a bucket of 2 reduce-scatters"} : tensor<20xf32> -> tensor<5xf32>
    // CHECK: dt.split %[[S]] axis 0 : tensor<5xf32> -> tensor<4xf32>, tensor<1xf32>
    // CHECK-NOT: mesh.reduce_scatter
    %ga = dt.load @"grad/a" : tensor<8x2xf32>
    %sa = mesh.reduce_scatter %ga on @mesh mesh_axes = [0] scatter_axis = 0 : tensor<8x2xf32> -> tensor<2x2xf32>
    %wa = dt.load @a : tensor<8x2xf32>
    %xa = mesh.all_slice %wa on @mesh mesh_axes = [0] slice_axis = 0 : tensor<8x2xf32> -> tensor<2x2xf32>
    %na = dt.sub %xa, %sa : tensor<2x2xf32>
    %pa = mesh.all_gather %na on @mesh mesh_axes = [0] gather_axis = 0 : tensor<2x2xf32> -> tensor<8x2xf32>
    dt.store %pa, @a : tensor<8x2xf32>
    %gb = dt.load @"grad/b" : tensor<4xf32>
    %sb = mesh.reduce_scatter %gb on @mesh mesh_axes = [0] scatter_axis = 0 : tensor<4xf32> -> tensor<1xf32>
    %wb = dt.load @b : tensor<4xf32>
    %xb = mesh.all_slice %wb on @mesh mesh_axes = [0] slice_axis = 0 : tensor<4xf32> -> tensor<1xf32>
    %nb = dt.sub %xb, %sb : tensor<1xf32>
    // CHECK: %[[NB:.*]] = dt.sub
    // CHECK: %[[JA:.*]] = dt.concat %{{.*}}, %{{.*}} axis 0 : tensor<4xf32>, tensor<1xf32> -> tensor<5xf32>
    // CHECK: %[[G:.*]] = mesh.all_gather %[[JA]] on @mesh mesh_axes = [0] gather_axis = 0 {dt.what = "a bucket of 2 all-gathers"} : tensor<5xf32> -> tensor<20xf32>
    // CHECK: %[[K:.*]] = dt.reshape %[[G]] : tensor<20xf32> -> tensor<4x5xf32>
    // CHECK: dt.split %[[K]] axis 1 : tensor<4x5xf32> -> tensor<4x4xf32>, tensor<4x1xf32>
    // CHECK: dt.store %{{.*}}, @a
    // CHECK: dt.store %{{.*}}, @b
    %pb = mesh.all_gather %nb on @mesh mesh_axes = [0] gather_axis = 0 : tensor<1xf32> -> tensor<4xf32>
    dt.store %pb, @b : tensor<4xf32>
    return
  }
}

// -----

// A result needed before the next collective is ready keeps its own collective:
// the Megatron all-reduces of a forward pass are on the critical path.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: mesh.all_reduce {{.*}}: tensor<4xf32> -> tensor<4xf32>
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["tp"]}
  dt.global input @"in/x" : tensor<4xf32>
  dt.global output @"out/y" : tensor<4xf32>
  func.func @forward() {
    %x = dt.load @"in/x" : tensor<4xf32>
    %a = mesh.all_reduce %x on @mesh mesh_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %t = dt.tanh %a : tensor<4xf32>
    %b = mesh.all_reduce %t on @mesh mesh_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    dt.store %b, @"out/y" : tensor<4xf32>
    return
  }
}
