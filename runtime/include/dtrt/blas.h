//===- dtrt/blas.h - Choosing OpenBLAS's kernels ----------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Debian's OpenBLAS (0.3.21) picks its kernels by CPU model when it loads,
// and on models newer than itself it falls back to generic ones: on the
// Xeons these machines run (family 6, model 207) it takes its Prescott (SSE3)
// kernels, a third of the speed the AVX-512 ones reach. The choice can only be
// made before OpenBLAS initialises, through OPENBLAS_CORETYPE, so a program
// that finds it under-served re-executes itself once with the variable set.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_BLAS_H
#define DTRT_BLAS_H

#include <string>

namespace dtrt {

/// The OpenBLAS kernels this CPU supports best ("SkylakeX", "Cooperlake",
/// "Haswell"), or "" when dt has nothing better to suggest than OpenBLAS's
/// own detection.
std::string bestBlasCore();

/// OpenBLAS reads its settings from the environment when the program loads.
/// When OPENBLAS_CORETYPE is unset and OpenBLAS chose weaker kernels than
/// bestBlasCore(), or OPENBLAS_THREAD_TIMEOUT is unset (its idle threads would
/// spin on the cores the kernels' pool needs), re-executes this program (same
/// arguments) with them set; returns only when no re-execution happened.
void reexecWithBetterBlas(char **argv);

/// "OpenBLAS 0.3.21, SkylakeX kernels" and how they were chosen.
std::string describeBlas();

} // namespace dtrt

#endif // DTRT_BLAS_H
