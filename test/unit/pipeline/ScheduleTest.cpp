//===- ScheduleTest.cpp - the static pipeline schedules -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// For every schedule kind over a range of ranks, micro-batches and chunks:
// each stage runs the forward and the backward of each micro-batch exactly
// once, on its own rank, after what it depends on, one pass per slot per
// rank; the bubble is the published (p - 1) / (v m + p - 1); GPipe holds every
// micro-batch's activations and 1F1B at most p - r on rank r.
//
//===----------------------------------------------------------------------===//

#include "dt/Pipeline/Schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

using namespace dt::pipeline;

namespace {

void checkSchedule(const Schedule &s) {
  int64_t stages = s.ranks * s.chunks;
  // (forward, stage, micro-batch) -> slot
  std::map<std::tuple<bool, int64_t, int64_t>, int64_t> slotOf;
  for (int64_t r = 0; r < s.ranks; ++r) {
    std::set<int64_t> used;
    for (const Action &a : s.perRank[size_t(r)]) {
      EXPECT_EQ(a.stage % s.ranks, r) << "a stage ran on another rank";
      EXPECT_TRUE(used.insert(a.slot).second) << "two passes in one slot";
      EXPECT_LT(a.slot, s.slots);
      EXPECT_TRUE(
          slotOf.insert({{a.forward, a.stage, a.microbatch}, a.slot}).second)
          << "a pass ran twice";
    }
  }
  ASSERT_EQ(int64_t(slotOf.size()), 2 * stages * s.microbatches);
  for (int64_t st = 0; st < stages; ++st)
    for (int64_t mb = 0; mb < s.microbatches; ++mb) {
      int64_t f = slotOf.at({true, st, mb}), b = slotOf.at({false, st, mb});
      EXPECT_GT(b, f);
      if (st > 0)
        EXPECT_GT(f, slotOf.at({true, st - 1, mb}));
      if (st + 1 < stages)
        EXPECT_GT(b, slotOf.at({false, st + 1, mb}));
    }
}

TEST(ScheduleTest, GPipeAndOneFOneBRunEveryPassInOrderWithThePublishedBubble) {
  for (Kind kind : {Kind::GPipe, Kind::OneFOneB})
    for (int64_t p = 1; p <= 5; ++p)
      for (int64_t m = 1; m <= 9; ++m) {
        SCOPED_TRACE(testing::Message() << toString(kind).str() << " p=" << p
                                        << " m=" << m);
        llvm::Expected<Schedule> s = buildSchedule(kind, p, m, 1);
        ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
        checkSchedule(*s);
        EXPECT_DOUBLE_EQ(s->bubble(), s->bubbleFormula());
        std::vector<int64_t> inFlight = s->peakInFlight();
        for (int64_t r = 0; r < p; ++r)
          EXPECT_EQ(inFlight[size_t(r)],
                    kind == Kind::GPipe ? m : std::min(p - r, m));
      }
}

TEST(ScheduleTest, InterleavingShrinksTheBubbleByTheChunks) {
  for (int64_t p = 2; p <= 4; ++p)
    for (int64_t v = 2; v <= 3; ++v)
      for (int64_t m = p; m <= 4 * p; m += p) {
        SCOPED_TRACE(testing::Message() << "p=" << p << " v=" << v
                                        << " m=" << m);
        llvm::Expected<Schedule> s =
            buildSchedule(Kind::Interleaved, p, m, v);
        ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
        checkSchedule(*s);
        EXPECT_DOUBLE_EQ(s->bubble(), s->bubbleFormula());
        llvm::Expected<Schedule> plain =
            buildSchedule(Kind::OneFOneB, p, m, 1);
        ASSERT_TRUE(bool(plain));
        EXPECT_LT(s->bubble(), plain->bubble());
      }
}

TEST(ScheduleTest, EqualStagesIdleByTheBubbleUnequalOnesMore) {
  for (Kind kind : {Kind::GPipe, Kind::OneFOneB, Kind::Interleaved})
    for (int64_t p = 2; p <= 4; ++p) {
      int64_t v = kind == Kind::Interleaved ? 2 : 1, m = 2 * p;
      SCOPED_TRACE(testing::Message() << toString(kind).str() << " p=" << p);
      llvm::Expected<Schedule> s = buildSchedule(kind, p, m, v);
      ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
      std::vector<double> ones(size_t(p * v), 1.0);
      for (double idle : s->idleWith(ones, ones))
        EXPECT_NEAR(idle, s->bubbleFormula(), 1e-12);
    }
  // 1F1B over 2 ranks and 4 micro-batches, the second stage twice as slow:
  // it works from 1 to 17 without a gap, the first rank's last backward runs
  // from 17 to 18 (as dtrt's PipelineTest finds for the emitted program).
  llvm::Expected<Schedule> s = buildSchedule(Kind::OneFOneB, 2, 4, 1);
  ASSERT_TRUE(bool(s));
  std::vector<double> idle = s->idleWith({1, 2}, {1, 2});
  EXPECT_NEAR(idle[0], 10.0 / 18, 1e-12);
  EXPECT_NEAR(idle[1], 2.0 / 18, 1e-12);
}

TEST(ScheduleTest, ImpossibleRecipesAreErrors) {
  auto message = [](llvm::Expected<Schedule> s) {
    return s ? std::string() : llvm::toString(s.takeError());
  };
  EXPECT_NE(message(buildSchedule(Kind::Interleaved, 2, 3, 2)).find("divide"),
            std::string::npos);
  EXPECT_NE(message(buildSchedule(Kind::OneFOneB, 2, 4, 2)).find("chunks"),
            std::string::npos);
  EXPECT_NE(message(buildSchedule(Kind::GPipe, 0, 4, 1)), "");
}

TEST(ScheduleTest, TheTableShowsEveryRankAndSlot) {
  llvm::Expected<Schedule> s = buildSchedule(Kind::OneFOneB, 2, 2, 1);
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(formatSchedule(*s, "pp"),
            "schedule: 1f1b, 2 ranks on axis 'pp', 2 micro-batches per step; "
            "one slot per pass of one micro-batch through one stage\n"
            "slot  0  1  2  3  4  5\n"
            "pp=0 F0 F1  . B0  . B1\n"
            "pp=1  . F0 B0 F1 B1  .\n"
            "bubble: 33.3% of 6 slots idle on each rank ((p - 1) / (v m + p - "
            "1) = 33.3%)\n"
            "in flight: at most pp=0: 2, pp=1: 1 micro-batches of activations "
            "held\n");
}

} // namespace
