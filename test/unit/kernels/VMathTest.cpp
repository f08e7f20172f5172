//===- VMathTest.cpp - the kernels' vectorised exp ------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_exp8 (kernels/cpu/vmath.h) stands in for expf in every softmax of the
// CPU kernels: within 1 ulp of exp over the range where expf is normal, 0
// below it (a masked score's exp(-inf) included), and NaN for NaN.
//
//===----------------------------------------------------------------------===//

#include "vmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

TEST(VMathTest, ExpIsWithinOneUlpWhereExpfIsNormal) {
  double worst = 0;
  float where = 0;
  for (float x = -87.3f; x < 88.3f; x += 0.000917f) {
    dtk_v8 v = dtk_splat8(x);
    v[5] = -x; // lanes are independent
    dtk_v8 e = dtk_exp8(v);
    for (int lane : {0, 5}) {
      float in = lane ? -x : x;
      double want = std::exp(double(in));
      if (want < std::numeric_limits<float>::min() ||
          want > std::numeric_limits<float>::max())
        continue;
      double ulps = std::abs(e[lane] - want) / (want * 0x1p-23);
      if (ulps > worst)
        worst = ulps, where = in;
    }
  }
  EXPECT_LT(worst, 1.0) << "at x = " << where;
}

TEST(VMathTest, ExpOfTheMaskedAndTheUndefined) {
  dtk_v8 v = dtk_splat8(0.0f);
  v[1] = -INFINITY;
  v[2] = -100.0f;
  v[3] = NAN;
  v[4] = 1.0f;
  dtk_v8 e = dtk_exp8(v);
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_EQ(e[2], 0.0f);
  EXPECT_TRUE(std::isnan(e[3]));
  EXPECT_NEAR(e[4], 2.7182817f, 3e-7f);
}

} // namespace
