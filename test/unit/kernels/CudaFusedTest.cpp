//===- CudaFusedTest.cpp - generated GPU kernels against the interpreter --===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The GPU half of the generated kernels' check (dt-fused-golden writes the
// other): loads a program's PTX with the runtime's KernelLibrary, and for
// every recorded evaluation of every kernel fills a zeroed arena with the
// kernel's operands at their planned offsets, poisons its results' bytes
// (0xff: NaN), launches it and compares each result with the interpreter's,
// within a tolerance of the element type's rounding. Without a GPU each test
// reads its files and is skipped, saying so.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/library.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool haveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::string goldenDir() {
  const char *dir = std::getenv("DT_FUSED_GOLDEN");
  return dir ? dir : DT_FUSED_GOLDEN_DIR;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Span {
  int64_t offset = 0, code = 0, count = 0;
  std::string bytes;          // inputs: as the arena holds them
  std::vector<double> values; // outputs: expected
};
struct Case {
  std::string kernel;
  int64_t launch = 1; // the elements the plan's launch covers
  std::vector<Span> inputs, outputs;
};

int64_t elementBytes(int64_t code) {
  static const int64_t bytes[] = {4, 2, 2, 4, 8, 1, 8};
  return bytes[code];
}

double decode(int64_t code, const char *p) {
  auto half = [&](bool bf16) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    if (bf16) {
      uint32_t bits = uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return double(f);
    }
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 0x1f)
      return mantissa ? NAN : sign * INFINITY;
    if (exponent == 0)
      return sign * std::ldexp(mantissa, -24);
    return sign * std::ldexp(mantissa + 1024, exponent - 25);
  };
  switch (code) {
  case 0: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case 1:
    return half(true);
  case 2:
    return half(false);
  case 3: {
    int32_t i;
    std::memcpy(&i, p, 4);
    return i;
  }
  case 4: {
    int64_t i;
    std::memcpy(&i, p, 8);
    return double(i);
  }
  case 5:
    return double(int8_t(*p));
  default: {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  }
}

/// Reads OUTDIR/<name>.golden (format in test/unit/codegen/FusedGolden.cpp).
bool readGolden(const std::string &text, int64_t &arenaBytes,
                std::vector<Case> &cases) {
  size_t at = 0;
  auto i64 = [&]() {
    int64_t v = 0;
    if (at + 8 <= text.size())
      std::memcpy(&v, text.data() + at, 8);
    at += 8;
    return v;
  };
  auto bytes = [&](int64_t n) {
    std::string s = at + n <= text.size() ? text.substr(at, n) : "";
    at += n;
    return s;
  };
  if (bytes(6) != "DTFG2\n")
    return false;
  arenaBytes = i64();
  int64_t n = i64();
  for (int64_t c = 0; c < n && at <= text.size(); ++c) {
    Case k;
    k.kernel = bytes(i64());
    k.launch = i64();
    int64_t inputs = i64(), outputs = i64();
    for (int64_t i = 0; i < inputs; ++i) {
      Span s;
      s.offset = i64(), s.code = i64(), s.count = i64();
      s.bytes = bytes(s.count * elementBytes(s.code));
      k.inputs.push_back(std::move(s));
    }
    for (int64_t i = 0; i < outputs; ++i) {
      Span s;
      s.offset = i64(), s.code = i64(), s.count = i64();
      std::string expected = bytes(s.count * elementBytes(s.code));
      for (int64_t e = 0; e < s.count && expected.size(); ++e)
        s.values.push_back(
            decode(s.code, expected.data() + e * elementBytes(s.code)));
      k.outputs.push_back(std::move(s));
    }
    cases.push_back(std::move(k));
  }
  return at == text.size();
}

class CudaFused : public ::testing::TestWithParam<const char *> {};

TEST_P(CudaFused, EveryKernelMatchesTheInterpreter) {
  std::string base = goldenDir() + "/" + GetParam();
  std::string ptx = slurp(base + ".ptx");
  ASSERT_FALSE(ptx.empty()) << "no " << base << ".ptx: run dt-fused-golden";
  int64_t arenaBytes = 0;
  std::vector<Case> cases;
  ASSERT_TRUE(readGolden(slurp(base + ".golden"), arenaBytes, cases))
      << base << ".golden is missing or malformed";
  ASSERT_FALSE(cases.empty());
  if (!haveGpu())
    GTEST_SKIP() << "no GPU on this machine (the golden file was read; the "
                    "kernels' PTX is assembled by test/dtc/emit-ptx.test)";

  dtrt::Expected<dtrt::cuda::KernelLibrary> library =
      dtrt::cuda::KernelLibrary::load(ptx);
  ASSERT_TRUE(library) << library.error().message();
  char *arena = nullptr;
  ASSERT_EQ(cudaMalloc(&arena, size_t(arenaBytes)), cudaSuccess);

  // A 16-bit result rounds an f32 (GPU) or a double (interpreter) to one of
  // two neighbours: up to 2^-8 apart relative, twice that after a
  // reduction's different order. f32 results differ in the last bits, more
  // after a reduction, relative to the tensor's scale.
  auto tolerance = [](int64_t code, double want, double scale) {
    if (code == 1 || code == 2)
      return 8e-3 * std::abs(want) + 4e-3 * scale;
    if (code == 0 || code == 6)
      return 1e-4 * std::abs(want) + 1e-5 * scale + 1e-30;
    return 0.0;
  };

  int failing = 0;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.kernel);
    dtrt::Expected<cudaKernel_t> kernel = library->kernel(c.kernel);
    ASSERT_TRUE(kernel) << kernel.error().message();
    // As the plan launches it (a split reduction's blocks race to finish
    // an output) and as one block (its chunks take turns): the same sums.
    bool ok = true;
    for (int64_t launch : {c.launch, int64_t(1)}) {
      ASSERT_EQ(cudaMemset(arena, 0, size_t(arenaBytes)), cudaSuccess);
      // Poison first: an elementwise update's result shares its input's bytes.
      for (const Span &s : c.outputs)
        ASSERT_EQ(cudaMemset(arena + s.offset, 0xff,
                             size_t(s.count * elementBytes(s.code))),
                  cudaSuccess);
      for (const Span &s : c.inputs)
        ASSERT_EQ(cudaMemcpy(arena + s.offset, s.bytes.data(), s.bytes.size(),
                             cudaMemcpyHostToDevice),
                  cudaSuccess);
      dtrt::Status launched = library->launch(*kernel, arena, launch, nullptr);
      ASSERT_TRUE(launched) << launched.error().message();
      cudaError_t e = cudaDeviceSynchronize();
      ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);

      for (size_t o = 0; o < c.outputs.size(); ++o) {
        const Span &s = c.outputs[o];
        std::string got(size_t(s.count * elementBytes(s.code)), '\0');
        ASSERT_EQ(cudaMemcpy(got.data(), arena + s.offset, got.size(),
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        double scale = 0;
        for (double v : s.values)
          if (std::isfinite(v))
            scale = std::max(scale, std::abs(v));
        int reported = 0;
        for (int64_t i = 0; i < s.count; ++i) {
          double want = s.values[i];
          double value = decode(s.code, got.data() + i * elementBytes(s.code));
          bool same =
              std::isfinite(want)
                  ? std::abs(value - want) <= tolerance(s.code, want, scale)
                  : (std::isnan(want) ? std::isnan(value) : value == want);
          if (!same && reported++ < 3)
            ADD_FAILURE() << c.kernel << " (launched over " << launch
                          << ") result " << o << "[" << i << "] = " << value
                          << ", the interpreter's " << want << " (of "
                          << s.count << ")";
          ok &= same;
        }
      }
    }
    failing += !ok;
  }
  cudaFree(arena);
  std::printf("%s: %zu evaluations of generated kernels, %d wrong\n",
              GetParam(), cases.size(), failing);
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaFused,
                         ::testing::Values("gpt_f32", "gpt_bf16", "gpt_f16",
                                           "gpt_dropout", "llama", "cnn"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

} // namespace
