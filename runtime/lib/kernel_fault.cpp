//===- kernel_fault.cpp - how a kernel reports a fault in the data --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Kernels (kernels/) check what depends on the data, such as token ids and
// labels being in range, and call dtk_fail when the data does not fit the
// model. Inside a step there is nothing to unwind to, and the state of the
// arena is mid-update, so the program stops at once without writing a
// checkpoint (the last complete one is intact) and says what was wrong.
//
//===----------------------------------------------------------------------===//

#include "dtrt/error.h"

#include "dtk/kernels.h"

#include <cstdio>
#include <cstdlib>

extern "C" void dtk_fail(const char *message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message);
  std::fflush(stderr);
  std::_Exit(dtrt::kExitFault);
}
