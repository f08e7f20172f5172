//===- main.cpp - main() of every emitted program -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The only file that names the generated symbols (the manifest and the
// table of entry points). It is built into libdtrt.a
// as its own object, so the linker pulls it in for an emitted program (whose
// object file defines no main) and tests can link the rest of the runtime
// (dtrt_core) with their own main.
//
//===----------------------------------------------------------------------===//

#include "dtrt/abi.h"
#include "dtrt/blas.h"

int main(int argc, char **argv) {
  // First of all: OpenBLAS's kernels can only be chosen by restarting.
  dtrt::reexecWithBetterBlas(argv);
  dtrt::Program program;
  program.manifest = dt_manifest;
  program.entries = dt_entries;
  program.entryCount = dt_entry_count;
  program.gradStep = program.find("dt_grad_step");
  program.applyStep = program.find("dt_apply_step");
  program.evalStep = program.find("dt_eval_step"); // null without eval
  program.cudaImage = dt_cuda_image;
  program.cudaPlan = dt_cuda_plan;
  return dtrt::runProgram(argc, argv, program);
}
