// RUN: dt-opt %s -dt-pipeline-stages | FileCheck %s

// Two stages over pp = 2, layers l0 and l1. The ops of each layer take its stage;
// the loss, which reads l1's output, the last stage's; the input's load goes to
// the stage that reads it; @w, read by both layers (tied), gets a load per stage
// and no dt.pp_rank (both ranks hold it), @w1 only l1's rank.

module attributes {dt.pipeline = {axis = "pp", chunks = 1 : i64, microbatches = 4 : i64, schedule = "1f1b", stages = [["l0"], ["l1"]]}} {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["pp"]}
  // CHECK-DAG: dt.global param @w : tensor<4x4xf32> {init
  // CHECK-DAG: dt.global param @w1 : tensor<4x4xf32> {dt.pp_rank = 1 : i64
  dt.global param @w : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global param @w1 : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global input @"in/train.x" : tensor<2x4xf32>
  dt.global input @"in/train.y" : tensor<2xi32>

  // CHECK-LABEL: func.func @loss
  func.func @loss() -> tensor<f32> {
    // CHECK: dt.load @"in/train.x" {dt.stage = 0 : i64}
    // CHECK: dt.load @"in/train.y" {dt.stage = 1 : i64}
    // CHECK: dt.load @w {dt.stage = 0 : i64}
    // CHECK: dt.load @w {dt.stage = 1 : i64}
    // CHECK: dt.load @w1 {dt.stage = 1 : i64}
    %x = dt.load @"in/train.x" : tensor<2x4xf32>
    %y = dt.load @"in/train.y" : tensor<2xi32>
    %w = dt.load @w : tensor<4x4xf32>
    %w1 = dt.load @w1 : tensor<4x4xf32>
    // CHECK: dt.matmul {{.*}} {dt.stage = 0 : i64}
    // CHECK: dt.tanh {{.*}} {dt.stage = 0 : i64}
    // CHECK: dt.matmul {{.*}} {dt.stage = 1 : i64}
    // CHECK: dt.matmul {{.*}} {dt.stage = 1 : i64}
    // CHECK: dt.cross_entropy {{.*}} {dt.stage = 1 : i64}
    %h0 = dt.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l0"("m.dt":3:5))
    %a0 = dt.tanh %h0 : tensor<2x4xf32> loc("l0.act"("m.dt":4:5))
    %h1 = dt.matmul %a0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1"("m.dt":5:5))
    %o = dt.matmul %h1, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("head"("m.dt":6:5))
    %l = dt.cross_entropy %o, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
