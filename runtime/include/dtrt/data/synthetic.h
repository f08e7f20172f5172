//===- dtrt/data/synthetic.h - A reproducible labelled set ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `synthetic(features = F, classes = C, count = N, seed = S)`: Gaussian blobs.
// Class c has a centroid whose feature f is
//   (2 / sqrt(F)) * normal(streamKey(S, "synthetic/centroids"), c * F + f);
// sample i has label y = i mod C and features
//   x_f = centroid(y)_f + normal(streamKey(S, "synthetic/<role>"), i * F + f),
// where <role> is "train" or "eval". Samples are computed on demand,
// deterministic from (S, role, i).
//
// Centroids have a norm of about 2 whatever F, against unit noise per
// feature: the classes overlap, so the task is equally hard at any width and
// a model's loss keeps improving over a run instead of reaching zero in a
// few steps (which would make loss curves useless for comparing runs).
//
// Keying the noise by role means that a train and an eval source with the
// same seed describe the same task (the same centroids) with disjoint noise:
// the eval set is held out, as a user writing the same seed twice expects. A
// different seed is a different task.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_SYNTHETIC_H
#define DTRT_DATA_SYNTHETIC_H

#include "dtrt/data/source.h"

namespace dtrt {

/// The expected norm of a class centroid (noise has unit variance per
/// feature).
inline constexpr double kSyntheticCentroidNorm = 2.0;

} // namespace dtrt

#endif // DTRT_DATA_SYNTHETIC_H
