//===- pipeline.cpp - Running a pipeline rank's schedule ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/pipeline.h"

#include "dtrt/collectives.h"
#include "dtrt/pipeline_timing.h"
#include "dtrt/report.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sys/statvfs.h>

namespace dtrt {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

} // namespace

double scheduleBubble(const PipelineSpec &spec) {
  double p = double(spec.apply.size()), v = double(spec.chunks),
         m = double(spec.microbatches);
  return (p - 1) / (v * m + p - 1);
}

std::vector<double> scheduleIdle(const PipelineSpec &spec,
                                 const std::vector<double> &forward,
                                 const std::vector<double> &backward) {
  return idleFractions(runPipeline(spec.actions, spec.stages.size(),
                                   size_t(spec.microbatches), forward,
                                   backward));
}

void sendPipelineMessagesEagerly(const Manifest &m, int localRanks) {
  size_t largest = 4096;
  for (const PipelineStage &s : m.pipeline->stages)
    for (const auto *list : {&s.send, &s.gradSend, &s.evalSend})
      for (const std::string &name : *list)
        largest = std::max(largest, m.find(name)->bytes);
  // The transport's header rides in the same fragment.
  size_t fragment = std::min<size_t>(largest + 4096, size_t(4) << 20);
  std::string limit = std::to_string(fragment);
  ::setenv("OMPI_MCA_btl_vader_eager_limit", limit.c_str(), 0);
  ::setenv("OMPI_MCA_btl_vader_max_send_size", limit.c_str(), 0);
  // The transport starts with 8 fragments of each of those two sizes in the
  // sender's segment; a send that finds none free waits for the sender's
  // next MPI call. In the default 4 MiB segment, the first activation of
  // every 1F1B step of gpt_pipeline.dt (512 KiB) reached the next stage a
  // whole forward pass late, 4 % of the step
  // (bench/results/pipeline-segment-2026-11-25-vm.md): make room for the 16
  // and the default's 4 MiB of queues, if /dev/shm has it for every rank on
  // this machine (twice, for Open MPI's own copies).
  size_t segment =
      std::clamp<size_t>(16 * fragment + (size_t(4) << 20), size_t(4) << 20,
                         size_t(68) << 20);
  struct statvfs fs;
  uint64_t free = ::statvfs("/dev/shm", &fs) == 0
                      ? uint64_t(fs.f_bavail) * uint64_t(fs.f_frsize)
                      : 0;
  if (free >= 2 * uint64_t(segment) * uint64_t(std::max(localRanks, 1))) {
    ::setenv("OMPI_MCA_btl_vader_segment_size",
             std::to_string(segment).c_str(), 0);
  } else if (!std::getenv("OMPI_MCA_btl_vader_segment_size")) {
    fmt::print(stderr,
               "warning: /dev/shm has {} free, too little for {} rank{} "
               "with {} of shared memory each: pipeline messages may reach "
               "the next stage a pass late; give the machine or container "
               "more shared memory (docker run --shm-size)\n",
               formatBytes(double(free)), localRanks,
               localRanks == 1 ? "" : "s", formatBytes(double(segment)));
  }
}

Program::Entry Program::find(const char *name) const {
  for (long long i = 0; i < entryCount; ++i)
    if (std::strcmp(entries[i].name, name) == 0)
      return entries[i].fn;
  return nullptr;
}

Expected<PipelineRunner> PipelineRunner::create(const Program &program,
                                                Arena &arena,
                                                Communicator &comm,
                                                const std::vector<int> &coords) {
  const Manifest &m = arena.manifest();
  const PipelineSpec &spec = *m.pipeline;
  PipelineRunner r;
  r.arena_ = &arena;
  r.comm_ = &comm;
  r.spec_ = &spec;
  int axis = -1;
  for (size_t a = 0; a < m.mesh.names.size(); ++a)
    if (m.mesh.names[a] == spec.axis)
      axis = int(a);
  if (axis < 0 || size_t(axis) >= coords.size())
    return Error(fmt::format("the pipeline axis '{}' is not an axis of this "
                             "rank's mesh",
                             spec.axis));
  r.axis_ = AxisMask(1) << axis;
  r.ppRank_ = coords[size_t(axis)];
  auto entry = [&](const std::string &name) -> Expected<Program::Entry> {
    if (Program::Entry fn = program.find(name.c_str()))
      return fn;
    return Error(fmt::format("the program has no entry point '{}', which its "
                             "manifest's pipeline names; rebuild it with dtc",
                             name));
  };
  Expected<Program::Entry> apply = entry(spec.apply[size_t(r.ppRank_)]);
  if (!apply)
    return apply.error();
  r.apply_ = *apply;
  int64_t ranks = int64_t(spec.apply.size());
  r.holdsLoss_ = (int64_t(spec.stages.size()) - 1) % ranks == r.ppRank_;
  r.lossBuf_ = m.find("out/loss");
  r.microBuf_ = m.find("in/micro_index");
  auto buffers = [&](const std::vector<std::string> &names) {
    std::vector<const BufferDesc *> out;
    for (const std::string &n : names)
      out.push_back(m.find(n));
    return out;
  };
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    const PipelineStage &ps = spec.stages[s];
    Stage st;
    // Only this rank's stages need their entry points and a stash ring.
    if (int64_t(s) % ranks == r.ppRank_) {
      Expected<Program::Entry> fwd = entry(ps.forward), bwd = entry(ps.backward);
      if (!fwd)
        return fwd.error();
      if (!bwd)
        return bwd.error();
      st.forward = *fwd;
      st.backward = *bwd;
      if (!ps.eval.empty()) {
        Expected<Program::Entry> eval = entry(ps.eval);
        if (!eval)
          return eval.error();
        st.eval = *eval;
      }
    }
    st.evalSend = buffers(ps.evalSend);
    st.evalRecv = buffers(ps.evalRecv);
    st.readsBatch = ps.readsBatch;
    st.send = buffers(ps.send);
    st.recv = buffers(ps.recv);
    st.gradSend = buffers(ps.gradSend);
    st.gradRecv = buffers(ps.gradRecv);
    st.stash = buffers(ps.stash);
    if (st.forward && !st.stash.empty()) {
      st.slotIndex = ps.slotIndex.empty() ? nullptr : m.find(ps.slotIndex);
      if (!st.slotIndex)
        return Error(fmt::format("pipeline stage {} keeps a stash but the "
                                 "manifest names no slot index for it; "
                                 "rebuild the program with this dtc",
                                 s));
      st.slotUsed.assign(size_t(ps.stashSlots), false);
    }
    r.stages_.push_back(std::move(st));
  }
  r.forwardTime_.assign(spec.stages.size(), 0);
  r.backwardTime_.assign(spec.stages.size(), 0);
  return r;
}

size_t PipelineRunner::stashBytes() const {
  size_t total = 0;
  for (const Stage &s : stages_)
    for (const BufferDesc *b : s.stash)
      total += b->bytes * s.slotUsed.size();
  return total;
}

int PipelineRunner::tag(bool forward, int64_t stage,
                        int64_t microbatch) const {
  int64_t stages = int64_t(stages_.size());
  return int(((forward ? 0 : 1) * stages + stage) * spec_->microbatches +
             microbatch);
}

void PipelineRunner::useSlot(Stage &st, int64_t slot) {
  if (st.slotIndex)
    arena_->writeI64(*st.slotIndex, slot);
}

Status PipelineRunner::run(Program::Entry entry, const char *what,
                           double &stageSeconds) {
  auto begin = Clock::now();
  entry(arena_->base());
  if (Status s = checkCollectivesDone(what); !s)
    return s;
  double took = secondsSince(begin);
  busy_ += took;
  stageSeconds += took;
  return Status::ok();
}

Status PipelineRunner::pass(const PipelineAction &a,
                            const std::function<void(int64_t)> &stageBatch,
                            double &loss) {
  Stage &st = stages_[size_t(a.stage)];
  char *base = arena_->base();
  auto receive = [&](const std::vector<const BufferDesc *> &bufs, int step,
                     bool forward) -> Status {
    auto begin = Clock::now();
    struct Timed {
      double &to;
      Clock::time_point from;
      ~Timed() { to += secondsSince(from); }
    } timed{wait_, begin};
    for (const BufferDesc *b : bufs)
      if (Status s = comm_->receive(base + b->offset, b->elements, b->dtype,
                                    axis_, step,
                                    tag(forward, a.stage, a.microbatch),
                                    b->name);
          !s)
        return s;
    return Status::ok();
  };
  auto send = [&](const std::vector<const BufferDesc *> &bufs, int step,
                  bool forward, int64_t to) -> Status {
    for (const BufferDesc *b : bufs)
      if (Status s = comm_->send(base + b->offset, b->elements, b->dtype,
                                 axis_, step, tag(forward, to, a.microbatch),
                                 b->name);
          !s)
        return s;
    return Status::ok();
  };

  if (a.forward) {
    // The micro-batch keeps its stash in a free slot until its backward.
    if (!st.slotUsed.empty()) {
      size_t slot = 0;
      while (slot < st.slotUsed.size() && st.slotUsed[slot])
        ++slot;
      if (slot == st.slotUsed.size())
        return Error(fmt::format("pipeline stage {} holds more micro-batches "
                                 "than its {} stash slots; the manifest's "
                                 "schedule is inconsistent",
                                 a.stage, st.slotUsed.size()));
      st.slotUsed[slot] = true;
      st.slotOf[a.microbatch] = int64_t(slot);
      useSlot(st, int64_t(slot));
    }
    if (st.readsBatch)
      stageBatch(a.microbatch);
    if (microBuf_)
      arena_->writeI64(*microBuf_, a.microbatch);
    if (Status s = receive(st.recv, -1, true); !s)
      return s;
    if (Status s = run(st.forward, "a pipeline stage's forward",
                       forwardTime_[size_t(a.stage)]);
        !s)
      return s;
    if (Status s = send(st.send, +1, true, a.stage + 1); !s)
      return s;
    if (a.stage + 1 == int64_t(stages_.size()))
      loss += arena_->readScalar(*lossBuf_);
    return Status::ok();
  }

  if (!st.slotUsed.empty()) {
    auto it = st.slotOf.find(a.microbatch);
    if (it == st.slotOf.end())
      return Error(fmt::format("pipeline stage {} runs the backward of "
                               "micro-batch {} before its forward; the "
                               "manifest's schedule is inconsistent",
                               a.stage, a.microbatch));
    // The backward only reads the slot: it is free once it starts.
    useSlot(st, it->second);
    st.slotUsed[size_t(it->second)] = false;
    st.slotOf.erase(it);
  }
  if (Status s = receive(st.gradRecv, +1, false); !s)
    return s;
  if (Status s = run(st.backward, "a pipeline stage's backward",
                     backwardTime_[size_t(a.stage)]);
      !s)
    return s;
  return send(st.gradSend, -1, false, a.stage - 1);
}

bool PipelineRunner::evaluates() const {
  return !spec_->stages.empty() && !spec_->stages[0].eval.empty();
}

Status PipelineRunner::evalBatch() {
  // One batch passes through the stages in order; tags of direction 2 keep
  // its messages apart from training's (all of which were taken).
  char *base = arena_->base();
  int64_t stages = int64_t(stages_.size());
  for (int64_t s = ppRank_; s < stages; s += int64_t(spec_->apply.size())) {
    Stage &st = stages_[size_t(s)];
    int tagHere = tag(true, 2 * stages + s, 0);
    for (const BufferDesc *b : st.evalRecv)
      if (Status r = comm_->receive(base + b->offset, b->elements, b->dtype,
                                    axis_, -1, tagHere, b->name);
          !r)
        return r;
    st.eval(base);
    if (Status c = checkCollectivesDone("a pipeline stage's evaluation"); !c)
      return c;
    int tagNext = tag(true, 2 * stages + s + 1, 0);
    for (const BufferDesc *b : st.evalSend)
      if (Status r = comm_->send(base + b->offset, b->elements, b->dtype,
                                 axis_, +1, tagNext, b->name);
          !r)
        return r;
  }
  return comm_->finishSends("the pipeline's evaluation messages");
}

Expected<double> PipelineRunner::step(
    const std::function<void(int64_t)> &stageBatch) {
  auto begin = Clock::now();
  double loss = 0;
  for (const PipelineAction &a : spec_->actions[size_t(ppRank_)])
    if (Status s = pass(a, stageBatch, loss); !s)
      return s.error();
  if (Status s = comm_->finishSends("the pipeline's last messages"); !s)
    return s.error();
  total_ += secondsSince(begin);
  return loss;
}

} // namespace dtrt
