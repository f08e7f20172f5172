//===- RandomVector.h - seeded test data for the kernel tests ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TEST_UNIT_KERNELS_RANDOMVECTOR_H
#define DT_TEST_UNIT_KERNELS_RANDOMVECTOR_H

#include <cstddef>
#include <random>
#include <vector>

/// `n` values drawn from N(0, spread^2), the same for the same seed.
inline std::vector<float> randomVector(size_t n, unsigned seed,
                                       float spread = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  return v;
}

#endif // DT_TEST_UNIT_KERNELS_RANDOMVECTOR_H
