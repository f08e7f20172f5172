//===- idx.cpp - IDX image/label files ------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Reading is strict: the header must describe exactly the bytes that follow.
// A truncated download or a file of the wrong kind is reported with the byte
// counts, the file name and the option that points elsewhere, never trained
// on.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/idx.h"
#include "dtrt/data/source.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <zlib.h>

namespace dtrt {

namespace {

/// Reads a whole file through zlib (which passes non-gzip files through).
Expected<std::vector<uint8_t>> readAll(const std::string &path,
                                       const std::string &what,
                                       const std::string &option) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    return Error(fmt::format(
        "cannot open the {} '{}': {}; point to it with "
        "{}",
        what, path, errno ? std::strerror(errno) : "out of memory", option));
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1 << 20;
  gzbuffer(f, 1 << 17);
  for (;;) {
    size_t have = bytes.size();
    bytes.resize(have + kChunk);
    int n = gzread(f, bytes.data() + have, unsigned(kChunk));
    int code = Z_OK;
    const char *msg = gzerror(f, &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      std::string why = code == Z_ERRNO ? std::strerror(errno) : msg;
      // zlib prefixes its messages with the path, which ours already names.
      if (why.rfind(path + ": ", 0) == 0)
        why = why.substr(path.size() + 2);
      gzclose(f);
      return Error(fmt::format("cannot read the {} '{}': {} (a truncated or "
                               "damaged download?); fetch it again or point "
                               "to another copy with {}",
                               what, path, why, option));
    }
    bytes.resize(have + size_t(n));
    if (n == 0)
      break;
  }
  gzclose(f);
  return bytes;
}

} // namespace

Expected<IdxArray> readIdxFile(const std::string &path, int rank,
                               const std::string &what,
                               const std::string &option) {
  Expected<std::vector<uint8_t>> bytes = readAll(path, what, option);
  if (!bytes)
    return bytes.error();
  auto fail = [&](const std::string &why) {
    return Error(fmt::format("the {} '{}' is not a valid IDX file: {}; point "
                             "to the right file with {}",
                             what, path, why, option));
  };
  const std::vector<uint8_t> &b = *bytes;
  Expected<std::vector<int64_t>> dims = parseIdxHeader(b.data(), b.size(), rank);
  if (!dims)
    return fail(dims.error().message());
  IdxArray a;
  a.dims = std::move(*dims);
  size_t header = 4 + 4 * a.dims.size();
  uint64_t total = 1;
  for (int64_t d : a.dims)
    total *= uint64_t(d);
  uint64_t body = b.size() - header;
  if (body < total)
    return fail(fmt::format("the header promises {} bytes of data but only {} "
                            "follow (truncated)",
                            total, body));
  if (body > total)
    return fail(fmt::format("{} unexpected bytes follow the {} bytes of data",
                            body - total, total));
  a.data.assign(b.begin() + long(header), b.end());
  return a;
}

std::string deriveLabelsPath(std::string_view images) {
  static const std::pair<std::string_view, std::string_view> kRenames[] = {
      {"images-idx3-ubyte", "labels-idx1-ubyte"},
      {"images.idx3-ubyte", "labels.idx1-ubyte"},
  };
  for (auto [from, to] : kRenames) {
    size_t at = images.rfind(from);
    if (at != std::string_view::npos)
      return std::string(images.substr(0, at)) + std::string(to) +
             std::string(images.substr(at + from.size()));
  }
  return "";
}

namespace {

class IdxSource final : public DataSource {
public:
  IdxSource(IdxArray images, IdxArray labels, const DataSpec &spec)
      : images_(std::move(images)), labels_(std::move(labels)), spec_(spec) {
    rowBytes_ = int64_t(images_.data.size()) / images_.dims[0];
    fields_ = {{"x", DType::F32, rowBytes_, false},
               {"y", DType::I32, 1, true}};
    if (spec.image)
      fields_[0].shape = {1, int64_t(images_.dims[1]),
                          int64_t(images_.dims[2])};
  }

  std::string describe() const override {
    std::string shape;
    for (size_t i = 1; i < images_.dims.size(); ++i)
      shape += (i > 1 ? "x" : "") + std::to_string(images_.dims[i]);
    return fmt::format("idx, {} samples of {} from {} and {}", size(),
                       shape.empty() ? "1" : shape, spec_.images, spec_.labels);
  }
  int64_t size() const override { return images_.dims[0]; }
  const std::vector<FieldInfo> &fields() const override { return fields_; }

  void read(size_t field, int64_t index, void *dst) const override {
    if (field == 0) {
      const uint8_t *row = images_.data.data() + index * rowBytes_;
      float *out = static_cast<float *>(dst);
      float scale = float(spec_.scale);
      for (int64_t k = 0; k < rowBytes_; ++k)
        out[k] = float(row[k]) * scale;
    } else {
      int32_t label = labels_.data[size_t(index)];
      std::memcpy(dst, &label, sizeof label);
    }
  }

  void prefetch(size_t field, int64_t index) const override {
    if (field != 0)
      return;
    const uint8_t *row = images_.data.data() + index * rowBytes_;
    for (int64_t at = 0; at < rowBytes_; at += kCacheLine)
      __builtin_prefetch(row + at);
  }

private:
  static constexpr int64_t kCacheLine = 64;

  IdxArray images_, labels_;
  DataSpec spec_;
  int64_t rowBytes_ = 0;
  std::vector<FieldInfo> fields_;
};

} // namespace

Expected<std::unique_ptr<DataSource>> openIdxSource(const DataSpec &spec,
                                                    const std::string &role) {
  Expected<IdxArray> images = readIdxFile(spec.images, 0, role + " images file",
                                          fmt::format("--data {}=PATH", role));
  if (!images)
    return images.error();
  Expected<IdxArray> labels =
      readIdxFile(spec.labels, 1, role + " labels file",
                  fmt::format("--data {}.labels=PATH", role));
  if (!labels)
    return labels.error();
  if (images->dims[0] != labels->dims[0])
    return Error(fmt::format(
        "the {} images file '{}' holds {} images but the labels file '{}' "
        "holds {} labels; they must come from the same set (--data {}.images= "
        "and --data {}.labels= choose each)",
        role, spec.images, images->dims[0], spec.labels, labels->dims[0], role,
        role));
  if (spec.image && images->dims.size() != 3)
    return Error(fmt::format(
        "the {} images file '{}' holds {}-dimensional samples, but image = "
        "true reads [rows, cols] images (a 3-dimensional IDX file)",
        role, spec.images, images->dims.size() - 1));
  return std::unique_ptr<DataSource>(std::make_unique<IdxSource>(
      std::move(*images), std::move(*labels), spec));
}

} // namespace dtrt
