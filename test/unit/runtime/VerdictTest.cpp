//===- VerdictTest.cpp - Where a step's time goes -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/verdict.h"

#include <gtest/gtest.h>

using namespace dtrt;

namespace {

TEST(VerdictTest, PartsAddUpToTheStep) {
  // 10 steps of 10 ms: 1 ms input, 3 ms in collectives on rank 0 (of which
  // 2 ms is unavoidable: rank 1 spends that much), 6 ms compute.
  std::vector<RankTimes> times = {{0.100, 0.010, 0.030, 0},
                                  {0.100, 0.010, 0.020, 0}};
  Verdict v = judge(times, 10, 0);
  EXPECT_NEAR(v.step, 0.010, 1e-12);
  EXPECT_NEAR(v.comm, 0.002, 1e-12);
  EXPECT_NEAR(v.stragglerWait, 0.001, 1e-12);
  EXPECT_NEAR(v.input, 0.001, 1e-12);
  EXPECT_NEAR(v.compute, 0.006, 1e-12);
  EXPECT_NEAR(v.compute + v.comm + v.stragglerWait + v.input + v.bubble, v.step,
              1e-12);
  EXPECT_EQ(v.bound, "compute-bound");
}

TEST(VerdictTest, NamesTheRankTheOthersWaitFor) {
  // Rank 2 computes 10 ms longer a step (17 ms against 7); the others wait
  // for it in the collectives.
  std::vector<RankTimes> times = {{0.20, 0.01, 0.12, 0},
                                  {0.20, 0.01, 0.12, 0},
                                  {0.20, 0.01, 0.02, 0},
                                  {0.20, 0.01, 0.12, 0}};
  Verdict v = judge(times, 10, 0);
  EXPECT_EQ(v.straggler, 2);
  EXPECT_NEAR(v.lateness, 0.010, 1e-12);
  EXPECT_NEAR(v.stragglerWait, 0.010, 1e-12);
  EXPECT_EQ(v.bound, "straggler-bound");
  EXPECT_EQ(v.why, "its compute takes 2.4x the others'");
  std::string line = describe(v, 0);
  EXPECT_NE(line.find("rank 2 arrives 10.00 ms late"), std::string::npos)
      << line;
}

TEST(VerdictTest, LooksForStragglersWithinEachGroup) {
  // Two pipeline stages of two data-parallel ranks: ranks 0 and 2 reduce
  // together, ranks 1 and 3 together. Rank 0 spends least in collectives of
  // all, but only because its stage's reduction is small; in stage 1, rank 3
  // computes 8 ms longer and rank 1 waits for it.
  std::vector<RankTimes> times = {{0.20, 0.0, 0.01, 0.05},
                                  {0.20, 0.0, 0.10, 0.02},
                                  {0.20, 0.0, 0.01, 0.05},
                                  {0.20, 0.0, 0.02, 0.02}};
  Verdict v = judge(times, 10, 0, std::nullopt, {0, 1, 0, 1});
  EXPECT_EQ(v.straggler, 3);
  EXPECT_NEAR(v.lateness, 0.008, 1e-12);
  // Rank 0's own stage waits for nobody.
  EXPECT_NEAR(v.comm, 0.001, 1e-12);
  EXPECT_NEAR(v.stragglerWait, 0.0, 1e-12);
  // Without the groups, rank 0 would seem the rank all others wait for.
  EXPECT_EQ(judge(times, 10, 0).straggler, 0);
}

TEST(VerdictTest, BlamesInputWhenThatIsWhatDiffers) {
  std::vector<RankTimes> times = {{0.10, 0.01, 0.04, 0}, {0.10, 0.04, 0.01, 0}};
  Verdict v = judge(times, 10, 0);
  EXPECT_EQ(v.straggler, 1);
  EXPECT_EQ(v.why, "its input staging takes 4.0x the others'");
}

TEST(VerdictTest, NoStragglerBelowNoise) {
  std::vector<RankTimes> times = {{0.100, 0.0, 0.0301, 0},
                                  {0.100, 0.0, 0.0300, 0}};
  Verdict v = judge(times, 10, 1);
  EXPECT_EQ(v.straggler, -1);
  EXPECT_EQ(v.bound, "compute-bound");
}

TEST(VerdictTest, OneRankAndPrediction) {
  std::vector<RankTimes> times = {{0.5, 0.0, 0.0, 0.0}};
  Verdict v = judge(times, 50, 0, PredictedStep{0.008, 0.0});
  EXPECT_EQ(v.straggler, -1);
  EXPECT_NEAR(v.compute, 0.01, 1e-12);
  std::string line = describe(v, 100);
  EXPECT_EQ(line, "verdict (steps 101-150): compute-bound: rank 0's 10 ms "
                  "step is compute 100 %, communication 0 %, straggler wait "
                  "0 %, input 0 %; predicted 8 ms a step (compute 100 %, "
                  "communication 0 %), measured 1.25x that");
}

} // namespace
