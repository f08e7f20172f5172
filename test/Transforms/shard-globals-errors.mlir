// RUN: dt-opt %s -split-input-file -dt-shard-globals -verify-diagnostics

// The mesh must name its axes.
// expected-error @+1 {{the mesh needs 'dt.axes', one axis name per dimension of its shape}}
mesh.mesh @mesh(shape = 4)

// -----

// The recipe names axes of the mesh.
// expected-error @+1 {{dt.parallel names "tp", which is not an axis of the mesh}}
module attributes {dt.parallel = {data = ["tp"], zero = 0 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
}

// -----

module attributes {dt.parallel = {data = ["dp"], zero = 0 : i64, tensor = "tp"}} {
  mesh.mesh @mesh(shape = 2x2) {dt.axes = ["dp", "tp"]}
  // expected-error @+1 {{dt.tensor_dim 2 is not a dimension of 'tensor<4x4xf32>'}}
  dt.global param @w : tensor<4x4xf32> {dt.tensor_dim = 2 : i64, init = {kind = "constant", value = 0.0 : f64}}
}

// -----

module attributes {dt.parallel = {data = ["dp"], zero = 0 : i64}} {
  mesh.mesh @mesh(shape = 2x2) {dt.axes = ["dp", "tp"]}
  // expected-error @+1 {{3 blocks do not divide a dimension of 4}}
  dt.global param @w : tensor<4x4xf32> {dt.layout = #dt.shard<[3 x tp, _]>, init = {kind = "constant", value = 0.0 : f64}}
}
