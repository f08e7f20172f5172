// RUN: dt-opt %s -split-input-file -dt-shard-propagation | FileCheck %s

// A vocabulary-parallel table (@vocab: rows over tp) tied to the output layer:
// the lookup keeps the rows split and its result is a partial sum over tp; the
// logits keep their classes split through the cross-entropy, its gradient and the
// arg-max (no rank gathers them); the table's gradient is made for this rank's
// rows, as the gradient global wants them. (An op without dt.operand_shardings
// takes its operands as they are.)
// CHECK-LABEL: module @vocab
module @vocab {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["tp"]}
  dt.global param @wte : tensor<16x4xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[tp, _]>}
  dt.global grad @"grad/wte" : tensor<16x4xf32> {sharding = #dt.shard<[tp, _]>}
  dt.global input @"in/train.x" : tensor<6xi32> {dt.batch, sharding = #dt.shard<[_]>}
  dt.global input @"in/train.y" : tensor<6xi32> {dt.batch, sharding = #dt.shard<[_]>}
  dt.global output @"out/loss" : tensor<f32> {sharding = #dt.shard<[]>}
  dt.global output @"out/correct" : tensor<f32> {sharding = #dt.shard<[]>}
  func.func @grad_step() {
    %one = dt.constant dense<1.0> : tensor<f32>
    %t = dt.load @wte : tensor<16x4xf32>
    %ids = dt.load @"in/train.x" : tensor<6xi32>
    // CHECK: dt.embedding %{{[0-9]+}}, %{{[0-9]+}} {dt.sharding = [#dt.shard<[_, _], partial = (tp)>]}
    %h = dt.embedding %t, %ids : tensor<16x4xf32>, tensor<6xi32> -> tensor<6x4xf32>
    // CHECK: dt.matmul {{.*}}dt.operand_shardings = [#dt.shard<[_, _]>, #dt.shard<[tp, _]>], dt.sharding = [#dt.shard<[_, tp]>]
    %l = dt.matmul %h, %t {transpose_rhs} : tensor<6x4xf32>, tensor<16x4xf32> -> tensor<6x16xf32>
    %y = dt.load @"in/train.y" : tensor<6xi32>
    // CHECK: dt.cross_entropy %{{[0-9]+}}, %{{[0-9]+}} {dt.sharding = [#dt.shard<[]>]}
    %loss = dt.cross_entropy %l, %y : tensor<6x16xf32>, tensor<6xi32> -> tensor<f32>
    dt.store %loss, @"out/loss" : tensor<f32>
    // CHECK: dt.count_correct %{{[0-9]+}}, %{{[0-9]+}} {dt.sharding = [#dt.shard<[]>]}
    %n = dt.count_correct %l, %y : tensor<6x16xf32>, tensor<6xi32> -> tensor<f32>
    dt.store %n, @"out/correct" : tensor<f32>
    // CHECK: dt.cross_entropy_grad %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} {dt.sharding = [#dt.shard<[_, tp]>]}
    %dl = dt.cross_entropy_grad %l, %y, %one : tensor<6x16xf32>, tensor<6xi32>, tensor<f32> -> tensor<6x16xf32>
    // CHECK: dt.matmul {{.*}}dt.sharding = [#dt.shard<[_, _], partial = (tp)>]
    %dh = dt.matmul %dl, %t : tensor<6x16xf32>, tensor<16x4xf32> -> tensor<6x4xf32>
    // CHECK: dt.embedding_grad {{.*}}dt.operand_shardings = [#dt.shard<[_]>, #dt.shard<[_, _]>], dt.sharding = [#dt.shard<[tp, _]>]
    %dt = dt.embedding_grad %ids, %dh : tensor<6xi32>, tensor<6x4xf32> -> tensor<16x4xf32>
    dt.store %dt, @"grad/wte" : tensor<16x4xf32>
    return
  }
}
