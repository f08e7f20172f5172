//===- dtrt/run_report.h - The run report, one HTML page --------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A run's log directory holds its records: metrics.jsonl (training and eval
// records, dtrt/metrics.h) and timing.jsonl, which the first rank writes
// beside it:
//
//   {"step", "run": {...}}             at start: the program, the machine, the
//                                      layout, the peaks and the prediction
//   {"step", "rank_step_s": [...],     with every training record: each
//    "rank_comm_s", "rank_input_s",    rank's mean times over the interval
//    "rank_bubble_s"}
//   {"step", "verdict": {...}}         every verdict (dtrt/verdict.h, toJson)
//   {"step", "memory": {...}}          at the end: the planned arena, each
//                                      rank's resident arena and peak RSS
//
// The run report renders both files as one self-contained HTML page (styles,
// script and data inline, nothing fetched): loss and eval curves, throughput
// and MFU, every rank's step time with the straggler marked, the verdict's
// parts beside the prediction, memory planned against measured, the layout.
// The program writes DIR/report.html at the end of a run, and renders any log
// directory of its own on demand (--report-html FILE). The page's template
// is runtime/lib/run_report/page.html.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_RUN_REPORT_H
#define DTRT_RUN_REPORT_H

#include "dtrt/error.h"

#include <string>

namespace dtrt {

/// The page for the records in `logDir`; an error when it has no
/// metrics.jsonl (a log directory without timing.jsonl renders what it has).
Expected<std::string> renderRunReport(const std::string &logDir);

/// Renders the page and writes it to `path` (a temporary file renamed into
/// place, so a reader never sees half a page).
Status writeRunReport(const std::string &logDir, const std::string &path);

} // namespace dtrt

#endif // DTRT_RUN_REPORT_H
