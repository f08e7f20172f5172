//===- dtrt/abi.h - What generated code and libdtrt share -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc` emits one object file that defines the four symbols below; libdtrt
// owns `main` and calls them (docs/abi.md is the contract). The runtime itself
// never names the symbols except in main.cpp: everything else receives a
// `Program`, so tests can drive the runtime with their own entry points.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_ABI_H
#define DTRT_ABI_H

#ifdef __cplusplus
extern "C" {
#endif

/// The program's manifest: NUL-terminated JSON (docs/abi.md, "The manifest").
extern const char dt_manifest[];
/// Forward + backward over the micro-batch staged in `in/train.*`.
void dt_grad_step(char *arena);
/// Clipping, LR schedule and optimizer update; advances the `step` buffer.
void dt_apply_step(char *arena);
/// Forward + loss (+ correct count) over the batch staged in `in/eval.*`.
/// Defined only when the job has an eval source, hence weak.
__attribute__((weak)) void dt_eval_step(char *arena);

#ifdef __cplusplus
} // extern "C"

namespace dtrt {

/// The runtime's own version, printed by --version.
inline constexpr const char *kRuntimeVersion = "0.1.0";

/// One emitted program as the runtime sees it.
struct Program {
  const char *manifest = nullptr;
  void (*gradStep)(char *) = nullptr;
  void (*applyStep)(char *) = nullptr;
  /// Null when the program has no eval entry point.
  void (*evalStep)(char *) = nullptr;
};

/// Runs an emitted program: parses the options, trains, evaluates,
/// checkpoints. Returns the process exit code (see dtrt/error.h). This is the
/// body of libdtrt's `main`.
int runProgram(int argc, char **argv, const Program &program);

} // namespace dtrt
#endif

#endif // DTRT_ABI_H
