//===- SafetensorsTest.cpp - safetensors headers, sets and matching -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Files are built byte by byte here (not with the writer under test), so a
// reader and a writer that agree on a mistake cannot pass together. The
// PyTorch-side round trips are in test/e2e/pretrained.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "dtrt/safetensors.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

using namespace dtrt;
using dtrt::test::TempDir;
using dtrt::test::writeBytes;

namespace {

/// A file: u64 header size, the header text, then `data`.
std::string fileBytes(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values)
    out.append(reinterpret_cast<const char *>(&v), sizeof v);
  return out;
}

std::string errorOf(const std::string &path) {
  Expected<StHeader> h = readStHeader(path);
  return h ? std::string() : h.error().message();
}

TEST(SafetensorsTest, ReadsAValidHeader) {
  TempDir dir;
  std::string path = dir.path() + "/m.safetensors";
  writeBytes(path,
             fileBytes(R"({"__metadata__":{"format":"pt"},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                       R"("a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})",
                       std::string(16, '\0')));
  Expected<StHeader> h = readStHeader(path);
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].name, "b");
  EXPECT_EQ(h->tensors[1].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

TEST(SafetensorsTest, RefusesWhatTheReferenceReaderRefuses) {
  TempDir dir;
  std::string path = dir.path() + "/m.safetensors";
  auto header = [](const char *offsetsA, const char *offsetsB) {
    return std::string(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)") +
           offsetsA + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" +
           offsetsB + "}}";
  };
  writeBytes(path, fileBytes(header("[0,8]", "[12,16]"), std::string(16, 0)));
  EXPECT_NE(errorOf(path).find("tensor 'b' starts at byte 12 of the data, "
                               "expected 8 (a gap or an overlap)"),
            std::string::npos)
      << errorOf(path);
  writeBytes(path, fileBytes(header("[0,8]", "[4,8]"), std::string(8, 0)));
  EXPECT_NE(errorOf(path).find("a gap or an overlap"), std::string::npos);
  writeBytes(path, fileBytes(header("[0,8]", "[8,12]"), std::string(13, 0)));
  EXPECT_NE(errorOf(path).find("describes 12 bytes of tensors but the file "
                               "holds 13"),
            std::string::npos)
      << errorOf(path);
  writeBytes(path, fileBytes(header("[0,8]", "[8,12]"), std::string(10, 0)));
  EXPECT_NE(errorOf(path).find("it is truncated"), std::string::npos);
  writeBytes(path, fileBytes(header("[0,4]", "[4,8]"), std::string(8, 0)));
  EXPECT_NE(errorOf(path).find("tensor 'a': its 4 bytes do not hold 2 F32 "
                               "elements"),
            std::string::npos)
      << errorOf(path);
  writeBytes(path, fileBytes(R"({"a":{"dtype":"F31","shape":[1],)"
                             R"("data_offsets":[0,4]}})",
                             std::string(4, 0)));
  EXPECT_NE(errorOf(path).find("unknown dtype 'F31'"), std::string::npos);
  writeBytes(path, fileBytes("{not json", ""));
  EXPECT_NE(errorOf(path).find("its header is not JSON"), std::string::npos);
  // A header size past the end of the file.
  std::string bytes = fileBytes("{}", "");
  bytes[0] = char(200);
  writeBytes(path, bytes);
  EXPECT_NE(errorOf(path).find("is beyond the end of the file"),
            std::string::npos)
      << errorOf(path);
  writeBytes(path, "1234");
  EXPECT_NE(errorOf(path).find("fewer than the 8 of the header size"),
            std::string::npos);
}

TEST(SafetensorsTest, ConvertsHalfPrecisionExactly) {
  // 1.0, -2.0, the smallest subnormal half, infinity; bf16 1.5.
  const uint16_t half[] = {0x3c00, 0xc000, 0x0001, 0x7c00};
  float out[4];
  stToF32("F16", half, 4, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(out[3]));
  const uint16_t bf16[] = {0x3fc0};
  stToF32("BF16", bf16, 1, out);
  EXPECT_EQ(out[0], 1.5f);
}

TEST(SafetensorsTest, LaysOutFilesAsTheReferenceWriter) {
  std::vector<StEntry> entries = {{"z", {2}, "F32"}, {"a", {3}, "F16"},
                                  {"m", {1}, "F32"}};
  StFileLayout l = layOutStFile(entries, {{"format", "pt"}});
  // Larger elements first, then by name: m, z (F32), then a (F16).
  EXPECT_EQ(l.offsets[2], l.dataStart);
  EXPECT_EQ(l.offsets[0], l.dataStart + 4);
  EXPECT_EQ(l.offsets[1], l.dataStart + 12);
  EXPECT_EQ(l.size, l.dataStart + 18);
  EXPECT_EQ(l.dataStart % 8, 0u);
  // What it lays out, the reader accepts.
  TempDir dir;
  std::string path = dir.path() + "/w.safetensors";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[size_t(i)] = char((l.header.size() >> (8 * i)) & 0xff);
  bytes += l.header + std::string(l.size - l.dataStart, '\0');
  writeBytes(path, bytes);
  Expected<StHeader> h = readStHeader(path);
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

TEST(SafetensorsTest, SplitsGreedilyAndAloneAboveTheLimit) {
  std::vector<StEntry> entries = {{"a", {2}}, {"b", {2}}, {"c", {10}},
                                  {"d", {1}}};
  // 8, 8, 40, 4 bytes with a limit of 20: [a b] [c] [d].
  std::vector<std::vector<size_t>> files = splitStEntries(entries, 20);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(files[1], (std::vector<size_t>{2}));
  EXPECT_EQ(files[2], (std::vector<size_t>{3}));
  EXPECT_EQ(stFileName(1, 3), "model-00002-of-00003.safetensors");
  EXPECT_EQ(stFileName(0, 1), "model.safetensors");
  std::string index = stIndexJSON(entries, files);
  EXPECT_NE(index.find("\"total_size\": 60"), std::string::npos) << index;
  EXPECT_NE(index.find("\"c\": \"model-00002-of-00003.safetensors\""),
            std::string::npos);
}

TEST(SafetensorsTest, OpensASetThroughItsIndex) {
  TempDir dir;
  writeBytes(dir.path() + "/model-00001-of-00002.safetensors",
             fileBytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                       floats({1})));
  writeBytes(dir.path() + "/model-00002-of-00002.safetensors",
             fileBytes(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                       floats({2})));
  writeBytes(dir.path() + "/model.safetensors.index.json",
             R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
             R"("b":"model-00002-of-00002.safetensors"}})");
  Expected<StSet> set = StSet::open(dir.path());
  ASSERT_TRUE(set) << set.error().message();
  ASSERT_NE(set->find("b"), nullptr);
  EXPECT_EQ(set->find("b")->file, 1u);
  // An index that promises a tensor its file lacks.
  writeBytes(dir.path() + "/model.safetensors.index.json",
             R"({"weight_map":{"a":"model-00001-of-00002.safetensors",)"
             R"("c":"model-00002-of-00002.safetensors"}})");
  Expected<StSet> bad = StSet::open(dir.path());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("model.safetensors.index.json' says "
                                       "tensor 'c' is in '"),
            std::string::npos)
      << bad.error().message();
  EXPECT_NE(bad.error().message().find("model-00002-of-00002.safetensors', "
                                       "which does not hold it"),
            std::string::npos)
      << bad.error().message();
  Expected<StSet> none = StSet::open(dir.path() + "/nothing");
  ASSERT_FALSE(none);
}

TEST(SafetensorsTest, MatchesNamesUnderThePrefixAndListsEveryProblem) {
  TempDir dir;
  std::string path = dir.path() + "/m.safetensors";
  writeBytes(path, fileBytes(
                       R"({"transformer.w":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},)"
                       R"("transformer.h.0.attn.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                       R"("transformer.v":{"dtype":"I32","shape":[1],"data_offsets":[12,16]},)"
                       R"("transformer.extra":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                       R"("transformer.skip.me":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})",
                       std::string(24, '\0')));
  Expected<StSet> set = StSet::open(path);
  ASSERT_TRUE(set) << set.error().message();
  StMatch m = matchStTensors(*set,
                             {{"p.w", "w", {1, 2}},
                              {"p.v", "v", {1}},
                              {"p.new", "new", {3}}},
                             {"*.skip.*"});
  EXPECT_EQ(m.prefix, "transformer.");
  ASSERT_EQ(m.found.size(), 3u);
  EXPECT_NE(m.found[0], nullptr);
  EXPECT_EQ(m.found[2], nullptr); // initialised as declared
  EXPECT_EQ(m.skipped, (std::vector<std::string>{"transformer.h.0.attn.bias",
                                                 "transformer.skip.me"}));
  // A file tensor nothing takes beside a parameter the file lacks: the
  // first line says how that parameter was looked for.
  ASSERT_EQ(m.problems.size(), 4u);
  EXPECT_EQ(m.problems[0], "the file lacks 1 of the model's parameters, such "
                           "as p.new (looked for as 'transformer.new')");
  EXPECT_EQ(m.problems[1], "'transformer.w' (for p.w) is [2, 1] in the file, "
                           "the model's is [1, 2]");
  EXPECT_EQ(m.problems[2], "'transformer.v' (for p.v) holds I32 elements, not "
                           "floating-point weights");
  EXPECT_EQ(m.problems[3], "'transformer.extra' [1] in the file is no "
                           "parameter of the model");
}

TEST(SafetensorsTest, FindsAHeadOutsideTheBaseModelsPrefix) {
  TempDir dir;
  std::string path = dir.path() + "/m.safetensors";
  writeBytes(path, fileBytes(
                       R"({"model.norm.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("model.layers.0.w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                       R"("lm_head.weight":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                       std::string(12, '\0')));
  Expected<StSet> set = StSet::open(path);
  ASSERT_TRUE(set) << set.error().message();
  StMatch m = matchStTensors(*set,
                             {{"norm.weight", "norm.weight", {1}},
                              {"layers.0.w", "layers.0.w", {1}},
                              {"lm_head.weight", "lm_head.weight", {1}}},
                             {});
  EXPECT_EQ(m.prefix, "model.");
  EXPECT_TRUE(m.problems.empty()) << m.problems.front();
  ASSERT_EQ(m.found.size(), 3u);
  ASSERT_NE(m.found[2], nullptr);
  EXPECT_EQ(m.found[2]->name, "lm_head.weight");
}

} // namespace
