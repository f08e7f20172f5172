//===- AttentionTest.cpp - the CPU attention against its definition -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_attention_f32 and its gradient (kernels/cpu/attention.c) compute in
// panels, blocks and padded tiles; here they are checked against the formula
// computed plainly in double precision: S = Q K^T / sqrt(d), P = softmax(S)
// (causal or not), O = P V, and the gradients of O against dO. The shapes
// cover sequences and head sizes that are not multiples of the kernel's
// panels (16 rows), blocks (64 keys) or tiles (32), and a single token.
//
//===----------------------------------------------------------------------===//

#include "dtk/kernels.h"

#include "RandomVector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

struct Shape {
  int64_t slices, t, d;
};

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

/// The attention of every slice, and its gradients against `dout`.
Reference reference(const std::vector<float> &q, const std::vector<float> &k,
                    const std::vector<float> &v, const std::vector<float> &dout,
                    Shape s, bool causal) {
  const int64_t t = s.t, d = s.d, n = s.slices * t * d;
  const double scale = 1.0 / std::sqrt(double(d));
  Reference r{std::vector<double>(n), std::vector<double>(s.slices * t),
              std::vector<double>(n), std::vector<double>(n),
              std::vector<double>(n)};
  std::vector<double> p(t * t), ds(t * t);
  for (int64_t sl = 0; sl < s.slices; ++sl) {
    const int64_t base = sl * t * d;
    auto at = [&](const std::vector<float> &x, int64_t i, int64_t c) {
      return double(x[base + i * d + c]);
    };
    for (int64_t i = 0; i < t; ++i) {
      const int64_t visible = causal ? i + 1 : t;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double x = 0;
        for (int64_t c = 0; c < d; ++c)
          x += at(q, i, c) * at(k, j, c);
        p[i * t + j] = x * scale;
        mx = std::max(mx, p[i * t + j]);
      }
      for (int64_t j = 0; j < t; ++j) {
        p[i * t + j] = j < visible ? std::exp(p[i * t + j] - mx) : 0.0;
        sum += p[i * t + j];
      }
      for (int64_t j = 0; j < t; ++j)
        p[i * t + j] /= sum;
      r.lse[sl * t + i] = mx + std::log(sum);
      for (int64_t c = 0; c < d; ++c) {
        double x = 0;
        for (int64_t j = 0; j < t; ++j)
          x += p[i * t + j] * at(v, j, c);
        r.o[base + i * d + c] = x;
      }
      // dS = P * (dP - rowsum(P * dP)), dP = dO V^T
      double dot = 0;
      for (int64_t j = 0; j < t; ++j) {
        double x = 0;
        for (int64_t c = 0; c < d; ++c)
          x += at(dout, i, c) * at(v, j, c);
        ds[i * t + j] = x;
        dot += x * p[i * t + j];
      }
      for (int64_t j = 0; j < t; ++j)
        ds[i * t + j] = p[i * t + j] * (ds[i * t + j] - dot);
    }
    for (int64_t i = 0; i < t; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double dq = 0, dk = 0, dv = 0;
        for (int64_t j = 0; j < t; ++j) {
          dq += ds[i * t + j] * at(k, j, c);
          dk += ds[j * t + i] * at(q, j, c);
          dv += p[j * t + i] * at(dout, j, c);
        }
        r.dq[base + i * d + c] = dq * scale;
        r.dk[base + i * d + c] = dk * scale;
        r.dv[base + i * d + c] = dv;
      }
  }
  return r;
}

/// The largest difference, relative to the largest reference value.
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &want) {
  double err = 0, top = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - want[i]));
    top = std::max(top, std::abs(want[i]));
  }
  return err / std::max(top, 1e-30);
}

TEST(AttentionTest, MatchesTheFormulaAndItsGradients) {
  for (Shape s : {Shape{3, 1, 1}, Shape{2, 5, 3}, Shape{4, 17, 8},
                  Shape{3, 40, 16}, Shape{2, 33, 40}, Shape{2, 128, 32},
                  Shape{1, 100, 64}, Shape{1, 200, 72}})
    for (bool causal : {false, true}) {
      const int64_t n = s.slices * s.t * s.d;
      // Scores of a few units, so that the softmax is far from uniform.
      std::vector<float> q = randomVector(n, 1, 1.5f),
                         k = randomVector(n, 2, 1.5f),
                         v = randomVector(n, 3, 1.0f),
                         dout = randomVector(n, 4, 1.0f);
      std::vector<float> o(n), lse(s.slices * s.t), dq(n), dk(n), dv(n);
      dtk_attention_f32(q.data(), k.data(), v.data(), o.data(), lse.data(),
                        s.slices, s.t, s.d, causal);
      // The gradient from the forward's own O and log-sum-exp, as a
      // program passes them.
      dtk_attention_grad_f32(q.data(), k.data(), v.data(), o.data(), lse.data(),
                             dout.data(), dq.data(), dk.data(), dv.data(),
                             s.slices, s.t, s.d, causal);
      Reference want = reference(q, k, v, dout, s, causal);
      std::string at = "slices " + std::to_string(s.slices) + ", t " +
                       std::to_string(s.t) + ", d " + std::to_string(s.d) +
                       (causal ? ", causal" : "");
      EXPECT_LT(relativeError(o, want.o), 2e-6) << "O at " << at;
      EXPECT_LT(relativeError(lse, want.lse), 2e-6) << "lse at " << at;
      EXPECT_LT(relativeError(dq, want.dq), 2e-6) << "dQ at " << at;
      EXPECT_LT(relativeError(dk, want.dk), 2e-6) << "dK at " << at;
      EXPECT_LT(relativeError(dv, want.dv), 2e-6) << "dV at " << at;
    }
}

TEST(AttentionTest, ACausalFirstTokenSeesOnlyItself) {
  // Row 0 under the mask: P = [1, 0, ...], so O row 0 is V row 0 and dQ row 0
  // is 0 (a softmax over one element has no gradient).
  const int64_t t = 70, d = 24;
  std::vector<float> q = randomVector(t * d, 5, 3.0f),
                     k = randomVector(t * d, 6, 3.0f),
                     v = randomVector(t * d, 7, 1.0f),
                     dout = randomVector(t * d, 8, 1.0f);
  std::vector<float> o(t * d), lse(t), dq(t * d), dk(t * d), dv(t * d);
  dtk_attention_f32(q.data(), k.data(), v.data(), o.data(), lse.data(), 1, t, d,
                    1);
  dtk_attention_grad_f32(q.data(), k.data(), v.data(), o.data(), lse.data(),
                         dout.data(), dq.data(), dk.data(), dv.data(), 1, t, d,
                         1);
  // Its log-sum-exp is its one score.
  double score = 0;
  for (int64_t c = 0; c < d; ++c)
    score += double(q[c]) * k[c];
  EXPECT_NEAR(lse[0], score / std::sqrt(double(d)), 1e-5);
  for (int64_t c = 0; c < d; ++c) {
    EXPECT_FLOAT_EQ(o[c], v[c]);
    // P = [1, 0, ...] and D = dO . O = dP's only term: dS is 0 up to the
    // rounding of O and of exp(s - lse).
    EXPECT_NEAR(dq[c], 0.0f, 1e-5);
  }
}

} // namespace
