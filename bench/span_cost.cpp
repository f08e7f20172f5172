//===- span_cost.cpp - What one span of a trace costs ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `./train --print-manifest > m.json; build/bin/dt-bench-span-cost m.json`
// replays a program's spans as its generated code calls them: every step,
// each span of its entry points as often as the step calls them
// (dtrt_span_begin/end through the tracer the program would install), for 50
// steps, with the tracer idle (spans compiled in, no --trace) and recording
// (--trace over every step). It prints the time a step's spans cost in each
// case, the overhead tracing adds to a step, measured without the step's own
// work, whose run-to-run noise on a shared machine (~5 %) is larger than the
// effect (bench/trace_overhead.py measures whole runs); and the time writing
// the window's file takes, once, after its last step. Each figure is the
// median of 7 rounds.
//
//===----------------------------------------------------------------------===//

#include "dtrt/comm.h"
#include "dtrt/file.h"
#include "dtrt/manifest.h"
#include "dtrt/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

using namespace dtrt;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MANIFEST.json (./train --print-manifest)\n",
                 argv[0]);
    return 2;
  }
  Expected<std::string> text = readFile(argv[1]);
  if (!text) {
    std::fprintf(stderr, "%s\n", text.error().message().c_str());
    return 1;
  }
  Expected<Manifest> m = parseManifest(*text);
  if (!m) {
    std::fprintf(stderr, "%s: %s\n", argv[1], m.error().message().c_str());
    return 1;
  }
  // One step's spans in the order the entry points run them.
  std::vector<int32_t> step;
  for (const SpanDesc &s : m->spans)
    for (int64_t c = 0; c < m->callsPerStep(s.entry); ++c)
      step.push_back(int32_t(s.id));
  Expected<Mesh> mesh = Mesh::create({}, {});
  if (!mesh) {
    std::fprintf(stderr, "%s\n", mesh.error().message().c_str());
    return 1;
  }
  constexpr int64_t kSteps = 50;
  std::string dir =
      (std::filesystem::temp_directory_path() / "dt-bench-span-cost").string();
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  // Seconds a step's spans take, and (recording) writing the window's file
  // once its last step is done.
  auto replay = [&](bool recording, double &write) {
    Tracer::Setup setup;
    setup.dir = dir;
    setup.first = recording ? 1 : kSteps + 1;
    setup.last = recording ? kSteps : kSteps + 1;
    Tracer tracer(*m, setup, *mesh);
    setProgramTracer(&tracer);
    auto t = Clock::now();
    for (int64_t s = 1; s <= kSteps; ++s) {
      tracer.beginStep(s);
      for (int32_t id : step) {
        dtrt_span_begin(id);
        dtrt_span_end(id);
      }
      if (s < kSteps)
        tracer.endStep(s);
    }
    double seconds = since(t);
    t = Clock::now();
    tracer.endStep(kSteps);
    write = since(t);
    setProgramTracer(nullptr);
    return seconds / kSteps;
  };
  std::vector<double> idle, traced, writes;
  for (int round = 0; round < 7; ++round) {
    double write = 0;
    idle.push_back(replay(false, write));
    traced.push_back(replay(true, write));
    writes.push_back(write);
  }
  std::printf("| program | spans a step | idle: a step's spans cost | traced: "
              "a step's spans cost | per span traced | writing %lld steps' "
              "trace, once |\n|---|---|---|---|---|---|\n",
              (long long)kSteps);
  std::printf("| %s | %zu | %.2f us | %.2f us | %.1f ns | %.1f ms |\n",
              m->name.c_str(), step.size(), median(idle) * 1e6,
              median(traced) * 1e6,
              median(traced) / double(std::max<size_t>(step.size(), 1)) * 1e9,
              median(writes) * 1e3);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
