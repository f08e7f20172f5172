// RUN: dt-opt %s -split-input-file -dt-shard-propagation -verify-diagnostics

// Every op of an entry point needs a sharding rule: fusion comes after sharding.
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global input @"in/x" : tensor<4xf32> {sharding = #dt.shard<[dp]>}
  func.func @step() {
    %x = dt.load @"in/x" : tensor<4xf32>
    // expected-error @+1 {{has no sharding rule; dt-shard-propagation cannot lay it out over the mesh}}
    %y = dt.fused (%x) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<4xf32>):
      %e = dt.exp %a : tensor<4xf32>
      dt.yield %e : tensor<4xf32>
    }
    return
  }
}

// -----

module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  // expected-error @+1 {{dt-shard-propagation needs single-block entry points}}
  func.func @step() {
    cf.br ^next
  ^next:
    return
  }
}
