//===- dtrt/abi.h - What generated code and libdtrt share -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc` emits one object file that defines the symbols below; libdtrt
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

/// One entry point: `void dt_NAME(char *arena)`.
struct dt_entry {
  const char *name;
  void (*fn)(char *arena);
};
/// Every entry point of the program, by name: `dt_grad_step` (forward +
/// backward over the micro-batch staged in `in/train.*`), `dt_apply_step`
/// (clipping, LR schedule and optimizer update; advances `step`),
/// `dt_eval_step` when the job evaluates, and in a pipelined program each
/// stage's `dt_pipe_fwd_S`/`dt_pipe_bwd_S` and each pipeline rank's
/// `dt_apply_step_ppR` instead of the first two.
extern const struct dt_entry dt_entries[];
extern const long long dt_entry_count;
/// The GPU kernels (NUL-terminated PTX, empty without GPU code) and the GPU
/// plan (JSON). Weak: programs of older compilers lack them.
extern const char dt_cuda_image[] __attribute__((weak));
extern const char dt_cuda_plan[] __attribute__((weak));

#ifdef __cplusplus
} // extern "C"

namespace dtrt {

/// The runtime's own version, printed by --version.
inline constexpr const char *kRuntimeVersion = "0.1.0";

/// One emitted program as the runtime sees it.
struct Program {
  using Entry = void (*)(char *);
  const char *manifest = nullptr;
  /// Null in a pipelined program (its stages are `entries`).
  Entry gradStep = nullptr;
  Entry applyStep = nullptr;
  /// Null when the program has no eval entry point.
  Entry evalStep = nullptr;
  /// Every entry point by name (a pipeline's stages and apply variants).
  const dt_entry *entries = nullptr;
  long long entryCount = 0;
  /// The GPU code (docs/abi.md, "The GPU plan"): the generated kernels' PTX
  /// and the launch sequence of each entry point as JSON, which is
  /// {"unsupported": why} in a program without GPU code. Null in programs
  /// (and tests) built without them.
  const char *cudaImage = nullptr;
  const char *cudaPlan = nullptr;

  /// The entry point called `name`, or null.
  Entry find(const char *name) const;
};

/// Runs an emitted program: parses the options, trains, evaluates,
/// checkpoints. Returns the process exit code (see dtrt/error.h). This is the
/// body of libdtrt's `main`.
int runProgram(int argc, char **argv, const Program &program);

} // namespace dtrt
#endif

#endif // DTRT_ABI_H
