//===- program.cpp - The body of an emitted program's main ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// runProgram reads top to bottom as the life of a run: manifest, options,
// launch and device, data, arena (fresh or from a checkpoint), metrics, the
// training loop. Each stage returns an error value; this is the one place
// that prints errors and turns them into exit codes.
//
//===----------------------------------------------------------------------===//

#include "dtrt/abi.h"
#include "dtrt/arena.h"
#include "dtrt/blas.h"
#include "dtrt/checked.h"
#include "dtrt/checkpoint.h"
#include "dtrt/collectives.h"
#include "dtrt/comm.h"
#include "dtrt/config.h"
#include "dtrt/data/batch.h"
#include "dtrt/data/source.h"
#include "dtrt/eval.h"
#include "dtrt/init.h"
#include "dtrt/launch.h"
#include "dtrt/loop.h"
#include "dtrt/manifest.h"
#include "dtrt/memory.h"
#include "dtrt/metrics.h"
#include "dtrt/offload.h"
#include "dtrt/options.h"
#include "dtrt/peaks.h"
#include "dtrt/pipeline.h"
#include "dtrt/pretrained.h"
#include "dtrt/report.h"
#include "dtrt/run_report.h"
#include "dtrt/signals.h"
#include "dtrt/tensorboard.h"
#include "dtrt/trace.h"

#include "dtk/kernels.h"

#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace dtrt {

namespace {

/// Sends this process's standard output to /dev/null.
void silenceStdout() {
  std::fflush(stdout);
  int fd = ::open("/dev/null", O_WRONLY);
  if (fd >= 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::close(fd);
  }
}

/// The state of one run, built stage by stage.
class Run {
public:
  Run(const Program &program, std::string name)
      : program_(program), name_(std::move(name)) {}

  int main(int argc, char **argv);

private:
  Expected<int> execute(int argc, char **argv);
  Status openData();
  Status restoreOrInitialise();
  Status checkCheckpointDir();
  Status openCommunicator();
  /// offload = "optimizer" on a GPU (or under DTRT_TEST_OFFLOAD=1, on the
  /// CPU too): wraps the device so that the optimizer's state and update
  /// stay in host memory (dtrt/offload.h).
  Status offloadOptimizerIfAsked();
  Status loadInitialWeights();
  void openTensorBoard();
  Status openTrace();
  Expected<int> exportModel();
  void printBanner();
  /// timing.jsonl's first record of this run: what the run report shows
  /// beside the records (dtrt/run_report.h).
  void recordRun();
  /// The log directory's report.html at the end of a run (first rank).
  void writeReport();

  /// The program as the device runs it (openDevice may swap its entries).
  Program program_;
  std::string name_;
  Manifest manifest_;
  RunConfig config_;
  Launch launch_;
  /// The collectives' engine; this rank's coordinates on the mesh.
  std::unique_ptr<Communicator> comm_;
  std::vector<int> coords_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<DataSource> train_, eval_;
  std::optional<BatchStager> trainStager_, evalStager_;
  std::optional<Arena> arena_;
  std::optional<MetricsLog> metrics_, timing_;
  std::optional<EventWriter> tensorboard_, tensorboardRank_;
  /// --trace DIR: this rank's trace (dtrt/trace.h), and the mesh of a
  /// program of one rank, which has no communicator to hold one.
  std::unique_ptr<Tracer> tracer_;
  /// MFU's denominator: the host's measured sgemm peak, or the GPU's
  /// datasheet peak; and on the host how it was had, for the banner.
  std::optional<double> peakFlops_;
  std::optional<HostPeaks> hostPeaks_;
  /// A GPU's, measured (or cached) beside its datasheet's peak.
  std::optional<DevicePeaks> devicePeaks_;
  std::optional<double> linkBytesPerS_;
  std::optional<PredictedStep> predicted_;
  Mesh oneRank_;
  int64_t stepsPerEpoch_ = 0, totalSteps_ = 0;
  std::optional<TrainPosition> resumed_;
  std::string resumedFrom_;
  /// What --init/`init` loaded, for the banner ("" without one).
  std::string initSummary_;
};

int Run::main(int argc, char **argv) {
  Expected<int> code = Error("");
  // Errors are values throughout the runtime; this catches what the standard
  // library may still throw (bad_alloc, filesystem_error) so that a program
  // never dies with an uncaught exception.
  try {
    code = execute(argc, argv);
  } catch (const std::exception &e) {
    code = Error(fmt::format("unexpected failure: {}", e.what()));
  }
  setProgramCommunicator(nullptr);
  comm_.reset();
  if (code)
    return *code;
  std::fflush(stdout);
  // Every rank of a failed job may speak; say which one this is.
  std::string who = launch_.worldSize > 1
                        ? fmt::format("{} (rank {})", name_, launch_.rank)
                        : name_;
  fmt::print(stderr, "{}: error: {}\n", who, code.error().message());
  return code.error().exitCode();
}

Expected<int> Run::execute(int argc, char **argv) {
  Expected<Options> options = parseOptions(argc, argv);
  // --print-manifest works even when the manifest is invalid: it is how one
  // looks at what dtc emitted.
  if (options && options->printManifest) {
    auto j = nlohmann::json::parse(program_.manifest, nullptr, false);
    fmt::print("{}\n", j.is_discarded() ? program_.manifest : j.dump(2));
    return int(kExitOk);
  }
  Expected<Manifest> manifest = parseManifest(program_.manifest);
  if (!manifest)
    return manifest.error();
  manifest_ = std::move(*manifest);
  if (!options) {
    fmt::print(stderr, "{}: error: {}\n\n{}", name_, options.error().message(),
               usageText(name_, manifest_));
    return int(kExitUsage);
  }
  if (options->help) {
    fmt::print("{}", usageText(name_, manifest_));
    return int(kExitOk);
  }
  if (options->version) {
    fmt::print("{}: dt program '{}' (ABI {}), runtime libdtrt {}\n", name_,
               manifest_.name, manifest_.abi, kRuntimeVersion);
    return int(kExitOk);
  }
  Expected<RunConfig> config = resolveConfig(manifest_, *options);
  if (!config)
    return config.error();
  config_ = *config;
  if (!config_.reportHtml.empty()) {
    if (Status s = writeRunReport(config_.logDir, config_.reportHtml); !s)
      return s.error();
    fmt::print("report: {} (from {})\n", config_.reportHtml, config_.logDir);
    return int(kExitOk);
  }

  Expected<Launch> launch = detectLaunch();
  if (!launch)
    return launch.error();
  launch_ = *launch;
  if (Status s = openCommunicator(); !s)
    return s.error();
  // The job's progress is the first rank's to tell: N copies of every line
  // would bury it. Every rank still reports its own errors on stderr.
  if (!launch_.isLeader())
    silenceStdout();
  Expected<std::unique_ptr<Device>> device =
      openDevice(config_.backend, launch_, &program_,
                 CollectiveSetup{comm_.get(), config_.collectives,
                                 std::chrono::seconds(config_.timeoutSeconds)});
  if (!device)
    return device.error();
  device_ = std::move(*device);
  if (Status s = offloadOptimizerIfAsked(); !s)
    return s.error();
  // On a GPU the entry points are the GPU plan's.
  Expected<Program> onDevice = device_->programFor(program_);
  if (!onDevice)
    return onDevice.error();
  program_ = *onDevice;
  config_.backend = device_->backend(); // what auto became
  // --collectives chooses between engines of GPU collectives; say so rather
  // than ignore it where there are none.
  if (config_.collectivesGiven && launch_.isLeader() &&
      (config_.backend != Backend::Cuda || manifest_.mesh.names.empty()))
    fmt::print(stderr,
               "{}: warning: --collectives applies to the collectives of a "
               "sharded program on GPUs; {}\n",
               name_,
               manifest_.mesh.names.empty()
                   ? "this program runs one rank and has none"
                   : "on the CPU its collectives are OpenMPI's");
  // Ranks on one machine share its CPUs unless told otherwise.
  if (!config_.threadsGiven && launch_.localWorldSize > 1)
    config_.threads = std::max(1, config_.threads / launch_.localWorldSize);
  // OpenBLAS's threads and the kernels' pool take turns on the same cores.
  openblas_set_num_threads(config_.threads);
  dtk_set_threads(config_.threads);
  installStopHandlers();

  if (Status s = openData(); !s)
    return s.error();
  if (config_.backend == Backend::Cpu)
    if (Status s = checkArenaFits(manifest_.arenaBytes, queryHostMemory(),
                                  name_);
        !s)
      return s.error();
  Expected<Arena> arena = Arena::create(*device_, manifest_);
  if (!arena)
    return arena.error();
  arena_.emplace(std::move(*arena));
  if (Status s = restoreOrInitialise(); !s)
    return s.error();
  if (Status s = checkCheckpointDir(); !s)
    return s.error();
  if (!config_.logDir.empty() && launch_.isLeader()) {
    std::optional<int64_t> resumeStep;
    if (resumed_)
      resumeStep = resumed_->step;
    Expected<MetricsLog> metrics = MetricsLog::open(config_.logDir, resumeStep);
    if (!metrics)
      return metrics.error();
    metrics_.emplace(std::move(*metrics));
    Expected<MetricsLog> timing =
        MetricsLog::open(config_.logDir, resumeStep, "timing.jsonl");
    if (!timing)
      return timing.error();
    timing_.emplace(std::move(*timing));
  }
  openTensorBoard();
  if (Status s = openTrace(); !s)
    return s.error();
  // MFU and the prediction need the compiler's counts, FLOPs a step or the
  // ops' spans (a pipeline has the spans only; programs of the runtime's own
  // tests have neither): only then is the machine measured.
  bool trains = totalSteps_ > 0 && !(resumed_ && resumed_->step >= totalSteps_);
  if (trains && (manifest_.flopsPerStep > 0 || !manifest_.spans.empty()) &&
      device_->backend() == Backend::Cpu) {
    hostPeaks_ = hostPeaks(config_.threads, launch_.localWorldSize);
    peakFlops_ = hostPeaks_->gemmFlops;
    // What a step should take on this machine: the ops at the measured
    // roofline, the collectives at the measured link (every rank probes it).
    if (comm_)
      linkBytesPerS_ = allReduceBandwidth(*comm_);
    // With every rank on this machine, the link is this machine's: dtc
    // --report predicts from it.
    if (linkBytesPerS_ && launch_.isLeader() &&
        launch_.localWorldSize == launch_.worldSize)
      cacheLinkBandwidth(launch_.worldSize, *linkBytesPerS_);
    // (Not without spans, the op list the prediction prices.)
    if (!manifest_.spans.empty()) {
      // The step's products and attention, timed on their own sizes by
      // every rank at once; the first rank of each machine caches them.
      std::vector<KernelCall> calls;
      for (const SpanDesc &s : manifest_.spans)
        if (s.kernel && manifest_.callsPerStep(s.entry) > 0 &&
            std::find(calls.begin(), calls.end(), *s.kernel) == calls.end())
          calls.push_back(*s.kernel);
      std::map<KernelCall, double> times =
          kernelTimes(calls, config_.threads, launch_.localWorldSize,
                      comm_.get(), launch_.localRank == 0);
      predicted_ = predictStep(manifest_, comm_ ? comm_->mesh() : oneRank_,
                               hostPeaks_->gemmFlops, hostPeaks_->copyBytesPerS,
                               linkBytesPerS_, times);
    }
  } else if (trains && manifest_.flopsPerStep > 0) {
    // On a GPU MFU divides by the datasheet's dense peak, as llm.c and PaLM
    // count it; the measured figures stand beside it, and in for it on a
    // GPU the table lacks.
    devicePeaks_ =
        device_->measurePeaks(manifest_.precision, launch_.localRank == 0);
    peakFlops_ = device_->peakFlops(manifest_.precision);
    if (!peakFlops_ && devicePeaks_)
      peakFlops_ = devicePeaks_->gemmFlops;
  }
  printBanner();

  if (resumed_ && resumed_->step >= totalSteps_) {
    if (config_.exportDir.empty() || totalSteps_ > 0)
      fmt::print("nothing to do: the checkpoint is at step {}, and the run "
                 "has {} steps\n",
                 resumed_->step, totalSteps_);
    return exportModel();
  }
  if (totalSteps_ == 0) // --steps 0 --export DIR
    return exportModel();

  recordRun();
  TrainSetup setup;
  setup.program = &program_;
  setup.config = &config_;
  setup.arena = &*arena_;
  setup.trainSource = train_.get();
  setup.trainStager = &*trainStager_;
  setup.evalSource = eval_.get();
  setup.evalStager = evalStager_ ? &*evalStager_ : nullptr;
  setup.metrics = metrics_ ? &*metrics_ : nullptr;
  setup.timing = timing_ ? &*timing_ : nullptr;
  setup.tensorboard = tensorboard_ ? &*tensorboard_ : nullptr;
  setup.tensorboardRank = tensorboardRank_ ? &*tensorboardRank_ : nullptr;
  setup.comm = comm_.get();
  setup.coords = coords_;
  setup.stepsPerEpoch = stepsPerEpoch_;
  setup.totalSteps = totalSteps_;
  std::optional<PipelineRunner> pipeline;
  if (manifest_.pipeline) {
    Expected<PipelineRunner> runner =
        PipelineRunner::create(program_, *arena_, *comm_, coords_);
    if (!runner)
      return runner.error();
    pipeline = std::move(*runner);
    setup.pipeline = &*pipeline;
  }
  if (resumed_) {
    setup.elapsedBefore = resumed_->elapsedSeconds;
    setup.resumedStep = resumed_->step;
  }
  setup.tracer = tracer_.get();
  setup.peakFlops = peakFlops_;
  setup.predicted = predicted_;
  Expected<int> trained = runTraining(setup);
  if (tracer_)
    tracer_->finish();
  if (trained)
    writeReport();
  if (!trained || *trained != int(kExitOk))
    return trained;
  return exportModel();
}

Status Run::loadInitialWeights() {
  Expected<PretrainedLoad> load =
      loadPretrained(config_.initPath, config_.initIgnore, *arena_, coords_);
  // Every rank reads its own pieces; one that fails stops them all here,
  // before the first collective could leave the others waiting.
  Status mine = load ? Status::ok() : Status(load.error());
  if (comm_)
    mine = agreeAcrossRanks(*comm_, mine, "read the pretrained weights",
                            "the run did not start");
  if (!mine)
    return mine;
  std::string fresh;
  for (size_t i = 0; i < load->fresh.size() && i < 8; ++i)
    fresh += fmt::format("{}{}", i ? ", " : "", load->fresh[i]);
  if (load->fresh.size() > 8)
    fresh += fmt::format(" and {} more", load->fresh.size() - 8);
  initSummary_ = fmt::format(
      "; weights from {}: {} of {} parameters, {} read by this rank{}{}{}",
      config_.initPath, load->loaded, load->loaded + load->fresh.size(),
      formatBytes(double(load->bytesRead)),
      load->prefix.empty()
          ? ""
          : fmt::format(", names under '{}'", load->prefix),
      fresh.empty() ? "" : ", initialised as declared: " + fresh,
      load->skipped.empty()
          ? ""
          : fmt::format(", {} file tensor{} skipped", load->skipped.size(),
                        load->skipped.size() == 1 ? "" : "s"));
  return Status::ok();
}

Expected<int> Run::exportModel() {
  if (config_.exportDir.empty())
    return int(kExitOk);
  Expected<std::vector<std::string>> files =
      exportPretrained(config_.exportDir, config_.exportShardBytes, *arena_,
                       comm_.get(), coords_, config_.exportAdapters);
  if (!files)
    return files.error();
  int64_t step = arena_->readI64(*manifest_.find("step"));
  if (config_.exportAdapters) {
    fmt::print("export: the LoRA adapters at step {} in {} "
               "(adapter_model.safetensors, adapter_config.json)\n",
               step, config_.exportDir);
    return int(kExitOk);
  }
  size_t weights = 0;
  bool config = false, index = false;
  for (const std::string &f : *files) {
    weights += f.size() > 12 && f.compare(f.size() - 12, 12, ".safetensors") == 0;
    config |= f.size() >= 11 && f.compare(f.size() - 11, 11, "config.json") == 0;
    index |= f.size() >= 10 && f.compare(f.size() - 10, 10, "index.json") == 0;
  }
  fmt::print("export: the model at step {} in {} ({} safetensors file{}{}{}){}"
             "\n",
             step, config_.exportDir, weights, weights == 1 ? "" : "s",
             index ? " with their index" : "", config ? ", config.json" : "",
             manifest_.adapters ? ", LoRA adapters merged" : "");
  return int(kExitOk);
}

Status Run::offloadOptimizerIfAsked() {
  if (!manifest_.offloadOptimizer)
    return Status::ok();
  // The CPU's arena is host memory already. Tests split it all the same, to
  // run the GPU's path on the CPU.
  const char *test = std::getenv("DTRT_TEST_OFFLOAD");
  bool split =
      device_->backend() == Backend::Cuda || (test && std::string(test) == "1");
  if (!split)
    return Status::ok();
  // Only a pipelined program's manifest lacks the split, and its stages run
  // on the CPU (the GPU plan refuses them): only the test gets here.
  if (!manifest_.offloadSplit)
    return Error(fmt::format("{} is pipelined, and its manifest has no host "
                             "split for offload = \"optimizer\": its arena "
                             "stays whole, in host memory; run it without "
                             "DTRT_TEST_OFFLOAD",
                             name_),
                 kExitUsage);
  if (isCheckedBuild())
    return Error("a checked program (dtc --checked) runs its optimizer over "
                 "the one arena it checks; DTRT_TEST_OFFLOAD=1 does not "
                 "apply to it",
                 kExitUsage);
  device_ = offloadOptimizer(std::move(device_), *manifest_.offloadSplit);
  return Status::ok();
}

Status Run::openCommunicator() {
  const MeshSpec &mesh = manifest_.mesh;
  int world = mesh.worldSize();
  if (world == 1 && launch_.worldSize > 1)
    return Error(fmt::format("this program was started as {}, but it was "
                             "compiled for one rank (its train job has no "
                             "mesh); start it without a launcher, or give it "
                             "a parallel block and compile it again",
                             launch_.describe()),
                 kExitUsage);
  if (world > 1 && launch_.worldSize != world)
    return Error(fmt::format("this program's mesh has {} ranks, but it was "
                             "started as {}; start it as `dtrun -n {} {}` or "
                             "`mpirun -n {} {}`",
                             world, launch_.describe(), world, name_, world,
                             name_),
                 kExitUsage);
  if (world == 1)
    return Status::ok();
  Expected<Mesh> m = Mesh::create(mesh.names, mesh.sizes);
  if (!m)
    return m.error();
  std::optional<Rendezvous> meet;
  if (!launch_.mpiWorld && launch_.masterAddr.empty())
    return Error(fmt::format("this program was started as {}, but nothing "
                             "says where rank 0 listens for the others: set "
                             "MASTER_ADDR (and MASTER_PORT, default {}) on "
                             "every rank",
                             launch_.describe(), kDefaultMasterPort),
                 kExitUsage);
  if (!launch_.mpiWorld) {
    meet.emplace();
    meet->host = launch_.masterAddr;
    meet->port = launch_.masterPort;
    meet->rank = launch_.rank;
    meet->worldSize = launch_.worldSize;
    meet->localWorldSize = launch_.localWorldSize;
    meet->program = manifest_.name;
    meet->timeout = std::chrono::seconds(config_.timeoutSeconds);
  }
  // Consecutive ranks share a node, so the innermost axis, whose groups are
  // consecutive ranks, keeps its (most frequent) collectives inside a node
  // when a node's ranks are a whole number of its groups. A mesh of one axis
  // spans the nodes whatever the order.
  int inner = mesh.sizes.back();
  if (launch_.nodes > 1 && launch_.isLeader() && mesh.sizes.size() > 1 &&
      inner > 1 && launch_.localWorldSize % inner != 0)
    fmt::print(stderr,
               "{}: warning: the mesh's innermost axis '{}' ({} ranks) spans "
               "nodes of {} rank{} each: its collectives cross the network; "
               "start a multiple of {} ranks per node\n",
               name_, mesh.names.back(), inner, launch_.localWorldSize,
               launch_.localWorldSize == 1 ? "" : "s", inner);
  if (manifest_.pipeline)
    sendPipelineMessagesEagerly(manifest_, launch_.localWorldSize);
  Expected<std::unique_ptr<Communicator>> comm = makeMpiCommunicator(
      *m, std::chrono::seconds(config_.timeoutSeconds), meet);
  if (!comm)
    return comm.error();
  comm_ = std::move(*comm);
  comm_->setIoTimeout(std::chrono::seconds(config_.ioTimeoutSeconds));
  if (comm_->rank() != launch_.rank)
    return Error(fmt::format("the launcher says this is rank {}, MPI says {}; "
                             "start the program with one launcher",
                             launch_.rank, comm_->rank()));
  coords_ = meshCoordinates(mesh, launch_.rank);
  std::vector<std::string> names;
  for (const CollectiveDesc &c : manifest_.collectives)
    names.push_back(c.what);
  setProgramCommunicator(comm_.get(), std::move(names));
  return Status::ok();
}

Status Run::openData() {
  const TrainSpec &t = manifest_.train;
  Expected<std::unique_ptr<DataSource>> train =
      openDataSource(config_.trainData, "train");
  if (!train)
    return train.error();
  train_ = std::move(*train);
  Expected<BatchStager> stager = BatchStager::create(
      *train_, manifest_, "train", t.microBatch * t.dataParallel, coords_);
  if (!stager)
    return stager.error();
  trainStager_.emplace(std::move(*stager));

  stepsPerEpoch_ = train_->size() / t.batch;
  if (stepsPerEpoch_ == 0)
    return Error(fmt::format("the train source ({}) has {} samples, fewer "
                             "than one batch of {}",
                             train_->describe(), train_->size(), t.batch));
  totalSteps_ =
      config_.steps ? *config_.steps : *config_.epochs * stepsPerEpoch_;

  bool evaluates =
      program_.evalStep ||
      (manifest_.pipeline && !manifest_.pipeline->stages.front().eval.empty());
  if (config_.evalData && !evaluates) {
    fmt::print(stderr,
               "{}: warning: the program has an eval source but no "
               "dt_eval_step; evaluation is skipped\n",
               name_);
    return Status::ok();
  }
  if (!config_.evalData || !evaluates)
    return Status::ok();
  if (Status s = checkEvalOutputs(manifest_); !s)
    return s;
  Expected<std::unique_ptr<DataSource>> eval =
      openDataSource(*config_.evalData, "eval");
  if (!eval)
    return eval.error();
  eval_ = std::move(*eval);
  Expected<BatchStager> evalStager =
      BatchStager::create(*eval_, manifest_, "eval", 0, coords_);
  if (!evalStager)
    return evalStager.error();
  evalStager_.emplace(std::move(*evalStager));
  return Status::ok();
}

Status Run::restoreOrInitialise() {
  std::string dir;
  if (config_.resume == ResumeMode::Auto) {
    Expected<std::vector<CheckpointRef>> found =
        listCheckpoints(config_.checkpointDir);
    if (!found)
      return found.error();
    if (found->empty())
      fmt::print("--resume auto: no checkpoint in {}; starting a fresh run\n",
                 config_.checkpointDir);
    else
      dir = found->back().path;
  } else if (config_.resume == ResumeMode::Path) {
    dir = config_.resumePath;
  }
  if (dir.empty()) {
    initParams(*arena_, config_.seed, coords_);
    return config_.initPath.empty() ? Status::ok() : loadInitialWeights();
  }
  // A resumed run continues from its checkpoint, which already started from
  // the pretrained weights.

  Expected<TrainPosition> pos = loadCheckpoint(dir, *arena_, coords_);
  // Every rank read its part (or says which could not), however long the
  // others took, before any step.
  if (comm_)
    if (Status s = agreeAcrossRanks(*comm_, pos ? Status::ok() : pos.error(),
                                    "read its part of the checkpoint",
                                    "the run did not resume");
        !s)
      return s.error();
  if (!pos)
    return pos.error();
  if (config_.seedGiven && config_.seed != pos->seed)
    return Error(fmt::format("--seed {} differs from the seed {} of the run "
                             "in '{}'; drop --seed to resume it, or start a "
                             "fresh run",
                             config_.seed, pos->seed, dir),
                 kExitUsage);
  // The seed decides the data order: the resumed run keeps the original.
  config_.seed = pos->seed;
  if (pos->trainSamples != train_->size())
    fmt::print(stderr,
               "{}: warning: the checkpoint was taken with {} train samples, "
               "the train source now has {}: the data order differs from the "
               "original run's\n",
               name_, pos->trainSamples, train_->size());
  resumed_ = *pos;
  resumedFrom_ = dir;
  return Status::ok();
}

Status Run::checkCheckpointDir() {
  if (config_.checkpointDir.empty() || !launch_.isLeader())
    return Status::ok();
  if (Status s = removeCheckpointLeftovers(config_.checkpointDir); !s)
    return s;
  Expected<std::vector<CheckpointRef>> found =
      listCheckpoints(config_.checkpointDir);
  if (!found)
    return found.error();
  int64_t start = resumed_ ? resumed_->step : 0;
  // A step_* directory without a readable manifest was not written by a
  // checkpoint (those appear whole, by rename): someone else's data, or a
  // damaged checkpoint. Never write over it.
  Expected<std::vector<CheckpointRef>> incomplete =
      listIncompleteCheckpoints(config_.checkpointDir);
  if (!incomplete)
    return incomplete.error();
  for (const CheckpointRef &c : *incomplete)
    if (c.step > start)
      return Error(fmt::format("'{}' in the checkpoint directory is not a "
                               "complete checkpoint (its manifest.json is "
                               "missing or unreadable), and this run may "
                               "write a checkpoint of that name; move or "
                               "delete it",
                               c.path),
                   kExitUsage);
  if (found->empty() || found->back().step <= start)
    return Status::ok();
  // This run would write checkpoints at steps that already exist: refuse now
  // rather than fail (or mix two runs) later.
  if (!resumed_)
    return Error(fmt::format("the checkpoint directory '{}' already holds "
                             "checkpoints of an earlier run (the newest: {}); "
                             "continue that run with --resume auto, or choose "
                             "another --checkpoint-dir, or delete them",
                             config_.checkpointDir, found->back().path),
                 kExitUsage);
  return Error(fmt::format("the checkpoint directory '{}' holds checkpoints "
                           "newer than step {} (the newest: {}), which this "
                           "run would overwrite; delete them or choose "
                           "another --checkpoint-dir",
                           config_.checkpointDir, start, found->back().path),
               kExitUsage);
}

/// --tensorboard DIR: the first rank's writer in DIR, every rank's in
/// DIR/rank_<r> (one writer per directory, as TensorBoard requires). A sink
/// never stops a run: one that cannot be opened is a warning.
void Run::openTensorBoard() {
  if (config_.tensorboardDir.empty())
    return;
  auto open = [&](const std::string &dir, std::optional<EventWriter> &slot) {
    Expected<EventWriter> w = EventWriter::open(dir);
    if (w)
      slot.emplace(std::move(*w));
    else
      fmt::print(stderr, "{}: warning: {}; training continues without it\n",
                 name_, w.error().message());
  };
  if (launch_.isLeader()) {
    open(config_.tensorboardDir, tensorboard_);
    if (!tensorboard_)
      return; // one warning: the ranks' directories are inside it
  }
  open(fmt::format("{}/rank_{}", config_.tensorboardDir, launch_.rank),
       tensorboardRank_);
}

/// --trace DIR: the tracer, its buffers sized for the chosen steps, and the
/// ranks' clocks aligned (every rank takes part, as every rank traces).
Status Run::openTrace() {
  if (config_.traceDir.empty())
    return Status::ok();
  Tracer::Setup s;
  s.dir = config_.traceDir;
  s.first = config_.traceSteps.first;
  s.last =
      std::min(config_.traceSteps.second, std::max<int64_t>(totalSteps_, 1));
  s.rank = launch_.rank;
  s.worldSize = comm_ ? comm_->worldSize() : 1;
  s.backend = comm_ ? comm_->engine() : "";
  if (s.last < s.first) {
    if (launch_.isLeader())
      fmt::print(stderr,
                 "{}: warning: --trace-steps {}:{} lies after the run's last "
                 "step ({}): nothing will be traced\n",
                 name_, config_.traceSteps.first, config_.traceSteps.second,
                 totalSteps_);
    return Status::ok();
  }
  // The spans live in buffers sized now; a window so long that they would
  // not fit in memory is refused before anything runs.
  constexpr double kMaxBufferBytes = double(1 << 30);
  double bytes = Tracer::bufferBytes(manifest_, s.last - s.first + 1);
  if (bytes > kMaxBufferBytes)
    return Error(fmt::format("--trace-steps {}:{} would hold {} of spans in "
                             "memory (the limit is {}); trace fewer steps "
                             "at a time",
                             s.first, s.last, formatBytes(bytes),
                             formatBytes(kMaxBufferBytes)),
                 kExitUsage);
  tracer_ =
      std::make_unique<Tracer>(manifest_, s, comm_ ? comm_->mesh() : oneRank_);
  if (Status st = tracer_->alignClocks(comm_.get()); !st)
    return st;
  setProgramTracer(tracer_.get());
  return Status::ok();
}

/// The whole model's parameters; on a mesh also what this rank holds.
struct ParameterCount {
  int64_t params = 0, frozen = 0;
  size_t bytes = 0, localBytes = 0;
};

ParameterCount countParameters(const Manifest &m,
                               const std::vector<int> &coords) {
  ParameterCount c;
  for (const BufferDesc &b : m.buffers)
    if (b.role == Role::Param && !b.buffer) {
      int64_t n = 1;
      for (int64_t d : b.globalShape)
        n *= d;
      c.params += n;
      // A frozen parameter (`freeze`) has no gradient.
      if (!m.find("grad/" + b.name))
        c.frozen += n;
      c.bytes += size_t(n) * dtypeSize(b.dtype);
      if (m.holds(b, coords))
        c.localBytes += b.bytes;
    }
  return c;
}

void Run::recordRun() {
  if (!timing_)
    return;
  ParameterCount pc = countParameters(manifest_, coords_);
  const TrainSpec &t = manifest_.train;
  char started[32] = "";
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc))
    std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S UTC", &utc);
  nlohmann::ordered_json run = {
      {"program", manifest_.name},
      {"source", manifest_.source},
      {"started", started},
      {"device", device_->describe()},
      {"threads", config_.threads},
      {"ranks", launch_.worldSize},
      {"launch", launch_.describe()},
      {"mesh",
       {{"names", manifest_.mesh.names}, {"sizes", manifest_.mesh.sizes}}},
      {"data_parallel", t.dataParallel},
      {"batch", t.batch},
      {"micro_batch", t.microBatch},
      {"accumulation", t.accumulation},
      {"tokens_per_sample", train_->tokensPerSample()},
      {"total_steps", totalSteps_},
      {"steps_per_epoch", stepsPerEpoch_},
      {"precision", manifest_.precision},
      {"parameters", pc.params},
      {"frozen_parameters", pc.frozen},
      {"parameter_bytes", pc.bytes},
      {"arena_bytes", manifest_.arenaBytes},
  };
  if (manifest_.flopsPerStep > 0) {
    run["model_flops_per_step"] = manifest_.modelFlopsPerStep;
    run["flops_per_step"] = manifest_.flopsPerStep;
  }
  if (peakFlops_) {
    run["peak_flops"] = *peakFlops_;
    run["peak_how"] =
        hostPeaks_ ? fmt::format("sgemm {}^3 on {} thread{}, measured",
                                 hostPeaks_->gemmSize, hostPeaks_->threads,
                                 hostPeaks_->threads == 1 ? "" : "s")
        : device_->peakFlops(manifest_.precision)
            ? std::string("the GPU's datasheet, dense")
            : fmt::format("cuBLAS {} {}^3, measured", devicePeaks_->gemmType,
                          devicePeaks_->gemmSize);
  }
  if (hostPeaks_)
    run["copy_bytes_per_s"] = hostPeaks_->copyBytesPerS;
  if (devicePeaks_) {
    run["measured_peak_flops"] = devicePeaks_->gemmFlops;
    run["copy_bytes_per_s"] = devicePeaks_->copyBytesPerS;
  }
  if (linkBytesPerS_)
    run["link_bytes_per_s"] = *linkBytesPerS_;
  if (predicted_) {
    run["predicted_compute_s"] = predicted_->compute;
    run["predicted_comm_s"] = predicted_->comm;
    run["predicted_bubble_s"] = predicted_->bubble;
  }
  if (const std::optional<PipelineSpec> &p = manifest_.pipeline)
    run["pipeline"] = {{"schedule", p->schedule},
                       {"axis", p->axis},
                       {"stages", p->stages.size()},
                       {"microbatches", p->microbatches},
                       {"bubble", scheduleBubble(*p)}};
  if (resumed_)
    run["resumed_from_step"] = resumed_->step;
  if (Status st = timing_->write(
          {{"step", resumed_ ? resumed_->step : 0}, {"run", run}});
      !st) {
    fmt::print(stderr,
               "warning: {}; training continues without timing records\n",
               st.error().message());
    timing_.reset();
  }
}

void Run::writeReport() {
  if (!metrics_)
    return;
  std::string path =
      (std::filesystem::path(config_.logDir) / "report.html").string();
  if (Status s = writeRunReport(config_.logDir, path); !s) {
    fmt::print(stderr, "warning: no run report: {}\n", s.error().message());
    return;
  }
  fmt::print("report: {}\n", path);
  std::fflush(stdout);
}

void Run::printBanner() {
  ParameterCount pc = countParameters(manifest_, coords_);
  int64_t params = pc.params, frozen = pc.frozen;
  size_t paramBytes = pc.bytes, localBytes = pc.localBytes;
  const TrainSpec &t = manifest_.train;
  auto every = [](int64_t n) {
    return n == 1 ? std::string("every step")
                  : fmt::format("every {} steps", n);
  };
  std::string sizes =
      comm_ ? fmt::format("{}, {} on {} rank), arena {} per rank",
                          formatBytes(double(paramBytes)),
                          formatBytes(double(localBytes)),
                          manifest_.pipeline ? "this" : "each",
                          formatBytes(double(manifest_.arenaBytes)))
            : fmt::format("{}), arena {}", formatBytes(double(paramBytes)),
                          formatBytes(double(manifest_.arenaBytes)));
  std::string meeting = launch_.describeMeeting();
  fmt::print("{}: {} parameters{} ({}; {}, {} thread{}, {}{}{}\n",
             manifest_.name, params,
             frozen ? fmt::format(", {} of them frozen", frozen) : "", sizes,
             device_->describe(),
             config_.threads, config_.threads == 1 ? "" : "s",
             launch_.describe(), meeting.empty() ? "" : "; ", meeting);
  if (comm_)
    fmt::print("  mesh: {}, collectives by {}, timeout {} s\n",
               comm_->mesh().describe(), comm_->engine(),
               config_.timeoutSeconds);
  if (const std::optional<PipelineSpec> &p = manifest_.pipeline)
    fmt::print("  pipeline: {} over {}, {} stages of {} micro-batches; bubble "
               "{:.1f} % by the schedule\n",
               p->schedule, p->axis, p->stages.size(), p->microbatches,
               100.0 * scheduleBubble(*p));
  if (isCheckedBuild())
    fmt::print("  checked: every kernel call and loop view is checked against "
               "the memory plan; AddressSanitizer and UBSan are on\n");
  // On a GPU the products are cuBLAS's (runtime/lib/cuda/blas.cpp).
  fmt::print(
      "  blas: {}\n",
      config_.backend == Backend::Cuda
          ? fmt::format("cuBLAS on the GPU, {} products{}", manifest_.precision,
                        manifest_.precision == "f32" ? "" : " (f32 sums)")
          : describeBlas());
  std::string length =
      config_.epochs ? fmt::format("{} epochs", *config_.epochs)
                     : fmt::format("{:.2f} epochs", double(totalSteps_) /
                                                        double(stepsPerEpoch_));
  fmt::print("  train: {}\n", train_->describe());
  fmt::print("  {} steps ({}, {} steps each) of {} samples{}\n", totalSteps_,
             length, stepsPerEpoch_, t.batch,
             t.accumulation > 1
                 ? fmt::format(" ({} x {})", t.accumulation, t.microBatch)
                 : "");
  if (eval_)
    fmt::print("  eval: {}; {}\n", eval_->describe(),
               config_.evalEvery > 0
                   ? fmt::format("{} and at the end", every(config_.evalEvery))
                   : "at the end");
  fmt::print("  metrics: {}; progress {}\n",
             metrics_ ? metrics_->path() : "none (no --log-dir)",
             every(config_.logEvery));
  if (tensorboard_ || tensorboardRank_)
    fmt::print("  tensorboard: {}{}\n",
               tensorboard_ ? tensorboard_->path() + ", " : "",
               tensorboardRank_ ? "each rank's timings in " +
                                      config_.tensorboardDir + "/rank_<r>/"
                                : "");
  if (hostPeaks_) {
    const HostPeaks &p = *hostPeaks_;
    fmt::print(
        "  peak: {:.2f} GFLOP/s f32 measured (sgemm {}^3 on {} thread{}; "
        "{}){}; copy {:.1f} GB/s\n",
        p.gemmFlops / 1e9, p.gemmSize, p.threads, p.threads == 1 ? "" : "s",
        p.cached ? "cached in " + p.cachePath : "measured now",
        p.nominalFlops ? fmt::format("; nominal {:.1f} ({})",
                                     *p.nominalFlops / 1e9, p.nominalHow)
                       : "",
        p.copyBytesPerS / 1e9);
  }
  if (devicePeaks_) {
    const DevicePeaks &p = *devicePeaks_;
    std::optional<double> sheet = device_->peakFlops(manifest_.precision);
    fmt::print("  peak: {:.1f} TFLOP/s {} measured (cuBLAS {}^3; {}){}; copy "
               "{:.0f} GB/s\n",
               p.gemmFlops / 1e12, p.gemmType, p.gemmSize,
               p.cached ? "cached in " + p.cachePath : "measured now",
               sheet ? fmt::format("; datasheet {:.0f}, MFU's denominator",
                                   *sheet / 1e12)
                     : "; no datasheet figure: MFU divides by the measured",
               p.copyBytesPerS / 1e9);
  }
  if (linkBytesPerS_)
    fmt::print("  link: all-reduce bus bandwidth {:.2f} GB/s over {} ranks "
               "(measured now)\n",
               *linkBytesPerS_ / 1e9, comm_->worldSize());
  if (tracer_) {
    SpanBudget b = spanBudget(manifest_);
    fmt::print("  trace: steps {}:{} into {}/rank_<r>.pt.trace.json (at most "
               "{} spans a step)\n",
               config_.traceSteps.first, config_.traceSteps.second,
               config_.traceDir, b.computeThread + b.commThread);
  }
  if (config_.checkpointDir.empty())
    fmt::print("  checkpoints: none (no --checkpoint-dir)\n");
  else
    fmt::print("  checkpoints: {}, {}{}\n", config_.checkpointDir,
               config_.checkpointEvery > 0
                   ? fmt::format("{}, at the end and on stop",
                                 every(config_.checkpointEvery))
                   : "at the end and on stop",
               config_.checkpointKeep > 0
                   ? fmt::format(", keeping {}", config_.checkpointKeep)
                   : "");
  if (resumed_) {
    fmt::print("  resumed from {} at step {} (epoch {}, step {} of it), seed "
               "{}\n",
               resumedFrom_, resumed_->step, resumed_->epoch,
               resumed_->epochStep, config_.seed);
    // A job restarted on other hosts continues on another mesh: say what
    // changed and what did not.
    auto describeMesh = [](const MeshSpec &m) {
      Expected<Mesh> mesh = Mesh::create(m.names, m.sizes);
      return mesh ? mesh->describe() : std::string("?");
    };
    std::string was = describeMesh(resumed_->mesh);
    std::string now = describeMesh(manifest_.mesh);
    if (was != now)
      fmt::print("  resharded from the checkpoint's mesh ({}) to this "
                 "program's ({}): the global batch is {} ({} per rank x {} "
                 "data-parallel x {} accumulated)\n",
                 was, now, t.batch, t.microBatch, t.dataParallel,
                 t.accumulation);
  } else {
    fmt::print("  fresh start, seed {}{}\n", config_.seed, initSummary_);
  }
  std::fflush(stdout);
}

} // namespace

int runProgram(int argc, char **argv, const Program &program) {
  std::string name = argc > 0 && argv[0]
                         ? std::filesystem::path(argv[0]).filename().string()
                         : "train";
  return Run(program, name).main(argc, argv);
}

} // namespace dtrt
