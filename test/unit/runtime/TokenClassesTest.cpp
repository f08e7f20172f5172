//===- TokenClassesTest.cpp - Tests of tokenized classification data ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Files are written by dt-tokenize's writer (dttok::ClassFileWriter); the
// source must pad short examples (pad id, type 0, mask 0), truncate long ones
// keeping the trailing special tokens, and refuse damaged files with a
// message before any step.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/source.h"
#include "dttok/shards.h"

#include "TestUtil.h"

#include <fstream>
#include <sstream>

using namespace dtrt;
using namespace dtrt::test;

namespace {

DataSpec classesSpec(const std::string &path, int64_t seq) {
  DataSpec s;
  s.kind = DataKind::TokenClasses;
  s.path = path;
  s.seq = seq;
  return s;
}

/// Two examples as BERT's template makes them: [CLS]=101 ... [SEP]=102.
std::string writeExamples(const std::string &path) {
  dttok::ClassFileWriter w;
  w.append({{101, 7, 8, 102}, {0, 0, 0, 0}}, 1);
  w.append({{101, 1, 2, 3, 102, 4, 5, 6, 102}, {0, 0, 0, 0, 0, 1, 1, 1, 1}}, 0);
  w.finish(path, /*padId=*/0, /*trailingSpecials=*/1);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename T>
std::vector<T> field(DataSource &src, size_t f, int64_t i, int64_t seq) {
  std::vector<T> v(static_cast<size_t>(seq));
  src.read(f, i, v.data());
  return v;
}

} // namespace

TEST(TokenClasses, PadsAndTruncates) {
  TempDir dir;
  writeExamples(dir / "ex.bin");
  auto src = openDataSource(classesSpec(dir / "ex.bin", 6), "train");
  ASSERT_TRUE(bool(src)) << src.error().message();
  DataSource &s = **src;
  ASSERT_EQ(s.size(), 2);
  ASSERT_EQ(s.fields().size(), 4u);
  EXPECT_EQ(s.fields()[2].name, "mask");
  EXPECT_TRUE(s.fields()[3].isLabel);
  // Padded: the pad id, type 0, mask 0 after the text.
  EXPECT_EQ(field<int32_t>(s, 0, 0, 6),
            (std::vector<int32_t>{101, 7, 8, 102, 0, 0}));
  EXPECT_EQ(field<float>(s, 2, 0, 6), (std::vector<float>{1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(field<int32_t>(s, 3, 0, 1), (std::vector<int32_t>{1}));
  // Truncated to 6: the first 5 tokens and the final [SEP], with its type.
  EXPECT_EQ(field<int32_t>(s, 0, 1, 6),
            (std::vector<int32_t>{101, 1, 2, 3, 102, 102}));
  EXPECT_EQ(field<int32_t>(s, 1, 1, 6),
            (std::vector<int32_t>{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(field<float>(s, 2, 1, 6), (std::vector<float>(6, 1.0f)));
  EXPECT_EQ(field<int32_t>(s, 3, 1, 1), (std::vector<int32_t>{0}));
}

TEST(TokenClasses, ReportsDamagedFiles) {
  TempDir dir;
  std::string good = writeExamples(dir / "ex.bin");
  auto errorFor = [&](const std::string &bytes, int64_t seq = 6) {
    writeBytes(dir / "bad.bin", bytes);
    auto src = openDataSource(classesSpec(dir / "bad.bin", seq), "eval");
    return src ? std::string("(no error)") : src.error().message();
  };
  EXPECT_NE(errorFor(good.substr(0, good.size() - 1)).find("(truncated)"),
            std::string::npos);
  std::string magic = good;
  magic[0] ^= 1;
  EXPECT_NE(errorFor(magic).find("bad magic number"), std::string::npos);
  // Example 1's label (0) raised past the header's 2 classes.
  std::string label = good;
  int32_t seven = 7;
  std::memcpy(label.data() + 1024 + 8 * 3 + 4, &seven, 4);
  EXPECT_NE(errorFor(label).find("example 1 has label 7, outside the 2 "
                                 "classes"),
            std::string::npos)
      << errorFor(label);
  EXPECT_NE(errorFor(good, 1).find("trailing special tokens do not fit seq "
                                   "= 1"),
            std::string::npos);
  auto missing = openDataSource(classesSpec(dir / "none.bin", 6), "train");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(missing.error().message().find("dt-tokenize --classes"),
            std::string::npos);
}
