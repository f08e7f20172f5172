//===- dtc.cpp - The dt compiler driver -----------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc FILE -o train` runs the pipeline top to bottom, one call per stage:
// parse, check (imports, models, the train job, parallel and deploy blocks),
// MLIRGen, the train step (autodiff, optimizer), fusion and memory planning,
// lowering, LLVM, and linking with the runtime. `-fsyntax-only` stops after
// checking; `--emit=STAGE` prints a stage's output and stops there; `--report`
// prints what each rank's program costs (memory and collectives). Any error exits with status 1. The pipeline
// runs on a thread with a large stack, a second guard (after the parser's
// nesting limits) against deep recursion.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/MLIRGen/MLIRGen.h"
#include "dt/Package/Package.h"
#include "dt/Parse/Parser.h"
#include "dt/Pipeline/Schedule.h"
#include "dt/Sema/Sema.h"
#include "dt/Sema/TraceRecorder.h"
#include "dt/Target/CudaPlan.h"
#include "dt/Target/Linker.h"
#include "dt/Target/Manifest.h"
#include "dt/Target/ObjectEmitter.h"
#include "dt/Target/PTXEmitter.h"
#include "dt/Target/Report.h"
#include "dt/Transforms/Passes.h"
#include "dtrt/data/idx.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace dt;
using namespace llvm;

namespace {
enum class EmitAction {
  None,
  AST,
  Trace,
  Schedule,
  DT,
  TrainStep,
  Sharded,
  Partitioned,
  Planned,
  Report,
  PTX,
  GpuPlan,
  Manifest,
  Lowered,
  LLVM,
  Obj
};

cl::OptionCategory dtcCategory("dtc options");

cl::opt<std::string> inputFilename(cl::Positional, cl::Required,
                                   cl::desc("<input .dt file>"),
                                   cl::cat(dtcCategory));
cl::opt<std::string>
    outputFilename("o",
                   cl::desc("Output file (default: the input's "
                            "name without .dt; '-' prints an "
                            "--emit stage to stdout)"),
                   cl::value_desc("file"), cl::init(""), cl::cat(dtcCategory));
cl::opt<bool> syntaxOnly("fsyntax-only",
                         cl::desc("Parse and check the file, nothing more"),
                         cl::cat(dtcCategory));
cl::opt<EmitAction> emitAction(
    "emit", cl::desc("Print one stage's output and stop"),
    cl::init(EmitAction::None),
    cl::values(
        clEnumValN(EmitAction::AST, "ast", "the parsed file's AST"),
        clEnumValN(EmitAction::Trace, "trace",
                   "the train loss as primitive ops (the tracer's output, one "
                   "global micro-batch)"),
        clEnumValN(EmitAction::Schedule, "schedule",
                   "the pipeline schedule: each pipeline rank's passes per "
                   "time slot, its bubble and in-flight micro-batches"),
        clEnumValN(EmitAction::DT, "dt", "the dt dialect from MLIRGen"),
        clEnumValN(EmitAction::TrainStep, "train-step",
                   "after autodiff and the optimizer: the entry points"),
        clEnumValN(EmitAction::Sharded, "sharded",
                   "after sharding propagation: every value's layout over "
                   "the mesh"),
        clEnumValN(EmitAction::Partitioned, "partitioned",
                   "the program of one rank, with its collectives"),
        clEnumValN(EmitAction::Planned, "planned",
                   "after fusion and memory planning"),
        clEnumValN(EmitAction::Report, "report",
                   "the --report (text, or --report=json) without building "
                   "the program"),
        clEnumValN(EmitAction::PTX, "ptx",
                   "the GPU kernels of the fused regions, as PTX for sm_90"),
        clEnumValN(EmitAction::GpuPlan, "gpu-plan",
                   "the GPU launch sequence of every entry point, as JSON "
                   "(or why the program cannot run on a GPU)"),
        clEnumValN(EmitAction::Manifest, "manifest",
                   "the JSON manifest embedded in the program"),
        clEnumValN(EmitAction::Lowered, "lowered",
                   "loops and kernel calls over the arena"),
        clEnumValN(EmitAction::LLVM, "llvm", "optimised LLVM IR"),
        clEnumValN(EmitAction::Obj, "obj", "the object file (no linking)")),
    cl::cat(dtcCategory));
enum class ReportFormat { None, Text, Json };
cl::opt<ReportFormat> report(
    "report", cl::ValueOptional,
    cl::desc("Print what each rank's program costs: its memory plan (per "
             "kind of state, beside the whole model's) and its collectives "
             "with the bytes they move per step (--report=json: the same as "
             "JSON)"),
    cl::init(ReportFormat::None),
    cl::values(clEnumValN(ReportFormat::Text, "", "as text"),
               clEnumValN(ReportFormat::Text, "text", "as text"),
               clEnumValN(ReportFormat::Json, "json", "as JSON")),
    cl::cat(dtcCategory));
cl::opt<std::string> packageTarget(
    "package",
    cl::desc("Write a directory (-o DIR) to submit as a training job: the "
             "program for a portable CPU and, from the deploy block, a "
             "Dockerfile, an entry point and the job request (SageMaker, "
             "Vertex AI) or a batch script (Slurm), and a README"),
    cl::value_desc("sagemaker|vertex|slurm"), cl::init(""),
    cl::cat(dtcCategory));
cl::opt<int> worldSize(
    "world-size",
    cl::desc("Compile for this many ranks by resizing the data-parallel axis, "
             "keeping the global batch (each rank's micro-batch stays, "
             "accumulation changes): for a job restarted on other hosts, "
             "whose checkpoints reshard"),
    cl::value_desc("ranks"), cl::init(0), cl::cat(dtcCategory));
cl::opt<bool> portable(
    "portable",
    cl::desc("Build for any x86-64 CPU with AVX2 and FMA (x86-64-v3) instead "
             "of this one, as --package does"),
    cl::cat(dtcCategory));
enum class GpuCode { Auto, On, Off };
cl::opt<GpuCode> gpuCode(
    "gpu",
    cl::desc("Whether the program also carries GPU code, for its "
             "--backend cuda (default: $DT_GPU, else auto)"),
    cl::init(GpuCode::Auto),
    cl::values(clEnumValN(GpuCode::Auto, "auto",
                          "when the CUDA toolkit is found and every op has a "
                          "GPU implementation (else the program says why)"),
               clEnumValN(GpuCode::On, "on",
                          "always: an error when it cannot be built"),
               clEnumValN(GpuCode::Off, "off",
                          "never (compiles faster: no PTX)")),
    cl::cat(dtcCategory));
// A developer's knob: the GPU session compares the generated kernels' memory
// throughput with and without it (scripts/gpu-bundle.sh builds both).
cl::opt<int64_t> gpuUnroll(
    "gpu-unroll",
    cl::desc("Elements a thread of a generated GPU kernel loads before it "
             "stores any (1: one at a time; default 4)"),
    cl::init(dt::kGpuUnroll), cl::Hidden, cl::cat(dtcCategory));
// Hidden too: the plan with every generated kernel launched alone, to
// measure the merged launches against (scripts/gpu-bundle.sh's variants).
cl::opt<bool>
    gpuMerge("gpu-merge",
             cl::desc("Launch independent small generated GPU kernels together "
                      "(default true)"),
             cl::init(true), cl::Hidden, cl::cat(dtcCategory));
cl::opt<bool> checked(
    "checked",
    cl::desc("Emit a checked program: every arena access the entry points "
             "make is checked against the memory plan at run time, and the "
             "runtime and kernels run under AddressSanitizer and UBSan "
             "(slower; for tests and for hunting a suspected miscompile)"),
    cl::cat(dtcCategory));
cl::opt<double> bucketMiB(
    "bucket-mb",
    cl::desc("Collectives of up to this many MiB are fused into buckets of at "
             "most this size (default 4; 0: no buckets)"),
    cl::value_desc("MiB"), cl::init(double(kDefaultBucketBytes) / 1048576.0),
    cl::cat(dtcCategory));
cl::opt<bool> noSpans(
    "no-spans",
    cl::desc("Compile the ops' trace spans out: the program's --trace then "
             "records the runtime's phases and the collectives only (for "
             "measuring what the spans cost)"),
    cl::cat(dtcCategory));
cl::opt<bool> overlap(
    "overlap",
    cl::desc("Run collectives on a communication thread beside the compute "
             "that precedes their results' first use (worth it where "
             "communication has cores or hardware of its own; "
             "bench/overlap.cpp measures a machine)"),
    cl::cat(dtcCategory));
cl::opt<std::string> targetCPU("mcpu",
                               cl::desc("CPU to generate code for (default: "
                                        "native, the host's)"),
                               cl::value_desc("cpu"), cl::init("native"),
                               cl::cat(dtcCategory));
cl::list<std::string> includeDirs("I",
                                  cl::desc("Add a directory to search for "
                                           "imported files"),
                                  cl::value_desc("dir"), cl::Prefix,
                                  cl::cat(dtcCategory));
cl::opt<std::string> stdlibDir("stdlib",
                               cl::desc("The standard library directory "
                                        "(default: $DT_STDLIB, then "
                                        "<dtc>/../share/dt/stdlib, then the "
                                        "source tree's stdlib/)"),
                               cl::value_desc("dir"), cl::init(""),
                               cl::cat(dtcCategory));

/// Prints the train loss's trace over one global micro-batch (micro_batch
/// times the data-parallel size), as MLIRGen receives it.
/// What --report's prediction needs of the job: its steps (epochs over a
/// source whose size dtc can read), the batch, and the deploy blocks' prices.
ReportJob reportJob(const Job &job) {
  ReportJob r;
  r.samplesPerStep = job.batch;
  if (job.data.kind == "tokens")
    if (const dt::Constant *seq = lookup(job.data.args, "seq"))
      r.tokensPerSample = seq->getInt();
  if (job.steps) {
    r.steps = job.steps;
  } else if (job.epochs) {
    std::optional<int64_t> samples;
    if (job.data.kind == "synthetic") {
      if (const dt::Constant *n = lookup(job.data.args, "count"))
        samples = n->getInt();
    } else if (job.data.kind == "idx") {
      const dt::Constant *images = lookup(job.data.args, "images");
      if (images && sys::fs::exists(images->getString()))
        if (dtrt::Expected<std::vector<int64_t>> dims =
                dtrt::readIdxDims(images->getString().str(), 0);
            dims && !dims->empty())
          samples = (*dims)[0];
    }
    if (samples)
      r.steps = *job.epochs * (*samples / job.batch);
    else
      r.stepsUnknown = "the run's epochs are as long as its train data, "
                       "whose size the program learns when it opens it";
  }
  for (const DeployConfig &d : job.deploys) {
    const dt::Constant *price = d.get("price_per_hour");
    if (!price)
      continue;
    const dt::Constant *hosts = d.get(d.target == "sagemaker" ? "count"
                                      : d.target == "slurm"   ? "nodes"
                                                              : "replicas");
    r.prices.push_back(
        {d.target, price->getNumber(), hosts ? hosts->getInt() : 1});
  }
  return r;
}

int printTrace(const Job &job) {
  TraceRecorder recorder;
  int64_t batch = job.microBatch * job.parallel.getDataParallelSize();
  if (failed(traceLoss(job, DataRole::Train, batch, recorder)))
    return 1;
  recorder.print(outs());
  for (const std::string &violation : recorder.getViolations())
    WithColor::error(errs(), "dtc")
        << "trace violates an op contract: " << violation << "\n";
  return recorder.getViolations().empty() ? 0 : 1;
}

std::unique_ptr<ToolOutputFile> openStageOutput();

/// --emit=schedule: the pipeline's static schedule as a table.
int printSchedule(const Job &job) {
  const std::optional<PipelineConfig> &p = job.parallel.pipeline;
  if (!p) {
    WithColor::error(errs(), "dtc")
        << inputFilename << ": the job has no pipeline to schedule (its "
        << "parallel block sets no pipeline = {axis, stages, ...})\n";
    return 1;
  }
  int64_t ranks = job.parallel.getAxisSize(p->axis);
  int64_t chunks = int64_t(p->stages.size()) / ranks;
  pipeline::Kind kind =
      p->schedule == PipelineConfig::Schedule::GPipe ? pipeline::Kind::GPipe
      : p->schedule == PipelineConfig::Schedule::Interleaved
          ? pipeline::Kind::Interleaved
          : pipeline::Kind::OneFOneB;
  Expected<pipeline::Schedule> schedule =
      pipeline::buildSchedule(kind, ranks, p->microbatches, chunks);
  if (!schedule) {
    // Sema checked the recipe, so this is the compiler's fault.
    WithColor::error(errs(), "dtc") << toString(schedule.takeError()) << "\n";
    return 1;
  }
  std::unique_ptr<ToolOutputFile> out = openStageOutput();
  if (!out)
    return 1;
  out->os() << pipeline::formatSchedule(*schedule, p->axis);
  out->keep();
  return 0;
}

/// Where an --emit stage goes: -o, or stdout.
std::unique_ptr<ToolOutputFile> openStageOutput() {
  std::string path = outputFilename.empty() ? "-" : outputFilename.getValue();
  std::error_code ec;
  auto out = std::make_unique<ToolOutputFile>(path, ec, sys::fs::OF_None);
  if (ec) {
    WithColor::error(errs(), "dtc")
        << "cannot write '" << path << "': " << ec.message() << "\n";
    return nullptr;
  }
  return out;
}

/// Prints `module` (or `text`) as the requested stage and returns the exit
/// status.
int emitStage(mlir::ModuleOp module, StringRef text = {}) {
  std::unique_ptr<ToolOutputFile> out = openStageOutput();
  if (!out)
    return 1;
  if (module)
    module.print(out->os());
  else
    out->os() << text << "\n";
  out->keep();
  return 0;
}

/// Runs a pipeline; errors have been reported through the diagnostic handler.
LogicalResult runPipeline(mlir::ModuleOp module,
                          function_ref<void(mlir::OpPassManager &)> build) {
  mlir::PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

/// The pipeline, one call per stage. Returns the exit status.
int compile(const char *argv0) {
  SourceMgr sourceMgr;
  DiagnosticEngine diag(sourceMgr, errs());
  SearchPaths paths;
  paths.stdlibDir = findStdlibDir(
      stdlibDir, argv0, reinterpret_cast<void *>(&compile), DT_STDLIB_DIR);
  paths.includeDirs.assign(includeDirs.begin(), includeDirs.end());
  ModuleLoader loader(diag, paths);

  // 1. Parse the main file.
  const LoadedModule *main = loader.loadMain(inputFilename);
  if (!main)
    return 1;
  if (emitAction == EmitAction::AST) {
    ast::dump(*main->ast, sourceMgr, outs());
    return 0;
  }

  // 2. Check it: imports, models, train, parallel, deploy.
  AnalyzeOptions analyzeOptions;
  if (worldSize > 0)
    analyzeOptions.worldSize = worldSize;
  FailureOr<std::unique_ptr<Program>> program =
      analyze(loader, *main, analyzeOptions);
  if (failed(program))
    return 1;
  if (syntaxOnly)
    return 0;
  const Job *job = (*program)->getJob();
  if (!job) {
    WithColor::error(errs(), "dtc")
        << inputFilename << " has no train block: there is nothing to compile "
        << "(use -fsyntax-only to check a file of models)\n";
    return 1;
  }
  if (emitAction == EmitAction::Trace)
    return printTrace(*job);
  if (emitAction == EmitAction::Schedule)
    return printSchedule(*job);
  std::optional<package::Platform> platform;
  if (!packageTarget.empty()) {
    platform = package::parsePlatform(packageTarget);
    if (!platform || emitAction != EmitAction::None || checked ||
        outputFilename.empty() || worldSize > 0) {
      WithColor::error(errs(), "dtc")
          << (!platform ? "--package takes sagemaker, vertex or slurm, not '" +
                              packageTarget + "'"
              : outputFilename.empty()
                  ? std::string("--package writes a directory: name it with "
                                "-o DIR")
                  : std::string("--package builds the whole program; it does "
                                "not combine with --emit, --checked or "
                                "--world-size"))
          << "\n";
      return 1;
    }
  }

  // From here on, errors are MLIR diagnostics printed against the same sources.
  mlir::MLIRContext context;
  context.loadDialect<DTDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect, mlir::math::MathDialect,
                      mlir::linalg::LinalgDialect, mlir::memref::MemRefDialect,
                      mlir::scf::SCFDialect, mlir::vector::VectorDialect,
                      mlir::LLVM::LLVMDialect, mlir::mesh::MeshDialect>();
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context, errs());
  // Errors point at the .dt source; IR dumps are for dt-opt.
  context.printOpOnDiagnostic(false);

  if (platform && failed(package::checkPackage(*job, *platform, context)))
    return 1;

  // 3. MLIRGen: the dt dialect, the loss and eval over one micro-batch.
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlirGen(context, *job, inputFilename);
  if (!module)
    return 1;
  if (emitAction == EmitAction::DT)
    return emitStage(*module);

  // 4. The train step: autodiff and the optimizer.
  if (failed(runPipeline(*module, buildTrainStepPipeline)))
    return 1;
  if (emitAction == EmitAction::TrainStep)
    return emitStage(*module);

  // 5. Sharding: layouts over the mesh, then the program of one rank.
  if (failed(runPipeline(*module, buildShardingPipeline)))
    return 1;
  if (emitAction == EmitAction::Sharded)
    return emitStage(*module);
  // A pipeline's messages and a communication thread's collectives would call
  // MPI from two threads at once, which the engine's thread level forbids.
  if (overlap && (*module)->hasAttr(dt::names::kPipelineAttr)) {
    llvm::errs() << "dtc: error: --overlap is not supported for pipelined "
                    "programs yet: drop --overlap (the pipeline's schedule "
                    "already overlaps the stages)\n";
    return 1;
  }
  if (failed(runPipeline(*module, [](mlir::OpPassManager &pm) {
        buildPartitionPipeline(pm, int64_t(bucketMiB * 1048576.0), overlap);
      })))
    return 1;
  if (emitAction == EmitAction::Partitioned)
    return emitStage(*module);

  // 6. Fusion and the static memory plan, which keeps buffers alive as long
  // as the GPU plan's zero copies need when the program carries GPU code
  // (7b; a checked program is a CPU debugging build).
  bool withGpu =
      gpuCode != GpuCode::Off && !checked && !findCudaToolkit().empty();
  if (failed(runPipeline(*module, [&](mlir::OpPassManager &pm) {
        buildFuseAndPlanPipeline(pm, withGpu);
      })))
    return 1;
  if (emitAction == EmitAction::Planned)
    return emitStage(*module);
  // The ops that are spans of a trace, numbered once for the manifest, the
  // report and code generation.
  if (!noSpans && failed(runPipeline(*module, [](mlir::OpPassManager &pm) {
        pm.addPass(createNumberSpans());
      })))
    return 1;
  if (emitAction == EmitAction::PTX) {
    // With the kernels that the plan's merged launches run, when there is
    // a plan.
    CudaCode plan = buildCudaPlan(*module, gpuUnroll, gpuMerge);
    FailureOr<std::string> ptx =
        emitKernelsPTX(*module, "sm_90", gpuUnroll, plan.merged);
    if (failed(ptx))
      return 1;
    return emitStage(nullptr, *ptx);
  }
  if (report != ReportFormat::None || emitAction == EmitAction::Report) {
    ReportJob facts = reportJob(*job);
    if (failed(
            printReport(*module, report == ReportFormat::Json, outs(), &facts)))
      return 1;
    outs().flush();
    if (emitAction == EmitAction::Report)
      return 0;
  }

  // 7. The manifest, while the globals are still in the module.
  FailureOr<std::string> manifest = buildManifest(*module);
  if (failed(manifest))
    return 1;
  if (emitAction == EmitAction::Manifest)
    return emitStage(nullptr, *manifest);

  // 7b. The GPU code, while the module is still planned: the kernels' PTX and
  // the launch sequence, or why there is none (the program then says so when
  // run with --backend cuda). A checked program is a CPU debugging build.
  CudaCode cuda;
  if (gpuCode == GpuCode::Off)
    cuda.unsupported = "it was compiled with dtc --gpu=off";
  else if (checked)
    cuda.unsupported = "a checked program (dtc --checked) runs on the CPU";
  else if (findCudaToolkit().empty())
    cuda.unsupported = "dtc found no CUDA toolkit (nvvm/libdevice) when it "
                       "compiled the program";
  else if (emitAction == EmitAction::GpuPlan)
    cuda = buildCudaPlan(*module, gpuUnroll, gpuMerge);
  else if (emitAction == EmitAction::None || emitAction == EmitAction::Obj ||
           emitAction == EmitAction::LLVM)
    cuda = buildCudaCode(*module, gpuUnroll, gpuMerge);
  if (!cuda.unsupported.empty() && gpuCode == GpuCode::On) {
    WithColor::error(errs(), "dtc")
        << "--gpu=on: the program cannot run on a GPU: " << cuda.unsupported
        << "\n";
    return 1;
  }
  std::string cudaPlan = cuda.plan;
  if (!cuda.unsupported.empty()) {
    llvm::raw_string_ostream os(cudaPlan);
    os << llvm::json::Value(
        llvm::json::Object{{"unsupported", cuda.unsupported}});
  }
  if (emitAction == EmitAction::GpuPlan)
    return emitStage(nullptr, cudaPlan + "\n");

  // 8. Lowering: loops and kernel calls over the arena, then the LLVM dialect.
  if (failed(runPipeline(*module, [](mlir::OpPassManager &pm) {
        buildLowerToKernelsPipeline(pm, checked);
      })))
    return 1;
  if (emitAction == EmitAction::Lowered)
    return emitStage(*module);
  if (failed(runPipeline(*module, buildLowerToLLVMPipeline)))
    return 1;

  // 9. LLVM: optimised IR, an object file.
  CodegenOptions codegen;
  // A packaged program runs on the platform's machines, not this one.
  bool forAnyCPU = platform || portable;
  codegen.cpu =
      forAnyCPU ? std::string(package::kPortableCPU) : targetCPU.getValue();
  codegen.cudaImage = std::move(cuda.ptx);
  codegen.cudaPlan = std::move(cudaPlan);
  if (emitAction == EmitAction::LLVM) {
    std::unique_ptr<ToolOutputFile> out = openStageOutput();
    if (!out || failed(emitLLVMIR(*module, *manifest, codegen, out->os())))
      return 1;
    out->keep();
    return 0;
  }
  std::string output = outputFilename;
  SmallString<256> packageDir;
  if (platform) {
    packageDir = outputFilename;
    if (std::error_code ec = sys::fs::create_directories(packageDir)) {
      WithColor::error(errs(), "dtc") << "cannot create '" << packageDir
                                      << "': " << ec.message() << "\n";
      return 1;
    }
    SmallString<256> program(packageDir);
    sys::path::append(program, job->name);
    output = std::string(program);
  }
  if (output.empty())
    output = sys::path::stem(inputFilename).str() +
             (emitAction == EmitAction::Obj ? ".o" : "");
  if (emitAction == EmitAction::Obj)
    return failed(emitObjectFile(*module, *manifest, codegen, output)) ? 1 : 0;

  SmallString<128> object;
  if (std::error_code ec = sys::fs::createTemporaryFile("dtc", "o", object)) {
    WithColor::error(errs(), "dtc")
        << "cannot create a temporary file: " << ec.message() << "\n";
    return 1;
  }
  FileRemover removeObject(object);
  if (failed(emitObjectFile(*module, *manifest, codegen, object)))
    return 1;

  // 10. Link with the runtime.
  std::string error;
  RuntimeFlavor flavor = checked     ? RuntimeFlavor::Checked
                         : forAnyCPU ? RuntimeFlavor::Portable
                                     : RuntimeFlavor::Native;
  if (failed(linkExecutable(object, output, argv0, flavor, error))) {
    WithColor::error(errs(), "dtc") << error << "\n";
    return 1;
  }
  if (!platform)
    return 0;
  // 11. The package around it, with the program built for fewer hosts by
  // this dtc, with the same search paths and code generation options.
  std::vector<std::string> rebuild{
      sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&compile)),
      inputFilename, "--bucket-mb=" + std::to_string(bucketMiB)};
  for (const std::string &dir : includeDirs)
    rebuild.push_back("-I" + dir);
  if (!stdlibDir.empty())
    rebuild.push_back("--stdlib=" + stdlibDir);
  if (overlap)
    rebuild.push_back("--overlap");
  if (failed(package::writePackage(*job, *platform, packageDir, job->name,
                                   rebuild, error))) {
    WithColor::error(errs(), "dtc") << error << "\n";
    return 1;
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(dtcCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "dtc: the compiler for declarative distributed "
                              "training\n");
  if (const char *env = std::getenv("DT_GPU");
      env && gpuCode.getNumOccurrences() == 0) {
    std::string value = env;
    if (value == "on")
      gpuCode = GpuCode::On;
    else if (value == "off")
      gpuCode = GpuCode::Off;
    else if (value != "auto" && !value.empty()) {
      WithColor::error(errs(), "dtc")
          << "DT_GPU must be auto, on or off, not '" << value << "'\n";
      return 1;
    }
  }
  if (!(bucketMiB >= 0)) {
    WithColor::error(errs(), "dtc")
        << "--bucket-mb must be a size in MiB, 0 or more, not " << bucketMiB
        << "\n";
    return 1;
  }
  if (overlap && checked) {
    // A checked program poisons the arena around each kernel call, which a
    // collective running on another thread would trip over.
    WithColor::error(errs(), "dtc")
        << "--overlap and --checked do not combine: a checked program runs "
           "its collectives on the rank's own thread\n";
    return 1;
  }
  int status = 1;
  runOnLargeStack([&] { status = compile(argv[0]); });
  return status;
}
