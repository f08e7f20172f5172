//===- TestUtil.h - Helpers shared by the runtime's unit tests --*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A self-deleting temporary directory, file helpers, and a small manifest
// builder so that tests state only the buffers and keys they are about.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_TEST_TESTUTIL_H
#define DTRT_TEST_TESTUTIL_H

#include "dtrt/manifest.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtrt::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string templ =
        std::string(base && *base ? base : "/tmp") + "/dtrt-test-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      ADD_FAILURE() << "mkdtemp failed";
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const {
    return path_ + "/" + name;
  }

private:
  std::string path_;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A minimal valid manifest as JSON (a scalar-free classifier on synthetic
/// data), for tests to modify before parsing.
inline nlohmann::json baseManifest() {
  using nlohmann::json;
  json buffers = json::array({
      {{"name", "w"},
       {"role", "param"},
       {"dtype", "f32"},
       {"shape", {4, 3}},
       {"offset", 0},
       {"init", {{"kind", "uniform"}, {"low", -1.0}, {"high", 1.0}}}},
      {{"name", "b"},
       {"role", "param"},
       {"dtype", "f32"},
       {"shape", {4}},
       {"offset", 64},
       {"init", {{"kind", "constant"}, {"value", 0.5}}}},
      {{"name", "grad/w"},
       {"role", "grad"},
       {"dtype", "f32"},
       {"shape", {4, 3}},
       {"offset", 128}},
      {{"name", "sgd.momentum/w"},
       {"role", "state"},
       {"dtype", "f32"},
       {"shape", {4, 3}},
       {"offset", 192}},
      {{"name", "step"},
       {"role", "state"},
       {"dtype", "i64"},
       {"shape", json::array()},
       {"offset", 256}},
      {{"name", "in/train.x"},
       {"role", "input"},
       {"dtype", "f32"},
       {"shape", {2, 3}},
       {"offset", 320}},
      {{"name", "in/train.y"},
       {"role", "input"},
       {"dtype", "i32"},
       {"shape", {2}},
       {"offset", 384}},
      {{"name", "out/loss"},
       {"role", "output"},
       {"dtype", "f32"},
       {"shape", json::array()},
       {"offset", 448}},
  });
  return {{"abi", 1},
          {"name", "tiny"},
          {"arena", {{"bytes", 512}, {"align", 64}}},
          {"buffers", buffers},
          {"train",
           {{"batch", 2},
            {"micro_batch", 2},
            {"steps", 10},
            {"epochs", nullptr},
            {"seed", 1},
            {"classifier", true},
            {"log", nullptr},
            {"checkpoint", nullptr}}},
          {"data",
           {{"train",
             {{"kind", "synthetic"},
              {"features", 3},
              {"classes", 4},
              {"count", 10},
              {"seed", 3}}}}}};
}

/// Parses a manifest that must be valid.
inline Manifest mustParse(const nlohmann::json &j) {
  Expected<Manifest> m = parseManifest(j.dump());
  if (!m) {
    ADD_FAILURE() << m.error().message();
    return Manifest();
  }
  return *m;
}

} // namespace dtrt::test

#endif // DTRT_TEST_TESTUTIL_H
