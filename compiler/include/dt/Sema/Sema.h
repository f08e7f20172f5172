//===- Sema.h - Semantic analysis of a .dt program --------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The entry point of semantic analysis. `analyze` resolves imports, checks
// every model generically (arguments without defaults and batch dimensions
// stay symbolic, so only provable shape errors are reported), then checks the
// train job concretely (all dimensions known), the parallel layout against
// it, and the deploy blocks. Errors are reported to the loader's
// DiagnosticEngine, pointing into the user's files rather than the standard
// library whenever the user's code is what has to change.
//
//===----------------------------------------------------------------------===//

#ifndef DT_SEMA_SEMA_H
#define DT_SEMA_SEMA_H

#include "dt/Sema/Job.h"
#include "dt/Sema/ModuleLoader.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/LogicalResult.h"

#include <memory>
#include <optional>

namespace dt {

/// A checked program.
class Program {
public:
  Program(const LoadedModule &main, std::unique_ptr<Job> job)
      : main(main), job(std::move(job)) {}

  const LoadedModule &getMain() const { return main; }
  /// The train job, or null when the file has no train block.
  const Job *getJob() const { return job.get(); }

private:
  const LoadedModule &main;
  std::unique_ptr<Job> job;
};

/// What the driver asks of the job beyond what the file says.
struct AnalyzeOptions {
  /// Compile for this many ranks: the data-parallel axis is resized so that
  /// the mesh has them, and the global batch is kept (each rank's
  /// micro-batch stays; accumulation changes). For a job restarted on
  /// another number of hosts, whose checkpoints reshard to any mesh.
  std::optional<int64_t> worldSize;
};

/// Checks `main` and everything it imports (loading imports through
/// `loader`). The loader must outlive the returned Program.
llvm::FailureOr<std::unique_ptr<Program>>
analyze(ModuleLoader &loader, const LoadedModule &main,
        const AnalyzeOptions &options = {});

/// Runs `body` on a thread with a large stack (the front end's second guard
/// against deep recursion, after the parser's nesting limits).
void runOnLargeStack(llvm::function_ref<void()> body);

} // namespace dt

#endif // DT_SEMA_SEMA_H
