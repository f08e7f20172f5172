//===- synthetic.cpp - A reproducible classification set ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The distribution is specified in dtrt/data/synthetic.h. Centroids are
// computed once (C x F values); the noise of a sample is generated when the
// sample is read, so the source costs no memory per sample.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/synthetic.h"

#include "dtrt/rng.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

namespace dtrt {

namespace {

class SyntheticSource final : public DataSource {
public:
  SyntheticSource(const DataSpec &spec, const std::string &role)
      : spec_(spec), noiseKey_(streamKey(spec.seed, "synthetic/" + role)) {
    uint64_t centroidKey = streamKey(spec.seed, "synthetic/centroids");
    double scale = kSyntheticCentroidNorm / std::sqrt(double(spec.features));
    centroids_.resize(size_t(spec.classes * spec.features));
    for (size_t i = 0; i < centroids_.size(); ++i)
      centroids_[i] = scale * randomNormal(centroidKey, i);
    fields_ = {{"x", DType::F32, spec.features, false},
               {"y", DType::I32, 1, true}};
  }

  std::string describe() const override {
    return fmt::format("synthetic, {} samples of {} features in {} classes, "
                       "seed {}",
                       spec_.count, spec_.features, spec_.classes, spec_.seed);
  }
  int64_t size() const override { return spec_.count; }
  const std::vector<FieldInfo> &fields() const override { return fields_; }

  void read(size_t field, int64_t index, void *dst) const override {
    int32_t label = int32_t(index % spec_.classes);
    if (field == 1) {
      std::memcpy(dst, &label, sizeof label);
      return;
    }
    const double *centroid = &centroids_[size_t(label * spec_.features)];
    float *out = static_cast<float *>(dst);
    uint64_t first = uint64_t(index) * uint64_t(spec_.features);
    for (int64_t f = 0; f < spec_.features; ++f)
      out[f] = float(centroid[f] + randomNormal(noiseKey_, first + f));
  }

private:
  DataSpec spec_;
  uint64_t noiseKey_;
  std::vector<double> centroids_;
  std::vector<FieldInfo> fields_;
};

} // namespace

Expected<std::unique_ptr<DataSource>>
openSyntheticSource(const DataSpec &spec, const std::string &role) {
  if (spec.classes > (int64_t(1) << 31) - 1)
    return Error(fmt::format("the {} synthetic source has {} classes, more "
                             "than an i32 label holds",
                             role, spec.classes));
  return std::unique_ptr<DataSource>(
      std::make_unique<SyntheticSource>(spec, role));
}

} // namespace dtrt
