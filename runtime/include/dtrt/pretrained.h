//===- dtrt/pretrained.h - Hugging Face weights in and out ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A program whose train block says `init = nn.safetensors("PATH")` (or that
// is run with --init PATH) starts from those weights: after the declared
// initialisers ran, every rank overwrites its own pieces of the parameters
// the checkpoint holds, reading them through mmap, so a rank of a sharded
// layout touches only the pages of its slice (a ZeRO-3 rank of 8 reads about
// an eighth). F16, BF16 and F64 tensors convert to the f32 master copy;
// GPT-2's Conv1D weights are read transposed. The headers are checked again
// here (the file may have changed since dtc saw it), and a tensor holding a
// NaN or an infinity stops the run with its name, before any step.
//
// --export DIR writes the parameters back under the same names, as Hugging
// Face writes a model: `model.safetensors`, or above --export-shard-size a
// set of files with `model.safetensors.index.json`, LoRA adapters merged or
// (--export-adapters) alone in PEFT's layout. Every rank writes the pieces it
// is the writer of, so no rank gathers the model (export.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_PRETRAINED_H
#define DTRT_PRETRAINED_H

#include "dtrt/arena.h"
#include "dtrt/comm.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtrt {

/// What loading a checkpoint did on this rank.
struct PretrainedLoad {
  /// Parameters read from the file.
  size_t loaded = 0;
  /// Parameters the file lacks; they keep their declared initialisers.
  std::vector<std::string> fresh;
  /// File tensors no parameter takes that were skipped (buffers, `ignore`).
  std::vector<std::string> skipped;
  /// The prefix the file's names carry ("transformer.", ...).
  std::string prefix;
  /// Bytes of tensor data this rank read.
  uint64_t bytesRead = 0;
};

/// Loads this rank's pieces of the parameters from the safetensors file, set
/// or directory at `path`; `ignore` are fnmatch globs of file tensors to
/// skip. Reports every tensor that does not fit at once. On error the arena
/// may be partly overwritten (the run stops before any step).
Expected<PretrainedLoad> loadPretrained(const std::string &path,
                                        const std::vector<std::string> &ignore,
                                        Arena &arena,
                                        const std::vector<int> &coords);

/// Hugging Face's default shard limit (huggingface_hub's MAX_SHARD_SIZE).
inline constexpr uint64_t kDefaultExportShardBytes = 5'000'000'000;

/// Writes the parameters into `dir` as a Hugging Face model, LoRA adapters
/// merged (collective over `comm` when there is one; `coords` is this
/// rank's); with `adaptersOnly`, the adapters alone as PEFT saves them
/// (`adapter_model.safetensors`, `adapter_config.json`). Returns the files
/// written.
Expected<std::vector<std::string>>
exportPretrained(const std::string &dir, uint64_t shardBytes, Arena &arena,
                 Communicator *comm, const std::vector<int> &coords,
                 bool adaptersOnly = false);

} // namespace dtrt

#endif // DTRT_PRETRAINED_H
