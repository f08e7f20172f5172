// RUN: dt-opt %s -dt-number-spans -verify-diagnostics

// Spans follow the memory plan's aliasing decisions, so they need a plan.
// expected-error @below {{dt-number-spans needs dt-plan-memory's offsets (no dt.arena_bytes on the module)}}
module {
  func.func @f() {
    return
  }
}
