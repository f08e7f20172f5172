//===- ProgramTest.cpp - runProgram driven in-process ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Drives the runtime's main body with the MLP fixture's entry points (linked
// into this test) to check the informational options, the exit codes of
// usage errors, and a short complete run. The end-to-end tests in
// test/e2e/runtime cover runs, kills and resumes of the linked programs.
//
//===----------------------------------------------------------------------===//

#include "dtrt/abi.h"

#include "TestUtil.h"

#include <cstdlib>

using namespace dtrt;
using namespace dtrt::test;

namespace {

Program fixture() {
  Program p;
  p.manifest = dt_manifest;
  p.entries = dt_entries;
  p.entryCount = dt_entry_count;
  p.gradStep = p.find("dt_grad_step");
  p.applyStep = p.find("dt_apply_step");
  p.evalStep = p.find("dt_eval_step");
  return p;
}

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  std::vector<char *> argv = {const_cast<char *>("./train-mlp")};
  for (std::string &a : args)
    argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int code = runProgram(int(argv.size()), argv.data(), fixture());
  Result r{code, testing::internal::GetCapturedStdout(),
           testing::internal::GetCapturedStderr()};
  return r;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST(Program, InformationalOptions) {
  Result r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "usage: train-mlp [options]")) << r.out;
  EXPECT_TRUE(contains(r.out, "Trains 'mlp_synthetic'"));
  EXPECT_TRUE(contains(r.out, "(default: 3 epochs)"));

  r = run({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "dt program 'mlp_synthetic' (ABI 1), runtime "
                              "libdtrt"))
      << r.out;

  r = run({"--print-manifest"});
  EXPECT_EQ(r.code, 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["name"], "mlp_synthetic");
}

TEST(Program, UsageErrorsExitTwo) {
  Result r = run({"--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "train-mlp: error: unknown option '--bogus'"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "usage: train-mlp"));

  r = run({"--backend", "cuda"});
  EXPECT_EQ(r.code, 2);
  // Whether or not this machine has a GPU, the program has no GPU code.
  EXPECT_TRUE(contains(r.err, "no GPU is present") ||
              contains(r.err, "this program has no GPU code"))
      << r.err;

  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "0", 1);
  r = run({"--steps", "1"});
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "it was compiled for one rank")) << r.err;
}

TEST(Program, ShortRunWritesMetrics) {
  TempDir dir;
  Result r = run({"--steps", "4", "--log-every", "2", "--log-dir", dir.path(),
                  "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "step 2/4")) << r.out;
  EXPECT_TRUE(contains(r.out, "eval at step 4"));
  EXPECT_TRUE(contains(r.out, "done: 4 steps"));
  std::string metrics = readBytes(dir / "metrics.jsonl");
  std::vector<nlohmann::json> records;
  size_t start = 0;
  for (size_t nl; (nl = metrics.find('\n', start)) != std::string::npos;
       start = nl + 1)
    records.push_back(nlohmann::json::parse(metrics.substr(start, nl - start)));
  ASSERT_EQ(records.size(), 3u) << metrics;
  EXPECT_EQ(records[0]["step"], 2);
  EXPECT_EQ(records[1]["step"], 4);
  for (const char *key :
       {"epoch", "loss", "lr", "grad_norm", "samples_per_s", "elapsed_s"})
    EXPECT_TRUE(records[1].contains(key)) << key;
  EXPECT_EQ(records[1]["epoch"], 4.0 / 32.0);
  EXPECT_EQ(records[2]["step"], 4);
  EXPECT_TRUE(records[2].contains("eval_loss"));
  EXPECT_TRUE(records[2].contains("eval_accuracy"));
}
