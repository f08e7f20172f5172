//===- PipelineTest.cpp - The idle time a pipeline schedule predicts ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/pipeline.h"

#include <gtest/gtest.h>

using namespace dtrt;

namespace {

/// A spec of two pipeline ranks, one stage each, running `order` (per rank:
/// +m a forward of micro-batch m, -m-1 its backward).
PipelineSpec twoStages(int64_t microbatches,
                       std::vector<std::vector<int>> order) {
  PipelineSpec spec;
  spec.microbatches = microbatches;
  spec.stages.resize(2);
  spec.apply = {"apply_step_0", "apply_step_1"};
  for (size_t r = 0; r < order.size(); ++r) {
    spec.actions.emplace_back();
    for (int a : order[r])
      spec.actions.back().push_back(PipelineAction{
          a >= 0, a >= 0 ? int64_t(a) : int64_t(-a - 1), int64_t(r), 0});
  }
  return spec;
}

// 1F1B over 4 micro-batches: the first rank runs one forward ahead.
PipelineSpec oneFOneB() {
  return twoStages(4, {{0, 1, -1, 2, -2, 3, -3, -4},
                       {0, -1, 1, -2, 2, -3, 3, -4}});
}

TEST(PipelineTest, EqualStagesIdleAsTheFormulaSays) {
  PipelineSpec spec = oneFOneB();
  for (double backward : {1.0, 2.0}) {
    std::vector<double> idle = scheduleIdle(spec, {1, 1}, {backward, backward});
    ASSERT_EQ(idle.size(), 2u);
    EXPECT_NEAR(idle[0], scheduleBubble(spec), 1e-12);
    EXPECT_NEAR(idle[1], scheduleBubble(spec), 1e-12);
  }
  PipelineSpec gpipe = twoStages(4, {{0, 1, 2, 3, -4, -3, -2, -1},
                                     {0, 1, 2, 3, -4, -3, -2, -1}});
  std::vector<double> idle = scheduleIdle(gpipe, {1, 1}, {2, 2});
  EXPECT_NEAR(idle[0], 0.2, 1e-12);
  EXPECT_NEAR(idle[1], 0.2, 1e-12);
}

TEST(PipelineTest, TheFasterStageWaitsForTheSlowerOne) {
  // The second stage takes twice as long: the first rank, done with each
  // forward early, waits for every gradient; the second is rarely idle.
  std::vector<double> idle = scheduleIdle(oneFOneB(), {1, 2}, {1, 2});
  // Rank 1 starts at 1 and then works without a gap until 17; rank 0's
  // last backward runs from 17 to 18. Busy 16 and 8 of 18.
  EXPECT_NEAR(idle[1], 2.0 / 18, 1e-12);
  EXPECT_NEAR(idle[0], 10.0 / 18, 1e-12);
}

} // namespace
