//===- RngTest.cpp - Tests of the counter-based generator -----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Pins the generator to the published splitmix64 and FNV-1a values (any
// change would silently change every initialisation and data order) and
// checks the distributions it derives.
//
//===----------------------------------------------------------------------===//

#include "dtrt/rng.h"

#include <cmath>
#include <gtest/gtest.h>
#include <vector>

using namespace dtrt;

TEST(Rng, MatchesReferenceSplitMix64) {
  // The first outputs of splitmix64 seeded with 0 (Vigna's reference code).
  EXPECT_EQ(randomBits(0, 0), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(randomBits(0, 1), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(randomBits(0, 2), 0x06C45D188009454FULL);
}

TEST(Rng, MatchesReferenceFnv1a) {
  EXPECT_EQ(fnv1a64(""), 0xCBF29CE484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xAF63DC4C8601EC8CULL);
}

TEST(Rng, SequentialGeneratorEqualsCounterStream) {
  SplitMix64 rng(12345);
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_EQ(rng.next(), randomBits(12345, i));
}

TEST(Rng, StreamKeysSeparateSeedsAndNames) {
  EXPECT_NE(streamKey(1, "fc1.weight"), streamKey(2, "fc1.weight"));
  EXPECT_NE(streamKey(1, "fc1.weight"), streamKey(1, "fc1.bias"));
  EXPECT_EQ(streamKey(1, "fc1.weight"), streamKey(1, "fc1.weight"));
}

TEST(Rng, UniformIsInUnitIntervalWithMeanOneHalf) {
  uint64_t key = streamKey(7, "u");
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double u = randomUniform(key, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
}

TEST(Rng, NormalHasZeroMeanAndUnitVariance) {
  uint64_t key = streamKey(7, "n");
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = randomNormal(key, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sq += z * z;
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sq / n - mean * mean, 1.0, 0.02);
}

TEST(Rng, NormalValueDependsOnlyOnIndex) {
  uint64_t key = streamKey(3, "x");
  double forward5 = 0;
  for (int i = 0; i <= 5; ++i)
    forward5 = randomNormal(key, i);
  EXPECT_EQ(randomNormal(key, 5), forward5);
}

TEST(Rng, BoundedDrawsAreInRangeAndUniform) {
  SplitMix64 rng(99);
  std::vector<int> counts(6);
  const int n = 60000;
  for (int i = 0; i < n; ++i) {
    uint64_t v = rng.below(6);
    ASSERT_LT(v, 6u);
    ++counts[v];
  }
  // Chi-square with 5 degrees of freedom: 20.5 is the 0.999 quantile.
  double chi2 = 0;
  for (int c : counts)
    chi2 += (c - n / 6.0) * (c - n / 6.0) / (n / 6.0);
  EXPECT_LT(chi2, 20.5);
  EXPECT_EQ(rng.below(1), 0u);
}
