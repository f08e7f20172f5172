//===- IdxTest.cpp - Tests of IDX files and the idx source ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Files are generated here (raw and gzip) in their valid form and in the ways
// downloads go wrong: truncated, wrong magic, trailing bytes, a damaged gzip
// stream, images and labels of different counts.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/idx.h"
#include "dtrt/data/source.h"

#include "TestUtil.h"

#include <zlib.h>

using namespace dtrt;
using namespace dtrt::test;

namespace {

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

/// An IDX file of unsigned bytes: dims, then element i = (i * 7) % 256.
std::string idxBytes(std::vector<uint32_t> dims) {
  std::string s = {0, 0, 8, char(dims.size())};
  uint64_t n = 1;
  for (uint32_t d : dims) {
    s += be32(d);
    n *= d;
  }
  for (uint64_t i = 0; i < n; ++i)
    s += char((i * 7) % 256);
  return s;
}

void writeGzip(const std::string &path, const std::string &bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())),
            int(bytes.size()));
  gzclose(f);
}

std::string readError(const std::string &path, int rank = 0) {
  Expected<IdxArray> a =
      readIdxFile(path, rank, "train images file", "--data train=PATH");
  return a ? std::string("(no error)") : a.error().message();
}

} // namespace

TEST(Idx, ReadsRawAndGzip) {
  TempDir dir;
  std::string bytes = idxBytes({5, 3, 2});
  writeBytes(dir / "raw", bytes);
  writeGzip(dir / "z.gz", bytes);
  for (const std::string &name : {"raw", "z.gz"}) {
    Expected<IdxArray> a = readIdxFile(dir / name, 3, "f", "--data");
    ASSERT_TRUE(bool(a)) << a.error().message();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{5, 3, 2}));
    ASSERT_EQ(a->data.size(), 30u);
    EXPECT_EQ(a->data[29], (29 * 7) % 256);
  }
}

TEST(Idx, ReportsMissingFile) {
  TempDir dir;
  std::string msg = readError(dir / "nope.gz");
  EXPECT_NE(msg.find("cannot open the train images file"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("nope.gz"), std::string::npos);
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos);
  EXPECT_NE(msg.find("--data train=PATH"), std::string::npos);
}

TEST(Idx, ReportsBadMagic) {
  TempDir dir;
  std::string bytes = idxBytes({5, 3, 2});
  bytes[0] = 'P';
  writeBytes(dir / "f", bytes);
  EXPECT_NE(readError(dir / "f").find("not a valid IDX file: bad magic number "
                                      "50000803"),
            std::string::npos)
      << readError(dir / "f");
  bytes = idxBytes({5, 3, 2});
  bytes[2] = 0x0D; // float elements
  writeBytes(dir / "g", bytes);
  EXPECT_NE(readError(dir / "g").find("element type 0x0d is not unsigned byte"),
            std::string::npos);
}

TEST(Idx, ReportsTruncationAndTrailingBytes) {
  TempDir dir;
  std::string bytes = idxBytes({5, 3, 2});
  writeBytes(dir / "short", bytes.substr(0, bytes.size() - 4));
  EXPECT_NE(readError(dir / "short")
                .find("promises 30 bytes of data but only "
                      "26 follow (truncated)"),
            std::string::npos)
      << readError(dir / "short");
  writeBytes(dir / "long", bytes + "xyz");
  EXPECT_NE(readError(dir / "long").find("3 unexpected bytes follow"),
            std::string::npos);
  writeBytes(dir / "tiny", bytes.substr(0, 6));
  EXPECT_NE(readError(dir / "tiny").find("header is truncated"),
            std::string::npos);
}

TEST(Idx, ReportsDamagedGzip) {
  TempDir dir;
  writeGzip(dir / "z.gz", idxBytes({100, 10, 10}));
  std::string gz = readBytes(dir / "z.gz");
  writeBytes(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  std::string msg = readError(dir / "cut.gz");
  EXPECT_NE(msg.find("cannot read the train images file"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("truncated or damaged download"), std::string::npos);
}

TEST(Idx, ChecksRank) {
  TempDir dir;
  writeBytes(dir / "images", idxBytes({5, 3, 2}));
  std::string msg = readError(dir / "images", 1);
  EXPECT_NE(msg.find("it has 3 dimensions, a labels file has 1"),
            std::string::npos)
      << msg;
}

TEST(Idx, DerivesLabelsPath) {
  EXPECT_EQ(deriveLabelsPath("data/fashion/train-images-idx3-ubyte.gz"),
            "data/fashion/train-labels-idx1-ubyte.gz");
  EXPECT_EQ(deriveLabelsPath("/x/t10k-images-idx3-ubyte"),
            "/x/t10k-labels-idx1-ubyte");
  EXPECT_EQ(deriveLabelsPath("train-images.idx3-ubyte"),
            "train-labels.idx1-ubyte");
  EXPECT_EQ(deriveLabelsPath("images.bin"), "");
}

TEST(IdxSource, StagesScaledRowsAndLabels) {
  TempDir dir;
  writeGzip(dir / "img.gz", idxBytes({4, 2, 3}));
  std::string labels = {0, 0, 8, 1};
  labels += be32(4);
  labels += std::string{3, 1, 4, 1};
  writeBytes(dir / "lab", labels);
  DataSpec spec;
  spec.kind = DataKind::Idx;
  spec.images = dir / "img.gz";
  spec.labels = dir / "lab";
  spec.scale = 0.5;
  auto src = openDataSource(spec, "train");
  ASSERT_TRUE(bool(src)) << src.error().message();
  EXPECT_EQ((*src)->size(), 4);
  ASSERT_EQ((*src)->fields().size(), 2u);
  EXPECT_EQ((*src)->fields()[0].elements, 6);
  float x[6];
  (*src)->read(0, 2, x);
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(x[k], float(((12 + k) * 7) % 256) * 0.5f);
  int32_t y;
  (*src)->read(1, 2, &y);
  EXPECT_EQ(y, 4);
}

TEST(IdxSource, RejectsCountMismatch) {
  TempDir dir;
  writeBytes(dir / "img", idxBytes({4, 2, 3}));
  writeBytes(dir / "lab", idxBytes({5}));
  DataSpec spec;
  spec.kind = DataKind::Idx;
  spec.images = dir / "img";
  spec.labels = dir / "lab";
  auto src = openDataSource(spec, "eval");
  ASSERT_FALSE(bool(src));
  EXPECT_NE(src.error().message().find("holds 4 images but the labels file"),
            std::string::npos)
      << src.error().message();
  EXPECT_NE(src.error().message().find("holds 5 labels"), std::string::npos);
}
