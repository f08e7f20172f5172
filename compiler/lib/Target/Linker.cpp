//===- Linker.cpp - links an object file with the runtime -----------------===//
//
// Runs the system C++ driver (the compiler dt was built with, or $DT_CXX) on
// the object file, libdtrt.a (main, loaders, checkpoints), libdtkernels.a and
// their system dependencies. The libraries are found beside dtc: `<dir of
// dtc>/../lib`.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/Linker.h"
#include "LinkConfig.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

using namespace mlir;

namespace {

/// The C++ driver: $DT_CXX, the one dt was built with, or c++ on the PATH.
std::string findDriver() {
  if (const char *env = std::getenv("DT_CXX"))
    return env;
  if (llvm::sys::fs::can_execute(DT_LINK_DRIVER))
    return DT_LINK_DRIVER;
  if (auto cxx = llvm::sys::findProgramByName("c++"))
    return *cxx;
  return "";
}

} // namespace

LogicalResult dt::linkExecutable(llvm::StringRef object, llvm::StringRef output,
                                 const char *argv0, RuntimeFlavor flavor,
                                 std::string &error) {
  bool checked = flavor == RuntimeFlavor::Checked;
  std::string self =
      llvm::sys::fs::getMainExecutable(argv0, (void *)&linkExecutable);
  llvm::SmallString<256> libDir(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(libDir, "..", "lib");
  llvm::SmallString<256> runtime(libDir), kernels(libDir);
  llvm::sys::path::append(runtime,
                          checked ? "libdtrt-checked.a" : "libdtrt.a");
  llvm::sys::path::append(kernels, checked ? "libdtkernels-checked.a"
                                   : flavor == RuntimeFlavor::Portable
                                       ? "libdtkernels-portable.a"
                                       : "libdtkernels.a");
  for (const auto &lib : {runtime, kernels})
    if (!llvm::sys::fs::exists(lib)) {
      error = ("the runtime library '" + lib +
               "' is missing; build dt first "
               "(scripts/setup.sh)")
                  .str();
      return failure();
    }

  std::string driver = findDriver();
  if (driver.empty()) {
    error = "no C++ compiler to link with: install g++ or clang, or set DT_CXX";
    return failure();
  }
  // The runtime and the kernels call each other (kernels report data faults
  // through the runtime's dtk_fail), hence the group.
  std::vector<std::string> args{driver,       object.str(),
                                "-o",         output.str(),
                                "-Wl,--start-group", std::string(runtime),
                                std::string(kernels)};
  // The GPU kernels, where dt was built with the CUDA toolkit: libdtrt's CUDA
  // device calls them (not the checked runtime's).
  llvm::SmallString<256> gpuKernels(libDir);
  llvm::sys::path::append(gpuKernels, "libdtkernels-cuda.a");
  if (!checked && llvm::sys::fs::exists(gpuKernels))
    args.push_back(std::string(gpuKernels));
  args.push_back("-Wl,--end-group");
  // System libraries the runtime and kernels need (see runtime/ and kernels/
  // CMake).
  llvm::SmallVector<llvm::StringRef> extra;
  llvm::StringRef(DT_LINK_LIBS).split(extra, '|', -1, false);
  for (llvm::StringRef lib : extra)
    args.push_back(lib.str());
  if (checked)
    args.push_back(DT_SANITIZE_FLAGS);
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());

  std::string message;
  int status = llvm::sys::ExecuteAndWait(driver, argRefs, std::nullopt, {}, 0,
                                         0, &message);
  if (status != 0) {
    error = "linking '" + output.str() + "' failed" +
            (message.empty() ? "" : ": " + message) +
            " (the linker's output is above)";
    return failure();
  }
  return success();
}
