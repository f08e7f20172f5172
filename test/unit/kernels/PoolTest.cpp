//===- PoolTest.cpp - max pooling against its definition ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_max_pool2d_f32 and its gradient take, as PyTorch does, the first
// largest input of each window in row-major order, skip padding, and let NaN
// win. The kernels take windows inside the image by a shorter path than the
// clipped ones at the edges; both must agree with the definition, here on
// inputs with ties (small integers) and NaNs, over overlapping, padded,
// strided and non-square windows, and 2x2 windows that tile the plane (a
// path of their own).
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

struct Pool {
  int64_t planes, h, w, kh, kw, sh, sw, ph, pw;

  int64_t oh() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - kw) / sw + 1; }
};

/// The chosen input of window (i, j), or -1.
int64_t choice(const Pool &p, const float *plane, int64_t i, int64_t j) {
  int64_t best = -1;
  for (int64_t u = 0; u < p.kh; ++u)
    for (int64_t t = 0; t < p.kw; ++t) {
      int64_t y = i * p.sh - p.ph + u, x = j * p.sw - p.pw + t;
      if (y < 0 || y >= p.h || x < 0 || x >= p.w)
        continue;
      float f = plane[y * p.w + x];
      if (best < 0 || (std::isnan(f) && !std::isnan(plane[best])) ||
          (!std::isnan(plane[best]) && f > plane[best]))
        best = y * p.w + x;
    }
  return best;
}

class PoolTest : public ::testing::TestWithParam<Pool> {};

TEST_P(PoolTest, ChoosesAsPyTorchDoes) {
  const Pool p = GetParam();
  int64_t oh = p.oh(), ow = p.ow();
  std::vector<float> x(size_t(p.planes * p.h * p.w));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float((i * 7919 / 3) % 3); // a third of neighbours tie
  // NaNs in the second plane: alone, and two to a 2x2 window, across a
  // window's rows (top right and bottom left), and along its bottom row.
  for (int64_t at : {p.w + 1, int64_t(3), 3 * p.w + 2, int64_t(5), p.w + 4,
                     3 * p.w, 3 * p.w + 1})
    if (at < p.h * p.w)
      x[size_t(p.h * p.w + at)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dy(size_t(p.planes * oh * ow));
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = float(i % 13) - 6.0f;

  std::vector<float> y(dy.size()), dx(x.size());
  dtk_max_pool2d_f32(x.data(), y.data(), p.planes, p.h, p.w, oh, ow, p.kh,
                     p.kw, p.sh, p.sw, p.ph, p.pw);
  dtk_max_pool2d_grad_f32(x.data(), dy.data(), dx.data(), p.planes, p.h, p.w,
                          oh, ow, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw);

  std::vector<float> wantDx(x.size(), 0.0f);
  for (int64_t q = 0; q < p.planes; ++q)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        const float *plane = x.data() + q * p.h * p.w;
        int64_t at = choice(p, plane, i, j);
        float want = at < 0 ? -INFINITY : plane[at];
        float got = y[size_t((q * oh + i) * ow + j)];
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got)) << "window " << q << "," << i << "," << j;
        else
          EXPECT_EQ(got, want) << "window " << q << "," << i << "," << j;
        if (at >= 0)
          wantDx[size_t(q * p.h * p.w + at)] += dy[size_t((q * oh + i) * ow + j)];
      }
  EXPECT_EQ(0, std::memcmp(dx.data(), wantDx.data(), dx.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(
    Windows, PoolTest,
    ::testing::Values(
        //   planes h   w  kh kw sh sw ph pw
        Pool{3, 28, 28, 2, 2, 2, 2, 0, 0}, // cnn_fashion's (2x2 tiling)
        Pool{2, 6, 10, 2, 2, 2, 2, 0, 0},  // 2x2 tiling, not square
        Pool{2, 7, 9, 2, 2, 2, 2, 0, 0},   // 2x2, a row and column left over
        Pool{3, 11, 12, 3, 3, 2, 2, 1, 1}, // ResNet's, overlapping and padded
        Pool{2, 7, 9, 2, 3, 1, 2, 1, 0},   // non-square, mixed strides
        Pool{2, 5, 5, 5, 5, 1, 1, 2, 2})); // windows wider than the inside

} // namespace
