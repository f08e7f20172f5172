//===- loop.cpp - The training loop ---------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The order of work after an optimizer step is fixed, because resumption
// depends on it: (1) the training record, (2) a scheduled evaluation, (3) a
// scheduled checkpoint, (4) a stop request. Everything a checkpoint at step S
// follows (the records of steps <= S) is therefore written before it, and a
// resumed run writes exactly the records after S.
//
// Throughput figures count training time only: evaluation and checkpoint
// time is excluded from samples/s but included in elapsed time and the ETA.
//
//===----------------------------------------------------------------------===//

#include "dtrt/loop.h"

#include "dtrt/collectives.h"
#include "dtrt/data/order.h"
#include "dtrt/eval.h"
#include "dtrt/report.h"
#include "dtrt/signals.h"
#include "dtrt/verdict.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <thread>

namespace dtrt {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class Trainer {
public:
  explicit Trainer(const TrainSetup &s)
      : s_(s), m_(s.arena->manifest()), arena_(*s.arena),
        stepBuf_(m_.find("step")), lossBuf_(m_.find("out/loss")),
        lrBuf_(m_.find("out/lr")), gradNormBuf_(m_.find("out/grad_norm")),
        totalBuf_(m_.find("in/total_steps")),
        microBuf_(m_.find("in/micro_index")),
        lossScaleBuf_(m_.find("out/loss_scale")),
        skippedBuf_(m_.find("out/skipped_steps")),
        lastCheckpoint_(s.resumedStep), timing_(s.timing) {
    peakFlops_ = s.peakFlops;
    size_t ranks = s.comm ? size_t(s.comm->worldSize()) : 1;
    verdictWindow_.assign(ranks, RankTimes{});
    verdictTotal_.assign(ranks, RankTimes{});
    intervalRanks_.assign(ranks, RankTimes{});
    stepRanks_.assign(ranks, RankTimes{});
    // A pipeline's stages meet in no collective: each stage's ranks reduce
    // among themselves, so the verdict looks for stragglers stage by stage.
    if (s.pipeline && s.comm && m_.pipeline) {
      const Mesh &mesh = s.comm->mesh();
      for (size_t a = 0; a < mesh.axisCount(); ++a)
        if (mesh.axisName(a) == m_.pipeline->axis)
          for (int r = 0; r < mesh.worldSize(); ++r)
            verdictGroups_.push_back(mesh.coordinates(r)[a]);
    }
    // R:MS[@STEP],...; a hook for the tests of the verdict, never set by a
    // user.
    if (const char *slow = std::getenv("DT_TEST_SLOW_RANK")) {
      int me = s.comm ? s.comm->rank() : 0;
      for (const char *p = slow; *p;) {
        int rank = -1, used = 0;
        double ms = 0;
        long long at = 0;
        if (std::sscanf(p, "%d:%lf%n", &rank, &ms, &used) != 2)
          break;
        p += used;
        if (*p == '@' && std::sscanf(p + 1, "%lld%n", &at, &used) == 1)
          p += 1 + used;
        if (rank == me) {
          if (at > 0)
            testStalls_[int64_t(at)] += ms * 1e-3;
          else
            testSleep_ = ms * 1e-3;
        }
        if (*p == ',')
          ++p;
      }
    }
  }

  Expected<int> run();

private:
  /// One optimizer step, traced when --trace chose it.
  Status trainStep();
  Status runStep();
  /// --inject-overflow: an inf in this rank's first gradient, which the
  /// gradient norm carries to every rank.
  void injectOverflow();
  /// The exchange after every step: step times and stop requests.
  Status syncRanks(double seconds, double comm);
  Status logStep();
  Status evaluateNow();
  Status checkpointNow();
  Expected<int> stop(int signal);
  void printSummary();
  void printMemory();
  /// What the steps spent in collectives (rank 0's view), on several ranks.
  void printCollectives();
  /// Each rank's idle time against the schedule's bubble, and its stash.
  void printPipeline();

  double elapsed() const { return s_.elapsedBefore + secondsSince(start_); }
  int64_t samplesPerStep() const { return m_.train.batch; }
  int64_t tokensPerSample() const { return s_.trainSource->tokensPerSample(); }

  const TrainSetup &s_;
  const Manifest &m_;
  Arena &arena_;
  const BufferDesc *stepBuf_, *lossBuf_, *lrBuf_, *gradNormBuf_, *totalBuf_;
  /// Which micro-batch of the step dt_grad_step takes (dropout's masks).
  const BufferDesc *microBuf_;
  /// Dynamic loss scaling's outputs (f16 programs only).
  const BufferDesc *lossScaleBuf_, *skippedBuf_;
  std::optional<int64_t> lastCheckpoint_;

  Clock::time_point start_ = Clock::now();
  int64_t step_ = 0, firstStep_ = 0;
  std::vector<int64_t> order_;
  int64_t orderEpoch_ = -1;
  // The last step's figures.
  double loss_ = 0, lr_ = 0, gradNorm_ = 0, lossScale_ = 0, skipped_ = 0;
  /// The device's peak for the program's precision, when known (MFU).
  std::optional<double> peakFlops_;
  // Since the last training record.
  int64_t intervalSteps_ = 0;
  double intervalSeconds_ = 0;
  // This process's training time (throughput in the summary), and the part
  // of it inside the program's collectives: over the run and since the last
  // training record.
  double trainSeconds_ = 0, trainComm_ = 0, intervalComm_ = 0;
  std::optional<EvalResult> lastEval_;
  /// The stop signal the ranks agreed on after the last step (0: none).
  int stop_ = 0;
  /// The last step's slowest rank, and sums over the log interval of the
  /// slowest rank's step time and of the spread (slowest - fastest).
  int slowestRank_ = 0;
  double intervalSlowest_ = 0, intervalSpread_ = 0;
  /// This step's time staging input and, in a pipeline, idle between passes.
  double stepInput_ = 0, stepBubble_ = 0;
  /// Every rank's times (dtrt/verdict.h) since the last verdict and over the
  /// run, and the steps they cover.
  std::vector<RankTimes> verdictWindow_, verdictTotal_;
  int64_t verdictSteps_ = 0, verdictFirst_ = 0;
  /// Who arrived last at each step's collectives, over the same steps (the
  /// first rank only, which judges); `stepRanks_` holds one step's times.
  Arrivals arrivalsWindow_, arrivalsTotal_;
  std::vector<RankTimes> stepRanks_;
  /// Every rank's times since the last training record (timing.jsonl).
  std::vector<RankTimes> intervalRanks_;
  /// Which ranks meet in collectives (dtrt/verdict.h): a pipeline rank's
  /// stage; empty without a pipeline.
  std::vector<int> verdictGroups_;
  /// timing.jsonl, until a write fails: it is a sink that never stops the
  /// run (a warning, once).
  MetricsLog *timing_ = nullptr;
  void recordTiming(const nlohmann::ordered_json &record);
  /// DT_TEST_SLOW_RANK=R:MS (tests of the verdict): rank R sleeps MS ms in
  /// each step's compute; R:MS@STEP, in step STEP's only (a one-off stall).
  /// Several are separated by commas.
  double testSleep_ = 0;
  std::map<int64_t, double> testStalls_;
  void printVerdict(const std::vector<RankTimes> &times,
                    const Arrivals &arrivals, int64_t steps, int64_t first);
};

void Trainer::recordTiming(const nlohmann::ordered_json &record) {
  if (!timing_)
    return;
  if (Status st = timing_->write(record); !st) {
    fmt::print(stderr,
               "warning: {}; training continues without timing records\n",
               st.error().message());
    timing_ = nullptr;
  }
}

Status Trainer::syncRanks(double seconds, double comm) {
  auto account = [&](int rank, double step, double input, double inComm,
                     double bubble) {
    for (std::vector<RankTimes> *sums :
         {&verdictWindow_, &verdictTotal_, &intervalRanks_}) {
      RankTimes &t = (*sums)[size_t(rank)];
      t.step += step;
      t.input += input;
      t.comm += inComm;
      t.bubble += bubble;
    }
  };
  ++verdictSteps_;
  if (!s_.comm) {
    stop_ = stopSignal();
    intervalSlowest_ += seconds;
    account(0, seconds, stepInput_, comm, stepBubble_);
    return Status::ok();
  }
  Communicator &c = *s_.comm;
  // In a pipeline only the last stage's ranks know the loss: it travels
  // with the step times (as the bits of a double).
  bool holdsLoss = !s_.pipeline || s_.pipeline->holdsLoss();
  int64_t lossBits = 0;
  std::memcpy(&lossBits, &loss_, sizeof lossBits);
  constexpr int kFields = 7;
  int64_t mine[kFields] = {int64_t(seconds * 1e6),    stopSignal(),
                           holdsLoss ? 1 : 0,         lossBits,
                           int64_t(stepInput_ * 1e6), int64_t(comm * 1e6),
                           int64_t(stepBubble_ * 1e6)};
  std::vector<int64_t> all(size_t(kFields * c.worldSize()));
  if (Status st = c.allGather(mine, all.data(), kFields, DType::I64,
                              c.mesh().allAxes(), "the step times");
      !st)
    return st;
  for (int r = 0; r < c.worldSize(); ++r)
    if (all[size_t(kFields * r + 2)]) {
      std::memcpy(&loss_, &all[size_t(kFields * r + 3)], sizeof loss_);
      break;
    }
  int64_t slowest = -1, fastest = INT64_MAX;
  stop_ = 0;
  for (int r = 0; r < c.worldSize(); ++r) {
    int64_t micros = all[size_t(kFields * r)];
    if (micros > slowest) {
      slowest = micros;
      slowestRank_ = r;
    }
    fastest = std::min(fastest, micros);
    // SIGTERM wins over SIGINT when ranks saw different signals: the
    // scheduler's request decides the exit code.
    int sig = int(all[size_t(kFields * r + 1)]);
    if (sig == SIGTERM || (sig && !stop_))
      stop_ = sig;
    const int64_t *f = &all[size_t(kFields * r)];
    account(r, double(f[0]) * 1e-6, double(f[4]) * 1e-6, double(f[5]) * 1e-6,
            double(f[6]) * 1e-6);
    stepRanks_[size_t(r)] = {double(f[0]) * 1e-6, double(f[4]) * 1e-6,
                             double(f[5]) * 1e-6, double(f[6]) * 1e-6};
  }
  if (c.rank() == 0) {
    arrivalsWindow_.add(stepRanks_, verdictGroups_);
    arrivalsTotal_.add(stepRanks_, verdictGroups_);
  }
  intervalSlowest_ += double(slowest) * 1e-6;
  intervalSpread_ += double(slowest - fastest) * 1e-6;
  return Status::ok();
}

void Trainer::injectOverflow() {
  for (const BufferDesc &b : m_.buffers)
    if (b.role == Role::Grad && b.dtype == DType::F32 &&
        m_.holds(b, s_.coords)) {
      float inf = std::numeric_limits<float>::infinity();
      arena_.writePart(b, 0, sizeof inf, &inf);
      return;
    }
}

Status Trainer::trainStep() {
  int64_t number = step_ + 1;
  if (s_.tracer)
    s_.tracer->beginStep(number);
  Status st;
  {
    TraceScope scope(RuntimeSpan::Step);
    st = runStep();
  }
  if (s_.tracer)
    s_.tracer->endStep(number);
  return st;
}

Status Trainer::runStep() {
  const TrainSpec &t = m_.train;
  int64_t epoch = step_ / s_.stepsPerEpoch;
  int64_t inEpoch = step_ % s_.stepsPerEpoch;
  if (epoch != orderEpoch_) {
    order_ = epochPermutation(s_.config->seed, epoch, s_.trainSource->size());
    orderEpoch_ = epoch;
  }
  auto begin = Clock::now();
  double commBefore = programCollectiveSeconds();
  stepInput_ = stepBubble_ = 0;
  double sleep = testSleep_;
  if (auto it = testStalls_.find(step_ + 1); it != testStalls_.end())
    sleep += it->second;
  if (sleep > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
  double lossSum = 0;
  // The global micro-batch: every data rank stages its rows of it.
  int64_t micro = t.microBatch * t.dataParallel;
  auto stageBatch = [&](int64_t a) {
    TraceScope scope(RuntimeSpan::Input);
    auto staging = Clock::now();
    const int64_t *rows = &order_[size_t(inEpoch * t.batch + a * micro)];
    s_.trainStager->stage(arena_, rows, micro);
    stepInput_ += secondsSince(staging);
  };
  if (s_.pipeline) {
    // The stages' passes in this rank's order; the last stage's ranks
    // know the loss, which the exchange after the step hands to rank 0.
    TraceScope scope(RuntimeSpan::GradStep);
    // The pipeline's idle time: what its passes (and the staging they ask
    // for) leave of the pipeline's part of the step.
    auto pipeBegin = Clock::now();
    double busyBefore = s_.pipeline->busySeconds();
    Expected<double> sum = s_.pipeline->step(stageBatch);
    if (!sum)
      return sum.error();
    lossSum = *sum;
    stepBubble_ = std::max(0.0, secondsSince(pipeBegin) - stepInput_ -
                                    (s_.pipeline->busySeconds() - busyBefore));
  } else {
    for (int64_t a = 0; a < t.accumulation; ++a) {
      stageBatch(a);
      if (microBuf_)
        arena_.writeI64(*microBuf_, a);
      {
        TraceScope scope(RuntimeSpan::GradStep);
        s_.program->gradStep(arena_.base());
      }
      if (Status st = checkCollectivesDone("dt_grad_step"); !st)
        return st;
      lossSum += arena_.readScalar(*lossBuf_);
    }
  }
  if (totalBuf_)
    arena_.writeI64(*totalBuf_, s_.totalSteps);
  if (step_ + 1 == s_.config->injectOverflowStep)
    injectOverflow();
  {
    TraceScope scope(RuntimeSpan::ApplyStep);
    if (s_.pipeline)
      s_.pipeline->apply()(arena_.base());
    else
      s_.program->applyStep(arena_.base());
  }
  if (Status st = checkCollectivesDone("dt_apply_step"); !st)
    return st;
  arena_.device().synchronize();

  int64_t next = arena_.readI64(*stepBuf_);
  if (next != step_ + 1)
    return Error(fmt::format("dt_apply_step left the step counter at {} after "
                             "step {} (expected {}); the program breaks the "
                             "ABI, please report it",
                             next, step_, step_ + 1));
  step_ = next;
  loss_ = lossSum / double(t.accumulation);
  lr_ = lrBuf_ ? arena_.readScalar(*lrBuf_) : std::nan("");
  gradNorm_ = gradNormBuf_ ? arena_.readScalar(*gradNormBuf_) : std::nan("");
  if (lossScaleBuf_ && skippedBuf_) {
    lossScale_ = arena_.readScalar(*lossScaleBuf_);
    skipped_ = arena_.readScalar(*skippedBuf_);
  }
  double seconds = secondsSince(begin);
  double comm = programCollectiveSeconds() - commBefore;
  {
    TraceScope scope(RuntimeSpan::Exchange);
    if (Status st = syncRanks(seconds, comm); !st)
      return st;
  }
  intervalSeconds_ += seconds;
  intervalComm_ += comm;
  if (int64_t every = s_.config->verdictEvery;
      every > 0 && step_ % every == 0 && step_ < s_.totalSteps) {
    printVerdict(verdictWindow_, arrivalsWindow_, verdictSteps_, verdictFirst_);
    verdictWindow_.assign(verdictWindow_.size(), RankTimes{});
    arrivalsWindow_.clear();
    verdictSteps_ = 0;
    verdictFirst_ = step_;
  }
  trainSeconds_ += seconds;
  trainComm_ += comm;
  ++intervalSteps_;
  if (!std::isfinite(loss_))
    return Error(fmt::format(
        "the loss is {} at step {}: training diverged; lower the learning "
        "rate, or resume from an earlier checkpoint with --resume DIR",
        loss_, step_));
  return Status::ok();
}

Status Trainer::logStep() {
  double samplesPerS = double(intervalSteps_ * samplesPerStep()) /
                       std::max(intervalSeconds_, 1e-9);
  double tokensPerS = samplesPerS * double(tokensPerSample());
  int64_t stepsHere = step_ - firstStep_;
  double eta =
      secondsSince(start_) / double(stepsHere) * double(s_.totalSteps - step_);
  int width = int(std::to_string(s_.totalSteps).size());
  std::string line = fmt::format("step {:>{}}/{}  loss {:.6f}", step_, width,
                                 s_.totalSteps, loss_);
  if (lrBuf_)
    line += fmt::format("  lr {:.3e}", lr_);
  if (gradNormBuf_)
    line += fmt::format("  grad norm {:.4f}", gradNorm_);
  if (lossScaleBuf_ && skippedBuf_)
    line += fmt::format("  loss scale {:g} ({:g} skipped)", lossScale_,
                        skipped_);
  // Model and hardware FLOPs utilisation: the cost model's FLOPs per step
  // (without, and with, what recomputation repeats) over the time a step
  // took, against the device's peak (measured on the host, a GPU's table).
  std::optional<double> mfu, hfu;
  if (peakFlops_ && m_.flopsPerStep > 0) {
    double perSecond =
        double(intervalSteps_) / std::max(intervalSeconds_, 1e-9) / *peakFlops_;
    mfu = m_.modelFlopsPerStep * perSecond;
    hfu = m_.flopsPerStep * perSecond;
  }
  std::string utilisation;
  if (mfu)
    utilisation =
        m_.flopsPerStep != m_.modelFlopsPerStep
            ? fmt::format("  MFU {:.1f}% (HFU {:.1f}%)", 100 * *mfu, 100 * *hfu)
            : fmt::format("  MFU {:.1f}%", 100 * *mfu);
  fmt::print("{}  {} {}/s{}  elapsed {}  eta {}\n", line,
             formatCount(tokensPerSample() ? tokensPerS : samplesPerS),
             tokensPerSample() ? "tokens" : "samples", utilisation,
             formatDuration(elapsed()), formatDuration(eta));
  std::fflush(stdout);
  if (s_.tensorboard) {
    std::vector<std::pair<std::string, double>> scalars{{"loss", loss_}};
    if (lrBuf_)
      scalars.push_back({"lr", lr_});
    if (gradNormBuf_ && std::isfinite(gradNorm_))
      scalars.push_back({"grad_norm", gradNorm_});
    if (lossScaleBuf_ && skippedBuf_)
      scalars.push_back({"loss_scale", lossScale_});
    scalars.push_back({tokensPerSample() ? "tokens_per_s" : "samples_per_s",
                       tokensPerSample() ? tokensPerS : samplesPerS});
    if (mfu) {
      scalars.push_back({"mfu", *mfu});
      scalars.push_back({"hfu", *hfu});
    }
    s_.tensorboard->scalars(step_, scalars);
  }
  if (s_.tensorboardRank) {
    // This rank's own time, which the job's record replaces by the slowest.
    std::vector<std::pair<std::string, double>> timings{
        {"step_time_s", intervalSeconds_ / double(intervalSteps_)}};
    if (s_.comm)
      timings.push_back({"comm_time_s", intervalComm_ / double(intervalSteps_)});
    s_.tensorboardRank->scalars(step_, timings);
  }
  if (s_.metrics) {
    nlohmann::ordered_json r = {
        {"step", step_},
        {"epoch", double(step_) / double(s_.stepsPerEpoch)},
        {"loss", loss_},
    };
    if (lrBuf_)
      r["lr"] = lr_;
    if (gradNormBuf_)
      r["grad_norm"] = gradNorm_;
    if (lossScaleBuf_ && skippedBuf_) {
      r["loss_scale"] = lossScale_;
      r["skipped_steps"] = int64_t(skipped_);
    }
    if (tokensPerSample())
      r["tokens_per_s"] = tokensPerS;
    else
      r["samples_per_s"] = samplesPerS;
    if (mfu) {
      r["mfu"] = *mfu;
      r["hfu"] = *hfu;
    }
    r["elapsed_s"] = elapsed();
    r["step_time_s"] = intervalSlowest_ / double(intervalSteps_);
    if (s_.comm) {
      // The slowest rank's step time is the step time; the spread says how
      // much the others wait for it.
      r["slowest_rank"] = slowestRank_;
      r["step_time_spread_s"] = intervalSpread_ / double(intervalSteps_);
      r["comm_time_s"] = intervalComm_ / double(intervalSteps_);
    }
    if (Status st = s_.metrics->write(r); !st)
      return st;
  }
  if (timing_) {
    // Every rank's mean times over the interval: the run report's per-rank
    // chart, which names the straggler.
    nlohmann::ordered_json step = nlohmann::ordered_json::array(), comm = step,
                           input = step, bubble = step;
    double n = double(std::max<int64_t>(intervalSteps_, 1));
    for (const RankTimes &t : intervalRanks_) {
      step.push_back(t.step / n);
      comm.push_back(t.comm / n);
      input.push_back(t.input / n);
      bubble.push_back(t.bubble / n);
    }
    recordTiming({{"step", step_},
                  {"rank_step_s", step},
                  {"rank_comm_s", comm},
                  {"rank_input_s", input},
                  {"rank_bubble_s", bubble}});
  }
  intervalRanks_.assign(intervalRanks_.size(), RankTimes{});
  intervalSteps_ = 0;
  intervalSeconds_ = 0;
  intervalComm_ = 0;
  intervalSlowest_ = 0;
  intervalSpread_ = 0;
  return Status::ok();
}

Status Trainer::evaluateNow() {
  Expected<EvalResult> r = evaluate(arena_, *s_.program, *s_.evalSource,
                                    *s_.evalStager, s_.pipeline);
  if (!r)
    return r.error();
  if (s_.pipeline)
    if (Status st = shareEvalResult(*r, *s_.comm, s_.pipeline->holdsLoss());
        !st)
      return st;
  lastEval_ = *r;
  std::string accuracy =
      r->accuracy ? fmt::format("  accuracy {:.2f}%", *r->accuracy * 100) : "";
  fmt::print("eval at step {}: loss {:.6f}{}  ({} samples, {:.1f} s)\n", step_,
             r->loss, accuracy, r->samples, r->seconds);
  std::fflush(stdout);
  if (s_.tensorboard) {
    std::vector<std::pair<std::string, double>> scalars{
        {"eval_loss", r->loss}};
    if (r->accuracy)
      scalars.push_back({"eval_accuracy", *r->accuracy});
    s_.tensorboard->scalars(step_, scalars);
  }
  if (!s_.metrics)
    return Status::ok();
  nlohmann::ordered_json rec = {{"step", step_}, {"eval_loss", r->loss}};
  if (r->accuracy)
    rec["eval_accuracy"] = *r->accuracy;
  return s_.metrics->write(rec);
}

Status Trainer::checkpointNow() {
  if (s_.metrics)
    if (Status st = s_.metrics->sync(); !st)
      return st;
  TrainPosition pos;
  pos.step = step_;
  pos.totalSteps = s_.totalSteps;
  pos.epoch = step_ / s_.stepsPerEpoch;
  pos.epochStep = step_ % s_.stepsPerEpoch;
  pos.stepsPerEpoch = s_.stepsPerEpoch;
  pos.seed = s_.config->seed;
  pos.trainSamples = s_.trainSource->size();
  pos.elapsedSeconds = elapsed();
  auto begin = Clock::now();
  Expected<std::string> path = writeCheckpoint(s_.config->checkpointDir,
                                               arena_, pos, s_.comm, s_.coords);
  if (!path)
    return path.error();
  lastCheckpoint_ = step_;
  if (!s_.comm || s_.comm->rank() == 0)
    if (Status st = pruneCheckpoints(s_.config->checkpointDir,
                                     s_.config->checkpointKeep);
        !st)
      return st;
  fmt::print("checkpoint at step {}: {} ({:.1f} s)\n", step_, *path,
             secondsSince(begin));
  std::fflush(stdout);
  return Status::ok();
}

Expected<int> Trainer::stop(int signal) {
  const char *name = signal == SIGINT ? "SIGINT" : "SIGTERM";
  int code = signal == SIGINT ? kExitInterrupted : kExitTerminated;
  // One account of the stop, from the first rank.
  bool speaks = !s_.comm || s_.comm->rank() == 0;
  if (s_.config->checkpointDir.empty()) {
    if (!speaks)
      return code;
    fmt::print(stderr,
               "stopped by {} at step {}: no checkpoint directory is "
               "configured (--checkpoint-dir), so this run cannot be "
               "resumed\n",
               name, step_);
    return code;
  }
  if (step_ == firstStep_) {
    // Nothing happened since the fresh start or the resumed checkpoint.
    if (speaks)
      fmt::print(stderr, "stopped by {} before the first step of this run\n",
                 name);
    return code;
  }
  if (lastCheckpoint_ != step_)
    if (Status st = checkpointNow(); !st)
      return st.error().withContext(
          fmt::format("stopped by {}, but the checkpoint failed", name));
  if (!speaks)
    return code;
  fmt::print(stderr,
             "stopped by {} at step {} with a checkpoint in {}; continue "
             "with --resume auto\n",
             name, step_, s_.config->checkpointDir);
  return code;
}

void Trainer::printMemory() {
  // What each rank's arena holds in memory at the end, against the plan
  // (dtc --report): the figure the compiler promised, measured.
  // Per rank: the arena's resident bytes (-1: unknown) and the process's
  // peak resident set.
  std::optional<size_t> mine = arena_.residentBytes();
  int64_t figures[2] = {mine ? int64_t(*mine) : -1, int64_t(peakRssBytes())};
  std::vector<int64_t> all(figures, figures + 2);
  if (s_.comm) {
    all.resize(2 * size_t(s_.comm->worldSize()));
    if (!s_.comm->allGather(figures, all.data(), 2, DType::I64,
                            s_.comm->mesh().allAxes(), "the memory figures"))
      return;
  }
  if (timing_) {
    nlohmann::ordered_json resident = nlohmann::ordered_json::array(),
                           peak = resident;
    for (size_t r = 0; r < all.size() / 2; ++r) {
      if (all[2 * r] >= 0)
        resident.push_back(all[2 * r]);
      else
        resident.push_back(nullptr);
      peak.push_back(all[2 * r + 1]);
    }
    recordTiming({{"step", step_},
                  {"memory",
                   {{"planned_bytes", m_.arenaBytes},
                    {"resident_bytes", resident},
                    {"peak_rss_bytes", peak}}}});
  }
  if (all[0] < 0)
    return;
  std::string each;
  for (size_t r = 0; r < all.size(); r += 2)
    each += fmt::format("{}{}", each.empty() ? "" : ", ",
                        formatBytes(double(all[r])));
  if (s_.comm)
    fmt::print("memory: arena {} planned per rank; resident on ranks 0..{}: "
               "{}\n",
               formatBytes(double(m_.arenaBytes)), s_.comm->worldSize() - 1,
               each);
  else
    fmt::print("memory: arena {} planned; {} resident\n",
               formatBytes(double(m_.arenaBytes)), each);
}

void Trainer::printVerdict(const std::vector<RankTimes> &times,
                           const Arrivals &arrivals, int64_t steps,
                           int64_t first) {
  if (s_.comm && s_.comm->rank() != 0)
    return;
  Verdict v = judge(times, steps, 0, s_.predicted, verdictGroups_, &arrivals);
  std::string line = describe(v, first);
  if (line.empty())
    return;
  fmt::print("{}\n", line);
  std::fflush(stdout);
  // The same verdict in the sinks, in seconds per step; a sink that fails
  // has warned already, and the run goes on.
  if (timing_)
    recordTiming({{"step", step_}, {"verdict", toJson(v, first)}});
  if (s_.tensorboard) {
    std::vector<std::pair<std::string, double>> parts{
        {"verdict/compute_s", v.compute},
        {"verdict/comm_s", v.comm},
        {"verdict/straggler_wait_s", v.stragglerWait},
        {"verdict/input_s", v.input},
        {"verdict/bubble_s", v.bubble}};
    if (v.predicted)
      parts.push_back({"verdict/predicted_step_s", v.predicted->total()});
    s_.tensorboard->scalars(step_, parts);
  }
}

void Trainer::printCollectives() {
  int64_t steps = step_ - firstStep_;
  if (!s_.comm || steps <= 0)
    return;
  fmt::print("collectives: {:.3g} ms of rank 0's {:.3g} ms step ({:.0f}%, "
             "waiting for other ranks included)\n",
             trainComm_ / double(steps) * 1e3,
             trainSeconds_ / double(steps) * 1e3,
             100 * trainComm_ / std::max(trainSeconds_, 1e-9));
}

void Trainer::printPipeline() {
  if (!s_.pipeline || !s_.comm)
    return;
  const PipelineRunner &p = *s_.pipeline;
  const PipelineSpec &spec = *m_.pipeline;
  size_t stages = spec.stages.size();
  // Per rank: busy, step and wait time, then each stage's forward and
  // backward time (microseconds; 0 for other ranks' stages).
  size_t fields = 3 + 2 * stages;
  std::vector<int64_t> mine = {int64_t(p.busySeconds() * 1e6),
                               int64_t(p.stepSeconds() * 1e6),
                               int64_t(p.waitSeconds() * 1e6)};
  for (const std::vector<double> *times :
       {&p.forwardSeconds(), &p.backwardSeconds()})
    for (double t : *times)
      mine.push_back(int64_t(t * 1e6));
  std::vector<int64_t> all(fields * size_t(s_.comm->worldSize()));
  if (!s_.comm->allGather(mine.data(), all.data(), int64_t(fields),
                          DType::I64, s_.comm->mesh().allAxes(),
                          "the pipeline's times"))
    return;
  std::string each, waits;
  // Each stage's time, averaged over the ranks that run it (every stage runs
  // as many passes, so totals weigh the stages as their mean passes do).
  std::vector<double> forward(stages, 0), backward(stages, 0);
  std::vector<int> runs(stages, 0);
  // Idle is a fraction of the pipeline's step, as the schedule counts it:
  // the ranks start each step together (the step ends in an all-gather), and
  // the step lasts until its slowest rank is done. A rank's own step ends
  // with its last pass, so a last stage, done a backward pass before the
  // first, would leave out the wait at its end.
  int64_t pipelineStep = 1;
  for (int r = 0; r < s_.comm->worldSize(); ++r)
    pipelineStep = std::max(pipelineStep, all[size_t(fields) * size_t(r) + 1]);
  for (int r = 0; r < s_.comm->worldSize(); ++r) {
    const int64_t *f = &all[size_t(fields) * size_t(r)];
    double total = double(pipelineStep);
    auto percent = [&](std::string &out, double part) {
      out += fmt::format("{}{:.1f}", out.empty() ? "" : ", ",
                         100.0 * part / total);
    };
    percent(each, total - double(f[0]));
    percent(waits, double(f[2]));
    for (size_t s = 0; s < stages; ++s)
      if (f[3 + s] > 0) {
        forward[s] += double(f[3 + s]);
        backward[s] += double(f[3 + stages + s]);
        ++runs[s];
      }
  }
  for (size_t s = 0; s < stages; ++s) {
    forward[s] /= std::max(runs[s], 1);
    backward[s] /= std::max(runs[s], 1);
  }
  std::string predicted;
  for (double idle : scheduleIdle(spec, forward, backward))
    predicted += fmt::format("{}{:.1f}", predicted.empty() ? "" : ", ",
                             100.0 * idle);
  fmt::print("pipeline: ranks idle {} % of the pipeline's step (the schedule's "
             "bubble: {:.1f} %; with its stages' measured times, pipeline "
             "ranks idle {} %): waiting for messages {} %; the stash of "
             "in-flight micro-batches holds {} of rank 0's arena\n",
             each, 100.0 * scheduleBubble(spec), predicted, waits,
             formatBytes(double(p.stashBytes())));
}

void Trainer::printSummary() {
  int64_t steps = step_ - firstStep_;
  double samplesPerS =
      double(steps * samplesPerStep()) / std::max(trainSeconds_, 1e-9);
  std::string eval;
  if (lastEval_)
    eval = fmt::format(
        ", eval loss {:.6f}{}", lastEval_->loss,
        lastEval_->accuracy
            ? fmt::format(", eval accuracy {:.2f}%", *lastEval_->accuracy * 100)
            : "");
  fmt::print(
      "done: {} steps{}; final loss {:.6f}{}; {} ({} {}/s); peak RSS "
      "{}\n",
      step_, s_.resumedStep ? fmt::format(" ({} in this run)", steps) : "",
      loss_, eval, formatDuration(elapsed()),
      formatCount(tokensPerSample() ? samplesPerS * tokensPerSample()
                                    : samplesPerS),
      tokensPerSample() ? "tokens" : "samples", formatBytes(peakRssBytes()));
  std::fflush(stdout);
}

Expected<int> Trainer::run() {
  const RunConfig &c = *s_.config;
  step_ = firstStep_ = verdictFirst_ = arena_.readI64(*stepBuf_);
  bool evaluates = s_.evalSource != nullptr;
  bool checkpoints = !c.checkpointDir.empty();
  // Before the first step the ranks have not compared notes yet; a signal
  // this early stops them without a checkpoint, each on its own.
  if (int sig = stopSignal(); sig && !s_.comm)
    return stop(sig);
  while (step_ < s_.totalSteps) {
    if (Status st = trainStep(); !st)
      return st.error();
    bool last = step_ == s_.totalSteps;
    if (step_ % c.logEvery == 0 || last)
      if (Status st = logStep(); !st)
        return st.error();
    if (evaluates && c.evalEvery > 0 && step_ % c.evalEvery == 0 && !last)
      if (Status st = evaluateNow(); !st)
        return st.error();
    if (checkpoints && c.checkpointEvery > 0 &&
        step_ % c.checkpointEvery == 0 && !last)
      if (Status st = checkpointNow(); !st)
        return st.error();
    // After the last step the run finishes normally (final evaluation and
    // checkpoint) even when asked to stop: that is the quickest way out.
    if (stop_ && !last)
      return stop(stop_);
  }
  if (evaluates)
    if (Status st = evaluateNow(); !st)
      return st.error();
  if (checkpoints && lastCheckpoint_ != step_)
    if (Status st = checkpointNow(); !st)
      return st.error();
  printMemory();
  printCollectives();
  printPipeline();
  printSummary();
  printVerdict(verdictTotal_, arrivalsTotal_, step_ - firstStep_, firstStep_);
  return int(kExitOk);
}

} // namespace

Expected<int> runTraining(const TrainSetup &setup) {
  return Trainer(setup).run();
}

} // namespace dtrt
