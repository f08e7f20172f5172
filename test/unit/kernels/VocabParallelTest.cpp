//===- VocabParallelTest.cpp - Kernels over blocks of classes and rows ----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each test cuts a table or logits into the blocks the ranks of a tensor axis
// hold, runs the vocabulary-parallel kernels on every block (and gathers their
// statistics as the all-gather does) and compares with the kernel on the whole:
// the loss, gradient, accuracy and lookups a rank computes must be those of
// one rank.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" void dtk_fail(const char *message) {
  std::fprintf(stderr, "error: %s\n", message);
  std::exit(1);
}

namespace {

struct Problem {
  int64_t rows, classes, blocks;
  std::vector<float> logits;
  std::vector<int32_t> labels;

  int64_t block() const { return (classes + blocks - 1) / blocks; }

  /// Block b's logits, zero-padded to block() columns.
  std::vector<float> logitsOf(int64_t b) const {
    std::vector<float> out(size_t(rows * block()), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < block() && b * block() + j < classes; ++j)
        out[size_t(r * block() + j)] = logits[size_t(r * classes + b * block() + j)];
    return out;
  }

  /// Every block's dtk_class_stats_f32, as the all-gather lays them out.
  std::vector<float> gatheredStats() const {
    std::vector<float> all;
    for (int64_t b = 0; b < blocks; ++b) {
      std::vector<float> mine(size_t(4 * rows)), part = logitsOf(b);
      dtk_class_stats_f32(part.data(), labels.data(), mine.data(), rows,
                          block(), b * block(), classes);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    return all;
  }
};

Problem makeProblem(int64_t rows, int64_t classes, int64_t blocks,
                    unsigned seed, float scale = 3.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_int_distribution<int32_t> label(-1, int32_t(classes - 1));
  Problem p{rows, classes, blocks, {}, {}};
  for (int64_t i = 0; i < rows * classes; ++i)
    p.logits.push_back(normal(gen));
  for (int64_t r = 0; r < rows; ++r)
    p.labels.push_back(label(gen)); // -1: an ignored position
  return p;
}

class VocabParallel : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(VocabParallel, CrossEntropyOfBlocksIsTheWholeOnes) {
  auto [classes, blocks] = GetParam();
  Problem p = makeProblem(37, classes, blocks, 1);
  float whole = 0, parts = 0;
  dtk_cross_entropy_f32(p.logits.data(), p.labels.data(), &whole, p.rows,
                        p.classes);
  std::vector<float> stats = p.gatheredStats();
  dtk_cross_entropy_stats_f32(stats.data(), p.labels.data(), &parts, blocks,
                              p.rows);
  EXPECT_NEAR(parts, whole, 1e-5f * std::fabs(whole));
}

TEST_P(VocabParallel, GradientOfBlocksIsTheWholeOnes) {
  auto [classes, blocks] = GetParam();
  Problem p = makeProblem(29, classes, blocks, 2);
  float dloss = 0.75f;
  std::vector<float> whole(p.logits.size());
  dtk_cross_entropy_grad_f32(p.logits.data(), p.labels.data(), &dloss,
                             whole.data(), p.rows, p.classes);
  std::vector<float> stats = p.gatheredStats();
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<float> part = p.logitsOf(b), d(part.size(), -7.0f);
    dtk_cross_entropy_grad_shard_f32(part.data(), p.labels.data(),
                                     stats.data(), &dloss, d.data(), blocks,
                                     p.rows, p.block(), b * p.block(),
                                     p.classes);
    for (int64_t r = 0; r < p.rows; ++r)
      for (int64_t j = 0; j < p.block(); ++j) {
        int64_t c = b * p.block() + j;
        float got = d[size_t(r * p.block() + j)];
        if (c >= p.classes)
          EXPECT_EQ(got, 0.0f) << "padding column " << c;
        else
          EXPECT_NEAR(got, whole[size_t(r * p.classes + c)], 1e-6f)
              << "row " << r << " class " << c;
      }
  }
}

TEST_P(VocabParallel, ArgMaxOfBlocksIsTheWholeOnes) {
  auto [classes, blocks] = GetParam();
  // Coarse logits make ties between blocks; the first maximum must win.
  Problem p = makeProblem(200, classes, blocks, 3);
  for (float &x : p.logits)
    x = std::round(x / 2);
  for (int64_t r = 0; r < p.rows; ++r)
    if (p.labels[size_t(r)] >= 0) // labels at a maximum, often a tied one
      for (int64_t c = 0; c < p.classes; ++c)
        if (p.logits[size_t(r * p.classes + c)] >= 3) {
          p.labels[size_t(r)] = int32_t(c);
          break;
        }
  float whole = 0, parts = 0;
  dtk_count_correct_f32(p.logits.data(), p.labels.data(), &whole, p.rows,
                        p.classes);
  std::vector<float> stats = p.gatheredStats();
  dtk_count_correct_stats_f32(stats.data(), p.labels.data(), &parts, blocks,
                              p.rows);
  EXPECT_GT(whole, 10.0f);
  EXPECT_EQ(parts, whole);
}

TEST_P(VocabParallel, LookupsOfBlocksSumToTheWholeTables) {
  auto [rows, blocks] = GetParam();
  const int64_t width = 5, n = 40;
  int64_t block = (rows + blocks - 1) / blocks;
  std::mt19937 gen(4);
  std::uniform_int_distribution<int32_t> id(0, int32_t(rows - 1));
  std::vector<float> table(size_t(rows * width));
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = float(i) * 0.5f - 3.0f;
  std::vector<int32_t> ids(n);
  for (int32_t &x : ids)
    x = id(gen);
  std::vector<float> dout(size_t(n * width));
  for (size_t i = 0; i < dout.size(); ++i)
    dout[i] = std::sin(float(i));

  std::vector<float> whole(size_t(n * width)), wholeGrad(table.size());
  dtk_embedding_f32(table.data(), ids.data(), whole.data(), n, rows, width);
  dtk_embedding_grad_f32(ids.data(), dout.data(), wholeGrad.data(), n, rows,
                         width);
  std::vector<float> sum(whole.size(), 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<float> part(size_t(block * width), 0.0f), out(whole.size()),
        grad(part.size(), -1.0f);
    for (int64_t r = 0; r < block && b * block + r < rows; ++r)
      for (int64_t j = 0; j < width; ++j)
        part[size_t(r * width + j)] = table[size_t((b * block + r) * width + j)];
    dtk_embedding_shard_f32(part.data(), ids.data(), out.data(), n, b * block,
                            block, rows, width);
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += out[i];
    dtk_embedding_grad_shard_f32(ids.data(), dout.data(), grad.data(), n,
                                 b * block, block, rows, width);
    for (int64_t r = 0; r < block; ++r)
      for (int64_t j = 0; j < width; ++j) {
        int64_t row = b * block + r;
        float want = row < rows ? wholeGrad[size_t(row * width + j)] : 0.0f;
        EXPECT_EQ(grad[size_t(r * width + j)], want) << "row " << row;
      }
  }
  EXPECT_EQ(sum, whole);
}

// (classes or rows, blocks): even and uneven blocks, a last block of padding
// only (5 over 4 blocks of 2), one block.
INSTANTIATE_TEST_SUITE_P(Blocks, VocabParallel,
                         ::testing::Values(std::pair{256, 2}, std::pair{10, 4},
                                           std::pair{5, 4}, std::pair{7, 1}));

TEST(VocabParallelFaults, AnIdOutsideTheWholeTableIsReported) {
  std::vector<float> table(8), out(2);
  std::vector<int32_t> ids{1, 9};
  EXPECT_EXIT(dtk_embedding_shard_f32(table.data(), ids.data(), out.data(), 2,
                                      4, 4, 8, 1),
              ::testing::ExitedWithCode(1),
              "token id 9 is outside the embedding table of 8 rows");
}

TEST(VocabParallelFaults, ALabelOutsideTheClassesIsReported) {
  std::vector<float> logits(4), stats(8);
  std::vector<int32_t> labels{0, 8};
  EXPECT_EXIT(dtk_class_stats_f32(logits.data(), labels.data(), stats.data(),
                                  2, 2, 2, 8),
              ::testing::ExitedWithCode(1),
              "label 8 is out of range for a model with 8 output classes");
}

} // namespace
