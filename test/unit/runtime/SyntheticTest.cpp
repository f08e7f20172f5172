//===- SyntheticTest.cpp - Tests of the synthetic source ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A synthetic sample is a pure function of (seed, role, index); train and
// eval with one seed share the classes but not the noise.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/synthetic.h"

#include "TestUtil.h"

using namespace dtrt;

namespace {

DataSpec spec(uint64_t seed) {
  DataSpec s;
  s.kind = DataKind::Synthetic;
  s.features = 8;
  s.classes = 3;
  s.count = 100;
  s.seed = seed;
  return s;
}

std::vector<float> x(const DataSource &src, int64_t i) {
  std::vector<float> v(8);
  src.read(0, i, v.data());
  return v;
}

} // namespace

TEST(Synthetic, IsDeterministicAndIndexAddressed) {
  auto a = openDataSource(spec(5), "train");
  auto b = openDataSource(spec(5), "train");
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*a)->size(), 100);
  // Reading in another order gives the same samples.
  std::vector<float> late = x(**b, 77);
  EXPECT_EQ(x(**a, 77), late);
  EXPECT_EQ(x(**a, 3), x(**b, 3));
  EXPECT_NE(x(**a, 3), x(**a, 4));
  int32_t y;
  (*a)->read(1, 77, &y);
  EXPECT_EQ(y, 77 % 3);
}

TEST(Synthetic, SeedsAndRolesDiffer) {
  auto train = openDataSource(spec(5), "train");
  auto eval = openDataSource(spec(5), "eval");
  auto other = openDataSource(spec(6), "train");
  EXPECT_NE(x(**train, 0), x(**eval, 0));
  EXPECT_NE(x(**train, 0), x(**other, 0));
}

TEST(Synthetic, ClassesAreSeparableAndSharedAcrossRoles) {
  // The mean of many samples of a class approaches its centroid, the same
  // for the train and eval roles.
  DataSpec s = spec(5);
  s.count = 3000;
  auto train = openDataSource(s, "train");
  auto eval = openDataSource(s, "eval");
  std::vector<double> meanTrain(8), meanEval(8);
  for (int64_t i = 0; i < 3000; i += 3) {
    std::vector<float> a = x(**train, i), b = x(**eval, i);
    for (int f = 0; f < 8; ++f) {
      meanTrain[f] += a[f] / 1000.0;
      meanEval[f] += b[f] / 1000.0;
    }
  }
  for (int f = 0; f < 8; ++f)
    EXPECT_NEAR(meanTrain[f], meanEval[f], 0.15);
}
