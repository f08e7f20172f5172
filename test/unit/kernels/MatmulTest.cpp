//===- MatmulTest.cpp - the product kernels against their definition ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_matmul_f32 and dtk_matmul_bias_f32 fill C themselves and let BLAS
// accumulate into it: whatever C held before must not leak into the result
// (it starts as NaN here), for every transpose and a batch of two, and the
// bias lands on every row of every matrix.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include "RandomVector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

/// op(A) op(B) (+ bias) in double, by the definition.
std::vector<double> reference(const std::vector<float> &a,
                              const std::vector<float> &b, const float *bias,
                              int64_t batch, int64_t m, int64_t n, int64_t k,
                              bool ta, bool tb) {
  std::vector<double> c(size_t(batch * m * n));
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = bias ? bias[j] : 0.0;
        for (int64_t l = 0; l < k; ++l) {
          double x = a[p * m * k + (ta ? l * m + i : i * k + l)];
          double y = b[p * k * n + (tb ? j * k + l : l * n + j)];
          s += x * y;
        }
        c[(p * m + i) * n + j] = s;
      }
  return c;
}

class MatmulTest : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(MatmulTest, FillsCAndMatchesTheDefinition) {
  auto [ta, tb, threads] = GetParam();
  const int64_t batch = 2, m = 37, n = 53, k = 29;
  std::vector<float> a = randomVector(size_t(batch * m * k), 1);
  std::vector<float> b = randomVector(size_t(batch * k * n), 2);
  std::vector<float> bias = randomVector(size_t(n), 3);
  dtk_set_threads(threads);
  for (bool withBias : {false, true}) {
    std::vector<float> c(size_t(batch * m * n),
                         std::numeric_limits<float>::quiet_NaN());
    if (withBias)
      dtk_matmul_bias_f32(a.data(), b.data(), bias.data(), c.data(), batch, m,
                          n, k, ta, tb);
    else
      dtk_matmul_f32(a.data(), b.data(), c.data(), batch, m, n, k, ta, tb);
    std::vector<double> want = reference(
        a, b, withBias ? bias.data() : nullptr, batch, m, n, k, ta, tb);
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_NEAR(c[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
          << "element " << i << (withBias ? " with" : " without")
          << " the bias";
  }
  dtk_set_threads(1);
}

INSTANTIATE_TEST_SUITE_P(TransposesAndThreads, MatmulTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Bool(),
                                            ::testing::Values(1, 2)));

} // namespace
