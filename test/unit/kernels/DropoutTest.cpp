//===- DropoutTest.cpp - Philox and the dropout kernel --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Philox4x32-10 against the published known-answer vectors (Random123's
// kat_vectors), then dtk_dropout_f32: it drops the share it should, scales
// what it keeps, and draws a block of a tensor, or one micro-batch of a step,
// exactly as the whole would.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"
#include "dtk/philox.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

TEST(Philox, KnownAnswers) {
  struct Case {
    uint32_t counter[4], key[2], out[4];
  } cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case &c : cases) {
    uint32_t out[4];
    dtk_philox4x32(c.counter, c.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], c.out[i]) << "word " << i;
  }
}

/// Dropout of `x`, a [n0, n1, n2] block starting at `first` of a tensor of
/// `global` shape, in micro-batch `micro`: the runs the compiler would pass.
std::vector<float> dropBlock(const std::vector<float> &x, const int64_t (&n)[3],
                             const int64_t (&global)[3],
                             const int64_t (&first)[3], int64_t micro,
                             float p) {
  int64_t stride[3] = {global[1] * global[2], global[2], 1};
  int64_t base = micro * global[0] * global[1] * global[2];
  for (int d = 0; d < 3; ++d)
    base += first[d] * stride[d];
  std::vector<float> y(x.size());
  // Every dimension its own run (merging whole ones is an optimisation).
  dtk_dropout_f32(x.data(), y.data(), 1, n[0], n[1], n[2], 0, stride[0],
                  stride[1], stride[2], base, 42, 7, 3, p);
  return y;
}

TEST(Dropout, DropsItsShareAndScalesTheRest) {
  std::vector<float> x(1 << 20, 1.0f), y(x.size());
  float p = 0.3f;
  dtk_dropout_f32(x.data(), y.data(), 1, 1, 1, int64_t(x.size()), 0, 0, 0, 1,
                  0, 42, 0, 0, p);
  int64_t dropped = 0;
  for (float v : y) {
    if (v == 0.0f)
      ++dropped;
    else
      ASSERT_EQ(v, 1.0f / (1.0f - p));
  }
  // 1M Bernoulli(0.3) draws: the standard deviation of the share is 4.5e-4.
  EXPECT_NEAR(double(dropped) / double(x.size()), p, 3e-3);
  // Another step, site or seed draws other masks.
  std::vector<float> other(x.size());
  dtk_dropout_f32(x.data(), other.data(), 1, 1, 1, int64_t(x.size()), 0, 0, 0,
                  1, 0, 42, 0, 1, p);
  EXPECT_NE(y, other);
  // p = 0 keeps everything as it is.
  dtk_dropout_f32(x.data(), y.data(), 1, 1, 1, int64_t(x.size()), 0, 0, 0, 1,
                  0, 42, 0, 0, 0.0f);
  EXPECT_EQ(y, x);
}

TEST(Dropout, BlocksAndMicroBatchesDrawWhatTheWholeWould) {
  const int64_t global[3] = {6, 10, 12};
  std::vector<float> whole(6 * 10 * 12);
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = float(i) + 1.0f;
  std::vector<float> want =
      dropBlock(whole, {6, 10, 12}, global, {0, 0, 0}, 0, 0.5f);
  // Blocks of 2 x 5 x 4, as a dp x tp x sp split would leave a rank.
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t first[3] = {2 * a, 5 * b, 4 * c};
        std::vector<float> block(2 * 5 * 4);
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 5; ++j)
            for (int64_t k = 0; k < 4; ++k)
              block[(i * 5 + j) * 4 + k] =
                  whole[((first[0] + i) * 10 + first[1] + j) * 12 + first[2] +
                        k];
        std::vector<float> got =
            dropBlock(block, {2, 5, 4}, global, first, 0, 0.5f);
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 5; ++j)
            for (int64_t k = 0; k < 4; ++k)
              ASSERT_EQ(got[(i * 5 + j) * 4 + k],
                        want[((first[0] + i) * 10 + first[1] + j) * 12 +
                             first[2] + k])
                  << "block " << a << b << c;
      }
  // Micro-batch 1 of two [3, 10, 12] micro-batches is rows 3-5 of the step.
  std::vector<float> rows(whole.begin() + 3 * 120, whole.end());
  std::vector<float> got = dropBlock(rows, {3, 10, 12}, {3, 10, 12},
                                     {0, 0, 0}, 1, 0.5f);
  EXPECT_EQ(got, std::vector<float>(want.begin() + 3 * 120, want.end()));
}

} // namespace
