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

uint32_t bigEndian32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 |
         uint32_t(p[3]);
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
  if (b.size() < 4)
    return fail(fmt::format("it holds only {} bytes", b.size()));
  if (b[0] != 0 || b[1] != 0)
    return fail(fmt::format("bad magic number {:02x}{:02x}{:02x}{:02x}", b[0],
                            b[1], b[2], b[3]));
  if (b[2] != 0x08)
    return fail(fmt::format("element type 0x{:02x} is not unsigned byte "
                            "(0x08)",
                            b[2]));
  int ndims = b[3];
  if (ndims == 0 || (rank != 0 && ndims != rank))
    return fail(fmt::format("it has {} dimensions, {} {}", ndims,
                            rank == 1 ? "a labels file has" : "expected",
                            rank == 0 ? "at least 1" : std::to_string(rank)));
  size_t header = 4 + 4 * size_t(ndims);
  if (b.size() < header)
    return fail("the header is truncated");
  IdxArray a;
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    uint32_t d = bigEndian32(&b[4 + 4 * size_t(i)]);
    if (d == 0)
      return fail(fmt::format("dimension {} is 0", i));
    a.dims.push_back(d);
    total *= d;
    if (total > (uint64_t(1) << 40))
      return fail("its dimensions are impossibly large");
  }
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
    fields_ = {{"x", DType::F32, rowBytes_, false}, {"y", DType::I32, 1, true}};
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
  return std::unique_ptr<DataSource>(std::make_unique<IdxSource>(
      std::move(*images), std::move(*labels), spec));
}

} // namespace dtrt
