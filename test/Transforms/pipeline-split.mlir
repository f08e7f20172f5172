// RUN: dt-opt %s -dt-pipeline-stages -dt-autodiff -dt-pipeline-split | FileCheck %s

// Two stages over pp = 2 (layers l0 and l1) cut into a forward and a backward each.
// l0's output goes forward through pipe/s0/send/0 -> pipe/s1/recv/0 and its gradient
// back through pipe/s1/gsend/0 -> pipe/s0/grecv/0; what a backward reads from its
// forward is stashed (l0's tanh output and the batch's rows for the weight gradient,
// stage 1's input and labels); parameters are loaded where used, never sent. Each
// stage adds its own part of the tied @w's gradient.

module attributes {dt.accumulation = 4 : i64, dt.pipeline = {axis = "pp", chunks = 1 : i64, microbatches = 4 : i64, schedule = "1f1b", stages = [["l0"], ["l1"]]}} {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["pp"]}
  dt.global param @w : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global param @w1 : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global input @"in/train.x" : tensor<2x4xf32> {dt.batch}
  dt.global input @"in/train.y" : tensor<2xi32> {dt.batch}

  // CHECK-DAG: dt.global pipe @"pipe/s0/send/0" : tensor<2x4xf32> {dt.batch, dt.pp_rank = 0 : i64}
  // CHECK-DAG: dt.global pipe @"pipe/s1/recv/0" : tensor<2x4xf32> {dt.batch, dt.pp_rank = 1 : i64}
  // CHECK-DAG: dt.global pipe @"pipe/s1/gsend/0" : tensor<2x4xf32> {dt.batch, dt.pp_rank = 1 : i64}
  // CHECK-DAG: dt.global pipe @"pipe/s0/grecv/0" : tensor<2x4xf32> {dt.batch, dt.pp_rank = 0 : i64}

  // CHECK-NOT: func.func @grad_step
  // CHECK-LABEL: func.func @pipe_fwd_0()
  // CHECK-SAME: dt.pipe_recv = [], dt.pipe_send = ["pipe/s0/send/0"], dt.pipe_stash = ["pipe/s0/stash/0", "pipe/s0/stash/1"]
  // CHECK: %[[X:.*]] = dt.load @"in/train.x"
  // CHECK: %[[A0:.*]] = dt.tanh
  // CHECK-NOT: dt.cross_entropy
  // CHECK: dt.store %[[A0]], @"pipe/s0/send/0"
  // CHECK: dt.store %[[A0]], @"pipe/s0/stash/0"
  // CHECK: dt.store %[[X]], @"pipe/s0/stash/1"
  // CHECK-LABEL: func.func @pipe_bwd_0()
  // CHECK-SAME: dt.pipe_recv = ["pipe/s0/grecv/0"], dt.pipe_send = []
  // CHECK: dt.load @"pipe/s0/grecv/0"
  // CHECK: dt.load @"grad/w"
  // CHECK: dt.store {{.*}}, @"grad/w"
  // CHECK-NOT: @w1
  // CHECK-LABEL: func.func @pipe_fwd_1()
  // CHECK-SAME: dt.pipe_recv = ["pipe/s1/recv/0"], dt.pipe_send = []
  // CHECK: dt.load @"pipe/s1/recv/0"
  // CHECK: dt.cross_entropy
  // CHECK: dt.store {{.*}}, @"out/loss"
  // CHECK-LABEL: func.func @pipe_bwd_1()
  // CHECK-SAME: dt.pipe_recv = [], dt.pipe_send = ["pipe/s1/gsend/0"]
  // CHECK: dt.cross_entropy_grad
  // CHECK: dt.store {{.*}}, @"grad/w"
  // CHECK: dt.store {{.*}}, @"grad/w1"
  // CHECK: dt.store {{.*}}, @"pipe/s1/gsend/0"
  func.func @loss() -> tensor<f32> {
    %x = dt.load @"in/train.x" : tensor<2x4xf32>
    %y = dt.load @"in/train.y" : tensor<2xi32>
    %w = dt.load @w : tensor<4x4xf32>
    %w1 = dt.load @w1 : tensor<4x4xf32>
    %h0 = dt.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l0"("m.dt":3:5))
    %a0 = dt.tanh %h0 : tensor<2x4xf32> loc("l0.act"("m.dt":4:5))
    %h1 = dt.matmul %a0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1"("m.dt":5:5))
    %o = dt.matmul %h1, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("head"("m.dt":6:5))
    %l = dt.cross_entropy %o, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
