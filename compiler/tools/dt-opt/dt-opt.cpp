//===- dt-opt.cpp - runs dt passes on .mlir files -------------------------===//
//
// mlir-opt for dt: the dt dialect, the upstream dialects it lowers through, the
// dt passes and the upstream passes the pipeline uses. lit tests in test/ drive
// it.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTDialect.h"
#include "dt/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  dt::registerDTTransformsPasses();
  dt::registerDTPipelines();
  dt::registerDTConversionPasses();
  dt::registerLowerToLLVMPipeline();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<dt::DTDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dt optimizer driver\n", registry));
}
