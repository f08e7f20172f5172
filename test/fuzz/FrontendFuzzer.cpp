//===- FrontendFuzzer.cpp - libFuzzer target over the dt front end --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Feeds arbitrary bytes to the front end exactly as dtc does (parse, Sema on
// a large-stack thread, imports from the real standard library) and, for
// programs Sema accepts, traces the loss with a verifying recorder. It aborts
// when the front end fails without reporting an error, accepts a program and
// then cannot trace it, or produces a trace that breaks an op contract;
// sanitizers catch the rest.
//
//===----------------------------------------------------------------------===//

#include "dt/Sema/Sema.h"
#include "dt/Sema/TraceRecorder.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

using namespace dt;

namespace {
void check(bool condition, const char *what, llvm::StringRef detail) {
  if (condition)
    return;
  std::fprintf(stderr, "dt-fuzz: %s\n%s\n", what, detail.str().c_str());
  std::abort();
}

void runOne(llvm::StringRef text) {
  llvm::SourceMgr sourceMgr;
  std::string messages;
  llvm::raw_string_ostream os(messages);
  DiagnosticEngine diag(sourceMgr, os);
  ModuleLoader loader(diag, SearchPaths{DT_STDLIB_DIR, {}});
  const LoadedModule *main = loader.loadBuffer("fuzz.dt", text);
  if (!main) {
    check(diag.hasErrors(), "parse failed without an error", messages);
    return;
  }
  llvm::FailureOr<std::unique_ptr<Program>> program = analyze(loader, *main);
  if (failed(program)) {
    check(diag.hasErrors(), "Sema failed without an error", messages);
    return;
  }
  check(!diag.hasErrors(), "Sema succeeded after reporting an error", messages);
  const Job *job = (*program)->getJob();
  if (!job)
    return;
  // Trace at the batch Sema checked (the one dtc traces at): a program may be
  // shape-correct only at its own batch size, e.g. when it mixes the batch
  // dimension with a feature dimension. The recorder keeps shapes, not data, so
  // large batches cost nothing.
  int64_t batch = job->microBatch * job->parallel.getDataParallelSize();
  for (DataRole role : {DataRole::Train, DataRole::Eval}) {
    if (role == DataRole::Eval && !job->eval)
      continue;
    TraceRecorder recorder;
    llvm::FailureOr<LossTrace> trace = traceLoss(*job, role, batch, recorder);
    check(succeeded(trace), "an accepted job failed to trace", messages);
    std::string violations;
    for (const std::string &v : recorder.getViolations())
      violations += v + "\n";
    check(violations.empty(), "the trace breaks an op contract", violations);
    check(recorder.getNumParams() <= job->params.size(),
          "a parameter was traced twice", "");
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  runOnLargeStack([&] { runOne(text); });
  return 0;
}
