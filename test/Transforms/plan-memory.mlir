// RUN: dt-opt %s -split-input-file -dt-plan-memory | FileCheck %s

// Globals are laid out first, 64-byte aligned; loads alias their global; an update
// that reads and writes elementwise goes in place; transients reuse dead buffers.
// CHECK: module attributes {dt.arena_bytes = 320 : i64, dt.persistent_bytes = 192 : i64}
module {
  // CHECK: dt.global param @w : tensor<8xf32> {init = {{.*}}, offset = 0 : i64}
  dt.global param @w : tensor<8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  // CHECK: dt.global grad @"grad/w" : tensor<8xf32> {offset = 64 : i64}
  dt.global grad @"grad/w" : tensor<8xf32>
  // CHECK: dt.global output @out : tensor<f32> {offset = 128 : i64}
  dt.global output @out : tensor<f32>

  // CHECK-LABEL: func.func @update
  func.func @update() {
    // CHECK: dt.load @w {dt.offsets = [0]}
    %w = dt.load @w : tensor<8xf32>
    // CHECK: dt.load @"grad/w" {dt.offsets = [64]}
    %g = dt.load @"grad/w" : tensor<8xf32>
    // In place: the region reads w[i] and writes w[i].
    // CHECK: dt.fused(%{{.*}}, %{{.*}}) {dt.offsets = [0]}
    %n = dt.fused(%w, %g) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
      %s = dt.sub %a, %b : tensor<8xf32>
      dt.yield %s : tensor<8xf32>
    }
    dt.store %n, @w : tensor<8xf32>
    return
  }

  // CHECK-LABEL: func.func @transients
  func.func @transients() {
    %w = dt.load @w : tensor<8xf32>
    // Transients start after the persistent region (192); %a and %b are both live at
    // the second region, so they differ.
    // CHECK: dt.fused(%{{.*}}) {dt.offsets = [192]}
    %a = dt.fused(%w) : (tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%x: tensor<8xf32>):
      %e = dt.exp %x : tensor<8xf32>
      dt.yield %e : tensor<8xf32>
    }
    // CHECK: dt.fused(%{{.*}}) {dt.offsets = [256]}
    %b = dt.fused(%a) : (tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%x: tensor<8xf32>):
      %e = dt.exp %x : tensor<8xf32>
      dt.yield %e : tensor<8xf32>
    }
    // Stored once and nothing reads the old value: computed straight into @out.
    // CHECK: dt.reduce_sum %{{.*}} [0] {dt.offsets = [128]}
    %c = dt.reduce_sum %b [0] : tensor<8xf32> -> tensor<f32>
    // A reshape is a view of its operand's buffer.
    // CHECK: dt.reshape %{{.*}} {dt.offsets = [256]}
    %r = dt.reshape %b : tensor<8xf32> -> tensor<2x4xf32>
    // %a is dead by now: its block is reused.
    // CHECK: dt.reduce_sum %{{.*}} [0, 1] {dt.offsets = [192]}
    %s = dt.reduce_sum %r [0, 1] : tensor<2x4xf32> -> tensor<f32>
    dt.store %c, @out : tensor<f32>
    return
  }
}

// -----

// A load whose old value is read after the store to its global cannot alias it: it
// gets its own buffer (the lowering copies), and the store copies too.
module {
  dt.global state @s : tensor<4xf32>
  dt.global output @o : tensor<4xf32>
  // CHECK-LABEL: func.func @read_after_store
  func.func @read_after_store() {
    // CHECK: dt.load @s {dt.offsets = [128]}
    %old = dt.load @s : tensor<4xf32>
    // CHECK: dt.fused(%{{.*}}) {dt.offsets = [192]}
    %new = dt.fused(%old) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%x: tensor<4xf32>):
      %e = dt.exp %x : tensor<4xf32>
      dt.yield %e : tensor<4xf32>
    }
    dt.store %new, @s : tensor<4xf32>
    dt.store %old, @o : tensor<4xf32>
    return
  }
}

// -----

// An asynchronous collective reads its operand and writes its result until its
// dt.wait: the operand stays live until then (the relu between may not take its
// buffer), and the wait's result is the collective's buffer.
// CHECK-LABEL: func.func @async
module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global grad @g : tensor<16xf32>
  func.func @async(%x: tensor<16xf32>) {
    // CHECK: %[[A:.*]] = dt.fused{{.*}}{dt.offsets = [[[A_OFF:[0-9]+]]]}
    %a = dt.fused(%x) : (tensor<16xf32>) -> tensor<16xf32> {
    ^bb0(%v: tensor<16xf32>):
      %e = dt.exp %v : tensor<16xf32>
      dt.yield %e : tensor<16xf32>
    }
    // CHECK: mesh.all_reduce %[[A]] {{.*}}dt.offsets = [[[S_OFF:[0-9]+]]]
    %s = mesh.all_reduce %a on @mesh mesh_axes = [0] {dt.async} : tensor<16xf32> -> tensor<16xf32>
    // CHECK-NOT: dt.offsets = [[[A_OFF]]]
    // CHECK: dt.wait {{.*}}dt.offsets = [[[S_OFF]]]
    %r = dt.fused(%x) : (tensor<16xf32>) -> tensor<16xf32> {
    ^bb0(%v: tensor<16xf32>):
      %e = dt.relu %v : tensor<16xf32>
      dt.yield %e : tensor<16xf32>
    }
    %w = dt.wait %s, %a : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
    %sum = dt.fused(%w, %r) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> {
    ^bb0(%p: tensor<16xf32>, %q: tensor<16xf32>):
      %e = dt.add %p, %q : tensor<16xf32>
      dt.yield %e : tensor<16xf32>
    }
    dt.store %sum, @g : tensor<16xf32>
    return
  }
}

// -----

// A ring of slots (a pipeline stage's stash): as many aligned copies as dt.slots, one
// after another; the global's offset and its values' are slot 0's, and the next global
// follows the last slot.
// CHECK: module attributes {dt.arena_bytes = 384 : i64, dt.persistent_bytes = 384 : i64}
module {
  // CHECK: dt.global pipe @slot : tensor<i64> {offset = 0 : i64}
  dt.global pipe @slot : tensor<i64>
  // CHECK: dt.global pipe @stash : tensor<5xf32> {dt.slot_bytes = 64 : i64, dt.slot_index = @slot, dt.slots = 3 : i64, offset = 64 : i64}
  dt.global pipe @stash : tensor<5xf32> {dt.slots = 3 : i64, dt.slot_index = @slot}
  // CHECK: dt.global pipe @after : tensor<32xf32> {offset = 256 : i64}
  dt.global pipe @after : tensor<32xf32>

  // CHECK-LABEL: func.func @keep
  func.func @keep(%x: tensor<5xf32>) {
    // Computed in its slot: the store writes nothing more.
    // CHECK: dt.fused(%{{.*}}) {dt.offsets = [64]}
    %y = dt.fused(%x) : (tensor<5xf32>) -> tensor<5xf32> {
    ^bb0(%a: tensor<5xf32>):
      %e = dt.exp %a : tensor<5xf32>
      dt.yield %e : tensor<5xf32>
    }
    dt.store %y, @stash : tensor<5xf32>
    return
  }
}

// -----

// offload = "optimizer": what only @apply_step touches (the moment, the step)
// comes first and dt.host_bytes marks its end; the parameter and gradient, which
// @grad_step touches too, follow, and then the other globals.
// CHECK: module attributes {dt.arena_bytes = {{[0-9]+}} : i64, dt.host_bytes = 128 : i64, dt.offload = "optimizer"
module attributes {dt.offload = "optimizer"} {
  // CHECK: dt.global param @w : tensor<8xf32> {init = {{.*}}, offset = 128 : i64}
  dt.global param @w : tensor<8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  // CHECK: dt.global grad @"grad/w" : tensor<8xf32> {offset = 192 : i64}
  dt.global grad @"grad/w" : tensor<8xf32>
  // CHECK: dt.global state @m : tensor<8xf32> {offset = 0 : i64}
  dt.global state @m : tensor<8xf32>
  // CHECK: dt.global state @step : tensor<i64> {offset = 64 : i64}
  dt.global state @step : tensor<i64>
  // Touched by no entry point: in order with the device's.
  // CHECK: dt.global output @unused : tensor<f32> {offset = 256 : i64}
  dt.global output @unused : tensor<f32>

  func.func @grad_step() {
    %w = dt.load @w : tensor<8xf32>
    dt.store %w, @"grad/w" : tensor<8xf32>
    return
  }

  func.func @apply_step() {
    %s = dt.load @step : tensor<i64>
    dt.store %s, @step : tensor<i64>
    %w = dt.load @w : tensor<8xf32>
    %g = dt.load @"grad/w" : tensor<8xf32>
    %m = dt.load @m : tensor<8xf32>
    %n:2 = dt.fused(%w, %g, %m) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>):
      %d = dt.add %c, %b : tensor<8xf32>
      %e = dt.sub %a, %d : tensor<8xf32>
      dt.yield %e, %d : tensor<8xf32>, tensor<8xf32>
    }
    dt.store %n#0, @w : tensor<8xf32>
    dt.store %n#1, @m : tensor<8xf32>
    return
  }
}
