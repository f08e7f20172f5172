//===- dtrt/tensorboard.h - TensorBoard event files -------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `--tensorboard DIR` (or Vertex AI's AIP_TENSORBOARD_LOG_DIR): the training
// records as TensorBoard scalars. An event file is TFRecord framing (each
// record: its length as a little-endian u64, the masked CRC-32C of those 8
// bytes, the bytes, their masked CRC-32C) around serialised `Event` protos,
// the first holding file_version "brain.Event:2"; the protos are a handful of
// fields, written by hand (../shared/notes/observability-formats.md has the
// formats and their sources). TensorBoard follows one writer per directory:
// rank 0 writes the job's scalars into DIR, and every rank its own timings
// into DIR/rank_<r>/.
//
// A sink never stops training: a write that fails (a full disk, a directory
// that went away) is a warning once, and the writer goes quiet.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_TENSORBOARD_H
#define DTRT_TENSORBOARD_H

#include "dtrt/error.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dtrt {

class EventWriter {
public:
  /// Creates DIR (and its parents) and the event file
  /// DIR/events.out.tfevents.<unix time>.<host>.<pid>.0, with its first
  /// record.
  static Expected<EventWriter> open(const std::string &dir);

  EventWriter(EventWriter &&other) noexcept;
  EventWriter &operator=(EventWriter &&) = delete;
  EventWriter(const EventWriter &) = delete;
  ~EventWriter();

  /// One event at `step` holding a scalar per (tag, value), flushed.
  void scalars(int64_t step,
               const std::vector<std::pair<std::string, double>> &values);

  const std::string &path() const { return path_; }

private:
  EventWriter(std::FILE *file, std::string path)
      : file_(file), path_(std::move(path)) {}
  void record(const std::string &bytes);

  std::FILE *file_;
  std::string path_;
};

/// The CRC-32C of `bytes`, masked as TFRecord stores it.
uint32_t maskedCrc32c(const std::string &bytes);

} // namespace dtrt

#endif // DTRT_TENSORBOARD_H
