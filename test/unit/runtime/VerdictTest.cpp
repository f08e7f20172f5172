//===- VerdictTest.cpp - Where a step's time goes -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/verdict.h"

#include <gtest/gtest.h>

#include <algorithm>

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

/// Steps of data-parallel ranks that meet in one collective: the step ends
/// when the last rank's compute and the transfer are done, so each rank's
/// collective time is the step less its own compute.
struct Steps {
  std::vector<RankTimes> sums;
  Arrivals arrivals;
  int64_t count = 0;

  void add(const std::vector<double> &computes, double transfer = 0.002) {
    double step =
        *std::max_element(computes.begin(), computes.end()) + transfer;
    std::vector<RankTimes> times;
    for (double c : computes)
      times.push_back({step, 0, step - c, 0});
    sums.resize(times.size());
    for (size_t r = 0; r < times.size(); ++r) {
      sums[r].step += times[r].step;
      sums[r].comm += times[r].comm;
    }
    arrivals.add(times, {});
    ++count;
  }
};

TEST(VerdictTest, OneStallDoesNotMakeAStraggler) {
  // Rank 3 computes 20 ms longer in every step; in the first, the machine
  // holds rank 0 up for 1.5 s. On average the others waited longest for
  // rank 0; step by step, rank 3 is last in three of the four.
  Steps run;
  run.add({1.510, 0.010, 0.010, 0.030});
  for (int i = 0; i < 3; ++i)
    run.add({0.010, 0.010, 0.010, 0.030});
  ASSERT_EQ(run.arrivals.last.size(), 4u);
  EXPECT_EQ(run.arrivals.last[0].rank, 0);
  EXPECT_NEAR(run.arrivals.last[0].lateness, 1.5 - 0.020 / 3, 1e-9);
  EXPECT_EQ(judge(run.sums, run.count, 1).straggler, 0);
  Verdict v = judge(run.sums, run.count, 1, std::nullopt, {}, &run.arrivals);
  EXPECT_EQ(v.straggler, 3);
  EXPECT_EQ(v.lateSteps, 3);
  EXPECT_NEAR(v.lateness, 0.020, 1e-9);
  EXPECT_NEAR(v.compute + v.comm + v.stragglerWait + v.input + v.bubble, v.step,
              1e-12);
  // Rank 0 waited for rank 3 in three steps: 15 ms a step on average. By the
  // sums alone it waited for nobody (it spent least in the collectives).
  Verdict zero = judge(run.sums, run.count, 0, std::nullopt, {}, &run.arrivals);
  EXPECT_NEAR(zero.comm, 0.002, 1e-9);
  EXPECT_NEAR(zero.stragglerWait, 0.015, 1e-9);
  EXPECT_NEAR(judge(run.sums, run.count, 0).stragglerWait, 0.0, 1e-12);
  std::string line = describe(v, 0);
  EXPECT_NE(line.find("rank 3 arrives 20.00 ms late at the collectives of 3 "
                      "of 4 steps"),
            std::string::npos)
      << line;
}

TEST(VerdictTest, EveryStepWhenLastInAll) {
  Steps run;
  for (int i = 0; i < 5; ++i)
    run.add({0.010, 0.025 + 0.001 * i, 0.010});
  Verdict v = judge(run.sums, run.count, 0, std::nullopt, {}, &run.arrivals);
  EXPECT_EQ(v.straggler, 1);
  EXPECT_EQ(v.lateSteps, 5);
  EXPECT_NEAR(v.lateness, 0.017, 1e-9); // the median of 15 ... 19 ms
  EXPECT_NE(describe(v, 0).find("late at the collectives of every step"),
            std::string::npos);
}

TEST(VerdictTest, NoStragglerWhenNoRankIsLastInHalfTheSteps) {
  // Ranks 1 and 2 are 30 ms late in two of five steps each, rank 3 in one:
  // the others wait, but for no one rank.
  Steps run;
  for (int late : {1, 1, 2, 2, 3}) {
    std::vector<double> computes(4, 0.010);
    computes[size_t(late)] = 0.040;
    run.add(computes);
  }
  EXPECT_EQ(run.arrivals.last.size(), 5u);
  Verdict v = judge(run.sums, run.count, 0, std::nullopt, {}, &run.arrivals);
  EXPECT_EQ(v.straggler, -1);
  EXPECT_NEAR(v.stragglerWait, 0.030, 1e-9);
  // On average, rank 1 would be named.
  EXPECT_EQ(judge(run.sums, run.count, 0).straggler, 1);
}

TEST(VerdictTest, LastArrivalsPerGroupAndAboveNoise) {
  // Ranks 0 and 2 meet, 1 and 3 meet. In group 0 rank 2 is 6 ms late; in
  // group 1 rank 1 is 0.5 ms late, below 5 % of the step.
  std::vector<RankTimes> step = {{0.1, 0, 0.0070, 0},
                                 {0.1, 0, 0.0010, 0},
                                 {0.1, 0, 0.0010, 0},
                                 {0.1, 0, 0.0015, 0}};
  Arrivals a;
  a.add(step, {0, 1, 0, 1});
  ASSERT_EQ(a.last.size(), 1u);
  EXPECT_EQ(a.last[0].rank, 2);
  EXPECT_NEAR(a.last[0].lateness, 0.006, 1e-12);
  ASSERT_EQ(a.leastComm.size(), 2u);
  EXPECT_NEAR(a.leastComm[0], 0.001, 1e-12);
  EXPECT_NEAR(a.leastComm[1], 0.001, 1e-12);
}

TEST(VerdictTest, AWholeRunKeepsABoundedSampleOfItsLateArrivals) {
  // 20 000 steps, rank 1 last in every one by 5 to 15 ms (a sawtooth): the
  // counts stay exact, the kept arrivals stop at kKept, a uniform sample
  // whose median is the run's within a millisecond, the same on a rerun.
  auto run = [] {
    Steps steps;
    for (int i = 0; i < 20000; ++i)
      steps.add({0.010, 0.015 + 0.010 * (i % 101) / 100.0, 0.010});
    return steps;
  };
  Steps a = run(), b = run();
  EXPECT_EQ(a.arrivals.last.size(), Arrivals::kKept);
  EXPECT_EQ(a.arrivals.lateSteps.at(1), 20000);
  Verdict v = judge(a.sums, a.count, 0, std::nullopt, {}, &a.arrivals);
  EXPECT_EQ(v.straggler, 1);
  EXPECT_EQ(v.lateSteps, 20000);
  EXPECT_NEAR(v.lateness, 0.010, 1e-3);
  for (size_t i = 0; i < Arrivals::kKept; ++i)
    ASSERT_EQ(a.arrivals.last[i].lateness, b.arrivals.last[i].lateness) << i;
  a.arrivals.clear();
  EXPECT_TRUE(a.arrivals.last.empty());
  EXPECT_TRUE(a.arrivals.lateSteps.empty());
}

} // namespace
