// RUN: dt-opt %s -split-input-file -dt-verify-collectives -verify-diagnostics | FileCheck %s

// An SPMD program: every rank runs the same straight-line body, so every group
// sees the same sequence.
// CHECK-LABEL: func.func @grad_step
module {
  mesh.mesh @mesh(shape = 2x2) {dt.axes = ["dp", "tp"]}
  func.func @grad_step() {
    %x = dt.constant dense<1.0> : tensor<4xf32>
    %a = mesh.all_reduce %x on @mesh mesh_axes = [1] : tensor<4xf32> -> tensor<4xf32>
    %b = mesh.all_gather %a on @mesh mesh_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
    return
  }
}

// -----

// Variants for groups of ranks (as pipeline stages will have) must agree within
// every group they share: here ranks 0 and 1 (a tp group) issue their all-reduces
// over tp in different orders of shapes.
module {
  mesh.mesh @mesh(shape = 2x2) {dt.axes = ["dp", "tp"]}
  func.func @grad_step() attributes {dt.ranks = array<i64: 0, 2, 3>} {
    %x = dt.constant dense<1.0> : tensor<4xf32>
    %y = dt.constant dense<1.0> : tensor<8xf32>
    %a = mesh.all_reduce %x on @mesh mesh_axes = [1] : tensor<4xf32> -> tensor<4xf32>
    %b = mesh.all_reduce %y on @mesh mesh_axes = [1] : tensor<8xf32> -> tensor<8xf32>
    return
  }
  func.func @grad_step_rank1() attributes {dt.entry = "grad_step", dt.ranks = array<i64: 1>} {
    %x = dt.constant dense<1.0> : tensor<4xf32>
    %y = dt.constant dense<1.0> : tensor<8xf32>
    // expected-error @+1 {{ranks 0 and 1 of group {0, 1} disagree on their collective #0 over it in 'grad_step': rank 0 issues all_reduce over [1] of tensor<4xf32> to tensor<4xf32>, rank 1 issues all_reduce over [1] of tensor<8xf32> to tensor<8xf32>; the job would hang}}
    %b = mesh.all_reduce %y on @mesh mesh_axes = [1] : tensor<8xf32> -> tensor<8xf32>
    %a = mesh.all_reduce %x on @mesh mesh_axes = [1] : tensor<4xf32> -> tensor<4xf32>
    return
  }
}

// -----

// A rank that skips a collective its group issues.
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  func.func @apply_step() attributes {dt.ranks = array<i64: 0>} {
    %x = dt.constant dense<1.0> : tensor<4xf32>
    // expected-error @+1 {{ranks 0 and 1 of group {0, 1} disagree on their collective #0 over it in 'apply_step': rank 0 issues all_reduce over [0] of tensor<4xf32> to tensor<4xf32>, rank 1 issues nothing; the job would hang}}
    %a = mesh.all_reduce %x on @mesh mesh_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return
  }
  func.func @apply_step_rank1() attributes {dt.entry = "apply_step", dt.ranks = array<i64: 1>} {
    return
  }
}

// -----

// A collective inside a region: some ranks could skip or repeat it.
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  func.func @step(%c: i1) {
    %x = dt.constant dense<1.0> : tensor<4xf32>
    scf.if %c {
      // expected-error @+1 {{a collective inside a region: some ranks could skip or repeat it, and the others would wait forever}}
      %a = mesh.all_reduce %x on @mesh mesh_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    }
    return
  }
}

// -----

// An asynchronous collective whose result is read without a dt.wait.
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global grad @g : tensor<4xf32>
  func.func @grad_step() {
    %x = dt.constant dense<1.0> : tensor<4xf32>
    // expected-error @+1 {{an asynchronous collective whose result is not waited for by one dt.wait after it, in its block: the rank could read it unfinished}}
    %a = mesh.all_reduce %x on @mesh mesh_axes = [0] {dt.async} : tensor<4xf32> -> tensor<4xf32>
    dt.store %a, @g : tensor<4xf32>
    return
  }
}
