//===- dt/Package/Package.h - Jobs packaged for cloud platforms -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc --package sagemaker|vertex|slurm model.dt -o DIR` writes a directory a
// user submits as it is: the program (compiled by dtc for a portable CPU
// baseline), and for the cloud platforms a Dockerfile, an entry point that
// maps the platform's environment to the program's options and starts its
// ranks and the platform's job request as JSON, for Slurm a batch script;
// and a README with the command that submits it. Every
// field comes from the program's deploy block; what a request cannot express
// is a located error before anything is written.
//
//===----------------------------------------------------------------------===//

#ifndef DT_PACKAGE_PACKAGE_H
#define DT_PACKAGE_PACKAGE_H

#include "dt/Sema/Job.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <string>

namespace dt::package {

enum class Platform { SageMaker, Vertex, Slurm };

/// "sagemaker", "vertex", "slurm"; nullopt otherwise.
std::optional<Platform> parsePlatform(llvm::StringRef name);
llvm::StringRef platformName(Platform platform);

/// The CPU the packaged program is compiled for: AVX2 and FMA, which every
/// instance type of both platforms has, rather than the build machine's.
constexpr const char *kPortableCPU = "x86-64-v3";

/// Checks that the job can be packaged for `platform` (its deploy block
/// exists and gives what the request needs); errors are reported against the
/// .dt source through `context`'s diagnostic handler.
mlir::LogicalResult checkPackage(const Job &job, Platform platform,
                                 mlir::MLIRContext &context);

/// Writes everything but the program into `dir`: Dockerfile, entrypoint.sh,
/// the job request, README.md. `program` is the program's file name in `dir`.
/// A restarted job may get fewer hosts than it asked for; the program for
/// each smaller host count the mesh allows is built beside it
/// (`PROGRAM.hosts-N`) by running `rebuild` (dtc, the input and its search
/// options) with --world-size and --portable.
mlir::LogicalResult writePackage(const Job &job, Platform platform,
                                 llvm::StringRef dir, llvm::StringRef program,
                                 llvm::ArrayRef<std::string> rebuild,
                                 std::string &error);

} // namespace dt::package

#endif // DT_PACKAGE_PACKAGE_H
