// RUN: not dt-opt %s -dt-pipeline-stages 2>&1 | FileCheck %s

// Stages out of the model's order: l0's op reads l1's value. The error is at the
// op's own location (the program's line), with a note at the value.
// CHECK: m.dt:3:5: error: this op of pipeline stage 0 reads a value of stage 1, which runs after it: list the stages in the order the model computes them
// CHECK: m.dt:5:5: note: the value of stage 1

module attributes {dt.pipeline = {axis = "pp", chunks = 1 : i64, microbatches = 4 : i64, schedule = "1f1b", stages = [["l0"], ["l1"]]}} {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["pp"]}
  dt.global param @w : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global input @"in/train.x" : tensor<2x4xf32>
  dt.global input @"in/train.y" : tensor<2xi32>
  func.func @loss() -> tensor<f32> {
    %x = dt.load @"in/train.x" : tensor<2x4xf32>
    %y = dt.load @"in/train.y" : tensor<2xi32>
    %w = dt.load @w : tensor<4x4xf32>
    %h1 = dt.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1"("m.dt":5:5))
    %h0 = dt.matmul %h1, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l0"("m.dt":3:5))
    %l = dt.cross_entropy %h0, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
