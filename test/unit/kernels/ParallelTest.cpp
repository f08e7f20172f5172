//===- ParallelTest.cpp - the kernels on one thread and on several --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_parallel_for splits a kernel's rows, columns or slices over the pool;
// none of its kernels shares a reduction across ranges, so every thread count
// must give the same bits as one thread.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include "RandomVector.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <vector>

namespace {

/// Runs `kernel` on 1 thread and on `threads`, and expects equal bits in
/// every output it writes. OpenBLAS runs on one thread throughout, as it does
/// in a program run with --threads 1 and inside the pool's ranges (where
/// attention puts it), since its products may sum in another order on more.
template <typename Kernel>
void expectSameBits(Kernel kernel, int threads) {
  openblas_set_num_threads(1);
  dtk_set_threads(1);
  std::vector<std::vector<float>> one = kernel();
  dtk_set_threads(threads);
  std::vector<std::vector<float>> many = kernel();
  dtk_set_threads(1);
  ASSERT_EQ(one.size(), many.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].size(), many[i].size());
    EXPECT_EQ(0, std::memcmp(one[i].data(), many[i].data(),
                             one[i].size() * sizeof(float)))
        << "output " << i << " differs on " << threads << " threads";
  }
}

TEST(ParallelTest, EveryRangeRunsOnceAndTheCallerWaitsForAll) {
  for (int threads : {1, 2, 3, 4}) {
    dtk_set_threads(threads);
    EXPECT_EQ(dtk_threads(), threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 4099}) {
      std::vector<std::atomic<int>> hits(size_t(n > 0 ? n : 1));
      dtk_parallel_for(
          n, 4,
          [](void *ctx, int64_t begin, int64_t end) {
            auto *h = static_cast<std::atomic<int> *>(ctx);
            for (int64_t i = begin; i < end; ++i)
              h[i].fetch_add(1);
          },
          hits.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[size_t(i)].load(), 1) << "n=" << n << " i=" << i;
    }
  }
  dtk_set_threads(1);
}

TEST(ParallelTest, ACallFromInsideARangeRunsSerially) {
  dtk_set_threads(2);
  struct Counts {
    std::atomic<int> inner{0};
  } counts;
  dtk_parallel_for(
      64, 1,
      [](void *ctx, int64_t begin, int64_t end) {
        dtk_parallel_for(
            end - begin, 1,
            [](void *c, int64_t b, int64_t e) {
              static_cast<Counts *>(c)->inner.fetch_add(int(e - b));
            },
            ctx);
      },
      &counts);
  EXPECT_EQ(counts.inner.load(), 64);
  dtk_set_threads(1);
}

TEST(ParallelTest, LayerNormAndItsGradientsAreTheSameOnAnyThreadCount) {
  const int64_t rows = 512, cols = 96;
  std::vector<float> x = randomVector(rows * cols, 1), w = randomVector(cols, 2),
                     b = randomVector(cols, 3), dy = randomVector(rows * cols, 4);
  for (int threads : {2, 3})
    expectSameBits(
        [&] {
          std::vector<float> y(rows * cols), dx(rows * cols), dw(cols),
              db(cols);
          dtk_layer_norm_f32(x.data(), w.data(), b.data(), y.data(), rows, cols,
                             1e-5f);
          dtk_layer_norm_grad_f32(x.data(), w.data(), dy.data(), dx.data(),
                                  dw.data(), db.data(), rows, cols, 1e-5f);
          return std::vector<std::vector<float>>{y, dx, dw, db};
        },
        threads);
}

TEST(ParallelTest, EmbeddingGradientIsTheSameOnAnyThreadCount) {
  // 3000 ids into 2500 rows of 96: most rows hit once or not at all, a few
  // many times (their sums' order is the ids' order on any thread count).
  const int64_t n = 3000, count = 2500, width = 96;
  std::vector<float> dout = randomVector(n * width, 10);
  std::vector<int32_t> ids(n);
  std::mt19937 rng(11);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = i % 7 == 0 ? int32_t(rng() % 5) : int32_t(rng() % count);
  for (int threads : {2, 3})
    expectSameBits(
        [&] {
          std::vector<float> dtable(count * width, 42.0f);
          dtk_embedding_grad_f32(ids.data(), dout.data(), dtable.data(), n,
                                 count, width);
          return std::vector<std::vector<float>>{dtable};
        },
        threads);
  // And it is the scatter-add it stands for.
  std::vector<double> want(count * width, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < width; ++j)
      want[ids[i] * width + j] += dout[i * width + j];
  std::vector<float> got(count * width, 42.0f);
  dtk_set_threads(2);
  dtk_embedding_grad_f32(ids.data(), dout.data(), got.data(), n, count, width);
  dtk_set_threads(1);
  for (int64_t e = 0; e < count * width; ++e)
    ASSERT_NEAR(got[e], want[e], 1e-5) << "element " << e;
}

TEST(ParallelTest, CrossEntropyAndItsGradientAreTheSameOnAnyThreadCount) {
  const int64_t rows = 700, classes = 50;
  std::vector<float> logits = randomVector(rows * classes, 5);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[size_t(r)] = r % 13 == 0 ? -1 : int32_t((r * 7) % classes);
  for (int threads : {2, 3})
    expectSameBits(
        [&] {
          std::vector<float> loss(1), dloss{1.5f}, dlogits(rows * classes);
          dtk_cross_entropy_f32(logits.data(), labels.data(), loss.data(), rows,
                                classes);
          dtk_cross_entropy_grad_f32(logits.data(), labels.data(), dloss.data(),
                                     dlogits.data(), rows, classes);
          return std::vector<std::vector<float>>{loss, dlogits};
        },
        threads);
}

TEST(ParallelTest, AttentionAndItsGradientsAreTheSameOnAnyThreadCount) {
  // gpt_tiny's shapes (128 slices of t = 128, d = 32), and an odd count of
  // short slices.
  struct Shape {
    int64_t slices, t, d;
  };
  for (Shape shape : {Shape{128, 128, 32}, Shape{13, 40, 16}}) {
    const int64_t slices = shape.slices, t = shape.t, d = shape.d,
                  n = slices * t * d;
    std::vector<float> q = randomVector(n, 6), k = randomVector(n, 7),
                       v = randomVector(n, 8), dout = randomVector(n, 9);
    for (int32_t causal : {0, 1})
      for (int threads : {2, 3})
        expectSameBits(
            [&] {
              std::vector<float> o(n), lse(slices * t), dq(n), dk(n), dv(n);
              dtk_attention_f32(q.data(), k.data(), v.data(), o.data(),
                                lse.data(), slices, t, d, causal);
              dtk_attention_grad_f32(q.data(), k.data(), v.data(), o.data(),
                                     lse.data(), dout.data(), dq.data(),
                                     dk.data(), dv.data(), slices, t, d,
                                     causal);
              return std::vector<std::vector<float>>{o, lse, dq, dk, dv};
            },
            threads);
  }
}

} // namespace
