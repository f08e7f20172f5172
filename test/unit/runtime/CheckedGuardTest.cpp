//===- CheckedGuardTest.cpp - The guards of dtc --checked programs --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Built with AddressSanitizer and linked with libdtrt-checked and
// libdtkernels-checked, as a checked program is: a kernel that writes past the
// span its call was checked for, into a neighbouring buffer of the same arena
// (memory ASan alone considers valid), faults at the stray write; the same
// call with the right sizes runs, and the guards are gone after the call.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"
#include "dtrt/checked.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

extern "C" void dtk_fail(const char *message);

namespace {

// An arena of three 4 KiB buffers: x (rows x 16 floats), w and b (16 floats
// each, at 4096 and 4160), y at 8192.
struct Arena {
  Arena() : bytes(12288, 0) {
    dtrt::registerCheckedArena(bytes.data(), bytes.size());
  }
  char *at(int64_t offset) { return bytes.data() + offset; }
  std::vector<char> bytes;
};

/// Checks the spans of a layer norm of `rows` rows of 16, with y's buffer
/// `yBytes` long, then runs it inside the guards with `runRows` rows.
void layerNorm(Arena &a, int64_t rows, int64_t yBytes, int64_t runRows) {
  const char *base = a.bytes.data();
  int64_t x = rows * 16 * 4, w = 16 * 4;
  dtrt_check_span("x", base, a.at(0), x, 0, 4096);
  dtrt_check_span("w", base, a.at(4096), w, 4096, 64);
  dtrt_check_span("b", base, a.at(4160), w, 4160, 64);
  dtrt_check_span("y", base, a.at(8192), rows * 16 * 4, 8192, yBytes);
  dtrt_guard_begin();
  dtk_layer_norm_f32(reinterpret_cast<float *>(a.at(0)),
                     reinterpret_cast<float *>(a.at(4096)),
                     reinterpret_cast<float *>(a.at(4160)),
                     reinterpret_cast<float *>(a.at(8192)), runRows, 16, 1e-5f);
  dtrt_guard_end();
}

TEST(CheckedGuards, AKernelInsideItsSpansRuns) {
  Arena a;
  layerNorm(a, 2, 128, 2);
  // After the call nothing is poisoned: the runtime may read any buffer.
  volatile char c = a.bytes[8192 + 128];
  (void)c;
}

TEST(CheckedGuards, AKernelWritingPastItsSpanFaults) {
  // The call was checked for 2 rows of y; the kernel writes 3 (its sizes
  // disagree with the plan's). The third row lands in y's guard band.
  EXPECT_DEATH(
      {
        Arena a;
        layerNorm(a, 2, 128, 3);
      },
      "use-after-poison");
}

} // namespace
