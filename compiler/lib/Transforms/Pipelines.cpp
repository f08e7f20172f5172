//===- Pipelines.cpp - the dt pass pipelines ----------------------------===//
//
// The order of the passes between MLIRGen and lowering, in one place, shared by
// dtc, dt-opt (`-dt-train-step`, `-dt-fuse-and-plan`) and the tests.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void dt::buildTrainStepPipeline(OpPassManager &pm) {
  // Canonicalise first so that e.g. transposes fold into matmuls before they
  // are differentiated (their adjoints would otherwise be transposes too).
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createAutocast());
  pm.addPass(createPipelineStages());
  pm.addPass(createAutodiff());
  pm.addPass(createOptimizer());
  // Before CSE, which would merge values of different stages.
  pm.addPass(createPipelineSplit());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After CSE: each use of a 16-bit value widens it on its own.
  pm.addPass(createWidenCompute());
}

void dt::buildShardingPipeline(OpPassManager &pm) {
  pm.addPass(createShardGlobals());
  pm.addPass(createShardPropagation());
}

void dt::buildPartitionPipeline(OpPassManager &pm, int64_t bucketBytes,
                                bool overlap) {
  pm.addPass(createSpmdPartition());
  // Not CSE: it would merge the all-gathers that ZeRO-3 repeats on purpose.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createBucketCollectives(BucketCollectivesOptions{bucketBytes}));
  if (overlap)
    pm.addPass(createOverlapCollectives());
  pm.addPass(createVerifyCollectives());
}

void dt::buildFuseAndPlanPipeline(OpPassManager &pm, bool gpu) {
  pm.addNestedPass<func::FuncOp>(createFuseElementwise());
  pm.addNestedPass<func::FuncOp>(createFuseEpilogues());
  pm.addPass(createPlanMemory(PlanMemoryOptions{gpu}));
}

void dt::registerDTPipelines() {
  PassPipelineRegistration<>("dt-train-step",
                             "MLIRGen output to the train step",
                             buildTrainStepPipeline);
  PassPipelineRegistration<>(
      "dt-shard", "Layouts of the state and of every value over the mesh",
      buildShardingPipeline);
  PassPipelineRegistration<>(
      "dt-partition", "The program of one rank, with its collectives",
      [](OpPassManager &pm) { buildPartitionPipeline(pm); });
  PassPipelineRegistration<>(
      "dt-fuse-and-plan", "Fusion and memory planning",
      [](OpPassManager &pm) { buildFuseAndPlanPipeline(pm); });
}
