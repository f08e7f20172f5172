//===- ConvTest.cpp - the convolution kernels against their definition ----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_conv2d_f32 and its two gradients against the sums that define them, in
// double, over shapes that take each of the kernels' paths and their edges:
// stride 1 (the direct path, whose input gradient is a flipped convolution)
// with padding, dilation, groups and non-square windows; strides above 1 and
// padding beyond a dilated window (the unrolled path); channel counts and
// position counts that fill no whole register tile; one sample and many. The
// outputs start as NaN so nothing the kernels skip goes unseen, and two
// threads give the same bits as one.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include "RandomVector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <vector>

namespace {

struct Shape {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;

  int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
};

std::ostream &operator<<(std::ostream &os, const Shape &s) {
  return os << "n" << s.n << " c" << s.c << " " << s.h << "x" << s.w << " o"
            << s.o << " k" << s.kh << "x" << s.kw << " s" << s.sh << "x" << s.sw
            << " p" << s.ph << "x" << s.pw << " d" << s.dh << "x" << s.dw
            << " g" << s.groups;
}

/// The input element that tap (u, t) of output (i, j) reads, or -1 for
/// padding.
int64_t source(const Shape &s, int64_t i, int64_t j, int64_t u, int64_t t) {
  int64_t y = i * s.sh - s.ph + u * s.dh, x = j * s.sw - s.pw + t * s.dw;
  return y < 0 || y >= s.h || x < 0 || x >= s.w ? -1 : y * s.w + x;
}

struct Reference {
  std::vector<double> y, dx, dw;
  /// Each element's sum of its terms' magnitudes: how far f32 rounding may
  /// move it (a 512-channel input gradient sums 4608 terms).
  std::vector<double> ySize, dxSize, dwSize;
};

/// y, and the gradients of sum(y * dy), by the definition.
Reference reference(const Shape &s, const std::vector<float> &x,
                    const std::vector<float> &w, const std::vector<float> &dy) {
  int64_t oh = s.oh(), ow = s.ow(), cg = s.c / s.groups, og = s.o / s.groups;
  Reference r{std::vector<double>(size_t(s.n * s.o * oh * ow)),
              std::vector<double>(size_t(s.n * s.c * s.h * s.w)),
              std::vector<double>(size_t(s.o * cg * s.kh * s.kw)),
              {},
              {},
              {}};
  r.ySize.resize(r.y.size());
  r.dxSize.resize(r.dx.size());
  r.dwSize.resize(r.dw.size());
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o) {
      int64_t g = o / og;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t out = ((n * s.o + o) * oh + i) * ow + j;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < s.kh; ++u)
              for (int64_t t = 0; t < s.kw; ++t) {
                int64_t at = source(s, i, j, u, t);
                if (at < 0)
                  continue;
                int64_t in = (n * s.c + g * cg + ci) * s.h * s.w + at;
                int64_t wi = ((o * cg + ci) * s.kh + u) * s.kw + t;
                double wx = double(w[wi]) * x[in], wd = double(w[wi]) * dy[out],
                       xd = double(x[in]) * dy[out];
                r.y[out] += wx;
                r.dx[in] += wd;
                r.dw[wi] += xd;
                r.ySize[out] += std::fabs(wx);
                r.dxSize[in] += std::fabs(wd);
                r.dwSize[wi] += std::fabs(xd);
              }
        }
    }
  return r;
}

/// Within f32 rounding of a sum: a few ulps of its terms' magnitudes (a
/// misplaced term moves an element by a whole term, far more).
void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                const std::vector<double> &size, const char *what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-6 * size[i] + 1e-6)
        << what << " element " << i;
}

struct Outputs {
  std::vector<float> y, dx, dw;
};

Outputs run(const Shape &s, const std::vector<float> &x,
            const std::vector<float> &w, const std::vector<float> &dy) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Outputs out{std::vector<float>(dy.size(), nan),
              std::vector<float>(x.size(), nan),
              std::vector<float>(w.size(), nan)};
  int64_t oh = s.oh(), ow = s.ow();
  dtk_conv2d_f32(x.data(), w.data(), out.y.data(), s.n, s.c, s.h, s.w, s.o,
                 s.kh, s.kw, oh, ow, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw,
                 s.groups);
  dtk_conv2d_input_grad_f32(dy.data(), w.data(), out.dx.data(), s.n, s.c, s.h,
                            s.w, s.o, s.kh, s.kw, oh, ow, s.sh, s.sw, s.ph,
                            s.pw, s.dh, s.dw, s.groups);
  dtk_conv2d_weight_grad_f32(x.data(), dy.data(), out.dw.data(), s.n, s.c, s.h,
                             s.w, s.o, s.kh, s.kw, oh, ow, s.sh, s.sw, s.ph,
                             s.pw, s.dh, s.dw, s.groups);
  return out;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ConvTest : public ::testing::TestWithParam<Shape> {};

TEST_P(ConvTest, MatchesTheDefinitionOnAnyThreadCount) {
  const Shape s = GetParam();
  std::vector<float> x = randomVector(size_t(s.n * s.c * s.h * s.w), 1);
  std::vector<float> w =
      randomVector(size_t(s.o * (s.c / s.groups) * s.kh * s.kw), 2, 0.3f);
  std::vector<float> dy = randomVector(size_t(s.n * s.o * s.oh() * s.ow()), 3);
  Reference want = reference(s, x, w, dy);

  dtk_set_threads(1);
  Outputs one = run(s, x, w, dy);
  expectNear(one.y, want.y, want.ySize, "y");
  expectNear(one.dx, want.dx, want.dxSize, "dx");
  expectNear(one.dw, want.dw, want.dwSize, "dw");

  dtk_set_threads(2);
  Outputs two = run(s, x, w, dy);
  dtk_set_threads(1);
  EXPECT_TRUE(sameBits(one.y, two.y)) << "y differs on two threads";
  EXPECT_TRUE(sameBits(one.dx, two.dx)) << "dx differs on two threads";
  EXPECT_TRUE(sameBits(one.dw, two.dw)) << "dw differs on two threads";
}

INSTANTIATE_TEST_SUITE_P(
    Paths, ConvTest,
    ::testing::Values(
        // n  c   h   w   o kh kw sh sw ph pw dh dw groups
        Shape{4, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1,
              1},                                           // cnn_fashion block
        Shape{3, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1}, // its stem
        Shape{3, 16, 14, 14, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1}, // its strided conv
        Shape{2, 3, 9, 7, 5, 3, 2, 1, 1, 1, 0, 1, 2, 1},   // odd sizes, dilated
        Shape{2, 4, 6, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2},   // groups, strided
        Shape{2, 6, 5, 8, 9, 1, 3, 1, 1, 0, 1, 1, 1, 3},   // groups, direct
        Shape{1, 3, 11, 10, 7, 7, 7, 2, 2, 3, 3, 1, 1, 1}, // a ResNet stem
        Shape{2, 5, 6, 6, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1},   // 1x1 downsample
        Shape{2, 2, 5, 5, 3, 3, 3, 1, 1, 3, 3, 1, 1, 1},   // padding > window
        Shape{1, 2, 4, 40, 3, 2, 2, 1, 3, 0, 1, 1, 1, 1}, // wide, mixed strides
        Shape{9, 2, 3, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // tiny planes
        // Past 128 input channels a group's weight gradient is BLAS's.
        Shape{2, 264, 5, 4, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},
        // Weight gradients staged in two chunks: 9 + 8 samples unrolled,
        // 12 + 12 read directly.
        Shape{17, 64, 64, 64, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1},
        Shape{24, 8, 24, 24, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1}));

} // namespace
