// RUN: dt-opt %s -split-input-file -dt-verify-arena -verify-diagnostics

// Lowered entry points that address the arena wrongly, each rejected at the op
// with an internal error.
// The offset that broke GPT-2: the buffer at 289137536 addressed through a GEP
// whose 29-bit constant index wrapped it to -247733376.
module attributes {dt.arena_bytes = 306963328 : i64} {
  func.func private @dtk_embedding_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64)
  func.func @dt_grad_step(%arena: memref<306963328xi8>) attributes {dt.plan = array<i64: 0, 1048576, 289137536, 1048576, 290186112, 4096>} {
    %a = memref.extract_aligned_pointer_as_index %arena : memref<306963328xi8> -> index
    %i = arith.index_cast %a : index to i64
    %base = llvm.inttoptr %i : i64 to !llvm.ptr
    %c0 = arith.constant 0 : i64
    %table = llvm.getelementptr %base[%c0] {dt.buffer = array<i64: 0, 1048576>} : (!llvm.ptr, i64) -> !llvm.ptr, i8
    // expected-error @+1 {{internal error: 'llvm.getelementptr' points at bytes [-247733376, -247733376) of the arena, outside the arena of 306963328 bytes}}
    %out = llvm.getelementptr %base[-247733376] {dt.buffer = array<i64: 289137536, 1048576>} : (!llvm.ptr) -> !llvm.ptr, i8
    %c1 = arith.constant 290186112 : i64
    %ids = llvm.getelementptr %base[%c1] {dt.buffer = array<i64: 290186112, 4096>} : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %n = arith.constant 256 : i64
    %w = arith.constant 1024 : i64
    call @dtk_embedding_f32(%table, %ids, %out, %n, %n, %w) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64) -> ()
    return
  }
}

// -----

// A pointer inside the arena but inside another buffer than the one it names.
module attributes {dt.arena_bytes = 8192 : i64} {
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 4096, 4096, 4096>} {
    %a = memref.extract_aligned_pointer_as_index %arena : memref<8192xi8> -> index
    %i = arith.index_cast %a : index to i64
    %base = llvm.inttoptr %i : i64 to !llvm.ptr
    %c = arith.constant 4160 : i64
    // expected-error @+1 {{'llvm.getelementptr' points at bytes [4160, 4160) of the arena, outside its planned buffer [0, 4096)}}
    %p = llvm.getelementptr %base[%c] {dt.buffer = array<i64: 0, 4096>} : (!llvm.ptr, i64) -> !llvm.ptr, i8
    return
  }
}

// -----

module attributes {dt.arena_bytes = 8192 : i64} {
  func.func private @dtk_matmul_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i32, i32)
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 1024, 1024, 1024, 2048, 1024>} {
    %a = memref.extract_aligned_pointer_as_index %arena : memref<8192xi8> -> index
    %i = arith.index_cast %a : index to i64
    %base = llvm.inttoptr %i : i64 to !llvm.ptr
    %o0 = arith.constant 0 : i64
    %o1 = arith.constant 1024 : i64
    %o2 = arith.constant 2048 : i64
    %x = llvm.getelementptr %base[%o0] {dt.buffer = array<i64: 0, 1024>} : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %w = llvm.getelementptr %base[%o1] {dt.buffer = array<i64: 1024, 1024>} : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %y = llvm.getelementptr %base[%o2] {dt.buffer = array<i64: 2048, 1024>} : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %one = arith.constant 1 : i64
    %m = arith.constant 8 : i64
    %n = arith.constant 64 : i64
    %k = arith.constant 4 : i64
    %f = arith.constant 0 : i32
    // x: 8 x 4, w: 4 x 64 (1024 bytes, fits), y: 8 x 64 = 2048 bytes in a 1024-byte buffer.
    // expected-error @+1 {{to dtk_matmul_f32 touches, through argument 2, bytes [2048, 4096) of the arena, outside its planned buffer [2048, 3072)}}
    call @dtk_matmul_f32(%x, %w, %y, %one, %m, %n, %k, %f, %f) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i32, i32) -> ()
    return
  }
}

// -----

// A view that starts inside its buffer but runs past its end.
module attributes {dt.arena_bytes = 8192 : i64} {
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 4096, 4096, 4096>} {
    %c = arith.constant 64 : index
    // expected-error @+1 {{'memref.view' views bytes [64, 4160) of the arena, outside its planned buffer [0, 4096)}}
    %v = memref.view %arena[%c][] {dt.buffer = array<i64: 0, 4096>} : memref<8192xi8> to memref<1024xf32>
    return
  }
}

// -----

// A loop that indexes one element past its view.
module attributes {dt.arena_bytes = 8192 : i64} {
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 64>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c17 = arith.constant 17 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 64>} : memref<8192xi8> to memref<16xf32>
    scf.for %i = %c0 to %c17 step %c1 {
      // expected-error @+1 {{'memref.load' indexes dimension 0 (of 16) at 0..16}}
      %v = memref.load %x[%i] : memref<16xf32>
    }
    return
  }
}

// -----

// A vector load whose last lanes run past the row.
module attributes {dt.arena_bytes = 8192 : i64} {
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 320>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %c40 = arith.constant 40 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 320>} : memref<8192xi8> to memref<2x40xf32>
    scf.for %r = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c40 step %c16 {
        // expected-error @+1 {{'vector.load' indexes dimension 1 (of 40) at 0..47}}
        %v = vector.load %x[%r, %j] : memref<2x40xf32>, vector<16xf32>
      }
    }
    return
  }
}

// -----

// Index arithmetic (row * n + j) is followed through the loops.
module attributes {dt.arena_bytes = 8192 : i64} {
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 320>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c40 = arith.constant 40 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 320>} : memref<8192xi8> to memref<80xf32>
    scf.for %r = %c0 to %c3 step %c1 {
      %base = arith.muli %r, %c40 : index
      scf.for %j = %c0 to %c40 step %c1 {
        %at = arith.addi %base, %j : index
        // expected-error @+1 {{'memref.load' indexes dimension 0 (of 80) at 0..119}}
        %v = memref.load %x[%at] : memref<80xf32>
      }
    }
    return
  }
}

// -----

// A view naming a buffer the plan does not have.
module attributes {dt.arena_bytes = 8192 : i64} {
  func.func @dt_step(%arena: memref<8192xi8>) attributes {dt.plan = array<i64: 0, 64>} {
    %c = arith.constant 128 : index
    // expected-error @+1 {{'memref.view' names buffer [128, 192), which is not in the memory plan}}
    %v = memref.view %arena[%c][] {dt.buffer = array<i64: 128, 64>} : memref<8192xi8> to memref<16xf32>
    return
  }
}

// -----

// A plan larger than the arena.
module attributes {dt.arena_bytes = 4096 : i64} {
  // expected-error @+1 {{internal error: the plan's buffer [4032, 4160) lies outside the arena of 4096 bytes}}
  func.func @dt_step(%arena: memref<4096xi8>) attributes {dt.plan = array<i64: 0, 64, 4032, 128>} {
    return
  }
}

// -----

// An access the verifier does not understand is an error, not a pass.
module attributes {dt.arena_bytes = 4096 : i64} {
  func.func @dt_step(%arena: memref<4096xi8>) attributes {dt.plan = array<i64: 0, 64>} {
    %c = arith.constant 0 : index
    // expected-error @+1 {{'memref.load' uses the arena in a way dt-verify-arena cannot check}}
    %v = memref.load %arena[%c] : memref<4096xi8>
    return
  }
}

// -----

module attributes {dt.arena_bytes = 4096 : i64} {
  func.func @dt_step(%arena: memref<4096xi8>, %n: index) attributes {dt.plan = array<i64: 0, 64>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 64>} : memref<4096xi8> to memref<16xf32>
    // expected-error @+1 {{'scf.for' has bounds that are not constants (nor the range of an outlined parallel loop)}}
    scf.for %i = %c0 to %n step %c1 {
      %v = memref.load %x[%i] : memref<16xf32>
    }
    return
  }
}

// -----

// A subview that reaches past its source.
module attributes {dt.arena_bytes = 4096 : i64} {
  func.func @dt_step(%arena: memref<4096xi8>) attributes {dt.plan = array<i64: 0, 384>} {
    %c0 = arith.constant 0 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 384>} : memref<4096xi8> to memref<4x24xf32>
    // expected-error @+1 {{'memref.subview' takes elements 16..31 of dimension 1, which has 24}}
    %s = memref.subview %x[0, 16] [4, 16] [1, 1] : memref<4x24xf32> to memref<4x16xf32, strided<[24, 1], offset: 16>>
    return
  }
}

// -----

// After dt-lower-to-llvm: a constant offset from the arena outside every
// planned buffer (here a view's shift folded into its GEP).
module attributes {dt.arena_bytes = 4563402816 : i64} {
  llvm.func @dt_step(%arena: !llvm.ptr) attributes {dt.plan = array<i64: 0, 64, 4294967296, 64>} {
    %c = llvm.mlir.constant(4294967424 : i64) : i64
    // expected-error @+1 {{'llvm.getelementptr' points at bytes [4294967424, 4294967424) of the arena, outside every planned buffer}}
    %p = llvm.getelementptr %arena[%c] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    %v = llvm.load %p : !llvm.ptr -> f32
    llvm.return
  }
}

// -----

// After dt-lower-to-llvm: a kernel pointer reached through the memref
// descriptor and ptrtoint/inttoptr, with a footprint past its buffer.
module attributes {dt.arena_bytes = 8192 : i64} {
  llvm.func @dtk_softmax_f32(!llvm.ptr, !llvm.ptr, i64, i64, i64)
  llvm.func @dt_step(%arena: !llvm.ptr) attributes {dt.plan = array<i64: 0, 256, 256, 256>} {
    %u = llvm.mlir.undef : !llvm.struct<(ptr, ptr, i64)>
    %d0 = llvm.insertvalue %arena, %u[0] : !llvm.struct<(ptr, ptr, i64)>
    %d1 = llvm.insertvalue %arena, %d0[1] : !llvm.struct<(ptr, ptr, i64)>
    %aligned = llvm.extractvalue %d1[1] : !llvm.struct<(ptr, ptr, i64)>
    %asInt = llvm.ptrtoint %aligned : !llvm.ptr to i64
    %base = llvm.inttoptr %asInt : i64 to !llvm.ptr
    %x = llvm.getelementptr %base[0] : (!llvm.ptr) -> !llvm.ptr, i8
    %y = llvm.getelementptr %base[256] : (!llvm.ptr) -> !llvm.ptr, i8
    %one = llvm.mlir.constant(1 : i64) : i64
    %n = llvm.mlir.constant(128 : i64) : i64
    // expected-error @+1 {{'llvm.call' to dtk_softmax_f32 touches, through argument 0, bytes [0, 512) of the arena, outside every planned buffer}}
    llvm.call @dtk_softmax_f32(%x, %y, %one, %n, %one) : (!llvm.ptr, !llvm.ptr, i64, i64, i64) -> ()
    llvm.return
  }
}

// -----

// An outlined parallel loop handed a wider range than it was built for.
module attributes {dt.arena_bytes = 4096 : i64} {
  func.func private @dtk_parallel_for(i64, i64, (memref<4096xi8>, index, index) -> (), memref<4096xi8>)
  func.func private @dt_step_loop0(%arena: memref<4096xi8>, %begin: index, %end: index) attributes {dt.plan = array<i64: 0, 64>, dt.parallel_range = 16 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 64>} : memref<4096xi8> to memref<16xf32>
    scf.for %i = %begin to %end step %c1 {
      %v = memref.load %x[%i] : memref<16xf32>
    }
    return
  }
  func.func @dt_step(%arena: memref<4096xi8>) attributes {dt.plan = array<i64: 0, 64>} {
    %loop = constant @dt_step_loop0 : (memref<4096xi8>, index, index) -> ()
    %n = arith.constant 32 : i64
    %grain = arith.constant 1 : i64
    // expected-error @+1 {{runs dt_step_loop0 over [0, 32), which is not the range it was built for}}
    call @dtk_parallel_for(%n, %grain, %loop, %arena) : (i64, i64, (memref<4096xi8>, index, index) -> (), memref<4096xi8>) -> ()
    return
  }
}

// -----

// An outlined parallel loop whose range reaches past the view it indexes.
module attributes {dt.arena_bytes = 4096 : i64} {
  func.func private @dt_step_loop0(%arena: memref<4096xi8>, %begin: index, %end: index) attributes {dt.plan = array<i64: 0, 64>, dt.parallel_range = 17 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 64>} : memref<4096xi8> to memref<16xf32>
    scf.for %i = %begin to %end step %c1 {
      // expected-error @+1 {{'memref.load' indexes dimension 0 (of 16) at 0..16}}
      %v = memref.load %x[%i] : memref<16xf32>
    }
    return
  }
}

// -----

// A view into a ring of 2 slots of 64 bytes at 64, its slot number read from the
// arena: clamped to [0, 1] it stays inside the ring; clamped to [0, 2] it can reach
// the slot past its end.
module attributes {dt.arena_bytes = 1024 : i64} {
  func.func @dt_step(%arena: memref<1024xi8>) attributes {dt.plan = array<i64: 0, 8, 64, 128>} {
    %c0 = arith.constant 0 : index
    %ix = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 8>} : memref<1024xi8> to memref<i64>
    %k64 = memref.load %ix[] : memref<i64>
    %k = arith.index_cast %k64 : i64 to index
    %zero = arith.constant 0 : index
    %last = arith.constant 2 : index
    %lo = arith.maxsi %k, %zero : index
    %slot = arith.minsi %lo, %last : index
    %stride = arith.constant 64 : index
    %ring = arith.constant 64 : index
    %within = arith.muli %slot, %stride : index
    %shift = arith.addi %ring, %within : index
    // expected-error @+1 {{'memref.view' views bytes [64, 256) of the arena, outside its planned buffer [64, 192)}}
    %v = memref.view %arena[%shift][] {dt.buffer = array<i64: 64, 128>} : memref<1024xi8> to memref<16xf32>
    return
  }
}

// -----

// The slot number unclamped: no bound at all.
module attributes {dt.arena_bytes = 1024 : i64} {
  func.func @dt_step(%arena: memref<1024xi8>) attributes {dt.plan = array<i64: 0, 8, 64, 128>} {
    %c0 = arith.constant 0 : index
    %ix = memref.view %arena[%c0][] {dt.buffer = array<i64: 0, 8>} : memref<1024xi8> to memref<i64>
    %k64 = memref.load %ix[] : memref<i64>
    %k = arith.index_cast %k64 : i64 to index
    %stride = arith.constant 64 : index
    %within = arith.muli %k, %stride : index
    // expected-error @+1 {{internal error: 'memref.view' addresses the arena at an offset dt-verify-arena cannot bound}}
    %v = memref.view %arena[%within][] {dt.buffer = array<i64: 64, 128>} : memref<1024xi8> to memref<16xf32>
    return
  }
}
