//===- TraceTest.cpp - A trace's GPU stream -------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What the CUDA executor hands the tracer (dtrt/cuda/executor.h: a traced
// step's launches timed with events on the host's clock) is written as
// Kineto writes a device's work: "kernel" events on a "GPU stream" thread,
// with the op's op_id, and the GPU's collectives there with their
// arguments. The CPU path's traces are test/e2e/trace's.
//
//===----------------------------------------------------------------------===//

#include "dtrt/trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace dtrt;

namespace {

/// An empty directory for a test's trace.
std::string freshDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// The trace `t` wrote, parsed (discarded when it is no JSON).
nlohmann::json written(const Tracer &t) {
  std::ifstream in(t.path());
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(TraceTest, TheGpuStreamIsAThreadOfKernelsAndCollectives) {
  Manifest m;
  m.name = "gpu_trace";
  m.train.accumulation = 1;
  SpanDesc matmul;
  matmul.id = 0;
  matmul.entry = "grad_step";
  matmul.op = "matmul";
  matmul.layer = "fc";
  matmul.flops = 2048;
  SpanDesc reduce = matmul;
  reduce.id = 1;
  reduce.op = "all_reduce";
  reduce.layer = "";
  reduce.collective = 0;
  m.spans = {matmul, reduce};
  CollectiveDesc c;
  c.id = 0;
  c.kind = "all-reduce";
  c.what = "grad/fc.weight";
  c.axes = {"dp"};
  c.entry = "grad_step";
  c.bytes = 4096;
  c.elements = 1024;
  c.dtype = "f32";
  m.collectives = {c};
  Expected<Mesh> mesh = Mesh::create({"dp"}, {2});
  ASSERT_TRUE(bool(mesh));
  std::string dir = freshDir("dt-gpu-trace");
  Tracer t(m, {dir, 1, 1, 1, 2, "mpi"}, *mesh);
  ASSERT_TRUE(bool(t.alignClocks(nullptr)));
  t.beginStep(1);
  int64_t now = steadyNanos();
  t.deviceSpan(0, now, now + 5000);
  t.deviceCollective(0, now + 5000, now + 9000);
  t.endStep(1);

  nlohmann::json trace = written(t);
  ASSERT_FALSE(trace.is_discarded()) << t.path();
  bool named = false;
  int kernels = 0, collectives = 0;
  for (const nlohmann::json &e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 3)
      named = e["args"]["name"] == "GPU stream";
    if (e["ph"] != "X")
      continue;
    EXPECT_EQ(e["tid"], 3) << e.dump();
    if (e["cat"] == "kernel") {
      ++kernels;
      EXPECT_EQ(e["name"], "matmul fc");
      EXPECT_EQ(e["args"]["op_id"], 0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 5.0);
    } else {
      ++collectives;
      EXPECT_EQ(e["cat"], "collective");
      EXPECT_EQ(e["args"]["Collective name"], "all-reduce");
      EXPECT_EQ(e["args"]["Process Group Ranks"], (std::vector<int>{0, 1}));
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 4.0);
    }
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(collectives, 1);
}

TEST(TraceTest, AMergedLaunchIsOneKernelNamingItsOps) {
  // Kernels a GPU plan launched together (CudaPlan's merged launches) ran
  // side by side, so the launch's time is theirs together: one event,
  // listing their op_ids and names, with their FLOPs and bytes summed.
  Manifest m;
  m.name = "merged_trace";
  m.train.accumulation = 1;
  SpanDesc first;
  first.entry = "grad_step";
  first.op = "fused(convert)";
  first.layer = "blocks.0";
  first.flops = 10;
  first.bytes = 400;
  SpanDesc second = first;
  second.id = 1;
  second.op = "fused(add)";
  second.layer = "";
  second.flops = 5;
  second.bytes = 200;
  m.spans = {first, second};
  Expected<Mesh> mesh = Mesh::create({"dp"}, {1});
  ASSERT_TRUE(bool(mesh));
  std::string dir = freshDir("dt-merged-trace");
  Tracer t(m, {dir, 1, 1, 0, 1, ""}, *mesh);
  ASSERT_TRUE(bool(t.alignClocks(nullptr)));
  t.beginStep(1);
  int64_t now = steadyNanos();
  t.deviceSpans({0, 1}, now, now + 3000);
  t.deviceSpans({0, 1}, now + 3000, now + 5000); // the same list again
  t.deviceSpans({1}, now + 5000, now + 6000);    // one op: its own event
  t.endStep(1);

  nlohmann::json trace = written(t);
  ASSERT_FALSE(trace.is_discarded()) << t.path();
  std::vector<nlohmann::json> kernels;
  for (const nlohmann::json &e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "kernel")
      kernels.push_back(e);
  ASSERT_EQ(kernels.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(kernels[i]["name"], "merged launch (2 ops)");
    EXPECT_EQ(kernels[i]["args"]["op_ids"], (std::vector<int>{0, 1}));
    EXPECT_EQ(
        kernels[i]["args"]["ops"],
        (std::vector<std::string>{"fused(convert) blocks.0", "fused(add)"}));
    EXPECT_EQ(kernels[i]["args"]["flops"], 15);
    EXPECT_EQ(kernels[i]["args"]["bytes"], 600);
    EXPECT_FALSE(kernels[i]["args"].contains("op_id"));
  }
  EXPECT_DOUBLE_EQ(kernels[0]["dur"].get<double>(), 3.0);
  EXPECT_EQ(kernels[2]["name"], "fused(add)");
  EXPECT_EQ(kernels[2]["args"]["op_id"], 1);
}

} // namespace
