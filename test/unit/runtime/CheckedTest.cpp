//===- CheckedTest.cpp - Tests of the run-time checks of dtc --checked ----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtrt_check_span and dtrt_check_view accept a span inside its planned
// buffer and stop the program, naming the site, for one that leaves it, for a
// buffer outside the arena and for an entry point run on another arena. (The guards, which need
// AddressSanitizer, are tested by dtrt-checked-tests.)
//
//===----------------------------------------------------------------------===//

#include "dtrt/checked.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

class CheckedTest : public ::testing::Test {
protected:
  CheckedTest() : arena(4096) {
    dtrt::registerCheckedArena(arena.data(), arena.size());
  }
  std::vector<char> arena;
};

TEST_F(CheckedTest, SpansInsideTheirBuffersPass) {
  const char *base = arena.data();
  dtrt_check_span("k", base, base + 64, 128, 64, 128);
  dtrt_check_span("k", base, base + 96, 32, 64, 128);
  dtrt_check_span("k", base, base + 192, 0, 64, 128); // empty, at the end
  dtrt_guard_begin();
  dtrt_guard_end();
}

TEST_F(CheckedTest, ASpanPastItsBufferStopsTheProgram) {
  const char *base = arena.data();
  EXPECT_EXIT(dtrt_check_span("dtk_matmul_f32 at m.dt:3:7", base, base + 64,
                              192, 64, 128),
              ::testing::ExitedWithCode(1),
              "internal error: checked program: dtk_matmul_f32 at m.dt:3:7 "
              "touches bytes \\[64, 256\\) of the arena, outside its planned "
              "buffer \\[64, 192\\) \\(arena: 4096 bytes\\); this is a bug in "
              "dtc");
}

TEST_F(CheckedTest, ASpanBeforeItsBufferStopsTheProgram) {
  const char *base = arena.data();
  EXPECT_EXIT(dtrt_check_span("v", base, base + 0, 64, 64, 128),
              ::testing::ExitedWithCode(1), "touches bytes \\[0, 64\\)");
}

TEST_F(CheckedTest, AViewPastItsBufferStopsTheProgram) {
  const char *base = arena.data();
  dtrt_check_view("v", base, base + 64, 128, 64, 128);
  EXPECT_EXIT(dtrt_check_view("a loop's view at m.dt:4:2", base, base + 128,
                              128, 64, 128),
              ::testing::ExitedWithCode(1),
              "a loop's view at m.dt:4:2 touches bytes \\[128, 256\\)");
}

TEST_F(CheckedTest, ABufferOutsideTheArenaStopsTheProgram) {
  const char *base = arena.data();
  EXPECT_EXIT(dtrt_check_span("v", base, base + 4032, 64, 4032, 128),
              ::testing::ExitedWithCode(1),
              "outside its planned buffer \\[4032, 4160\\)");
}

TEST_F(CheckedTest, AnotherArenaStopsTheProgram) {
  std::vector<char> other(64);
  EXPECT_EXIT(dtrt_check_span("v", other.data(), other.data(), 64, 0, 64),
              ::testing::ExitedWithCode(1), "runs on an arena at");
}

} // namespace
