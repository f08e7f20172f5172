//===- dtrt/safetensors.h - Hugging Face safetensors files ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The safetensors format (huggingface/safetensors, README "Format"): 8 bytes
// of little-endian u64 N, N bytes of UTF-8 JSON mapping each tensor's name to
// {"dtype", "shape", "data_offsets": [begin, end)} (relative to the byte
// buffer after the header) plus an optional "__metadata__" string map, then
// the buffer, row-major and little-endian. A model too big for one file is a
// set `model-0000i-of-0000n.safetensors` with `model.safetensors.index.json`
// ({"metadata": {"total_size"}, "weight_map": {tensor: file}}).
//
// Both dtc and the emitted programs read it: dtc checks a checkpoint's
// headers against the model at compile time, the program re-checks them and
// reads each rank's slices. So this library validates a header as hard as the
// reference reader does (offsets from 0 without gaps or overlaps, sizes that
// match shape x dtype, no trailing bytes, a bounded header) and reports what
// is wrong with the file and tensor named; it never trusts an offset it has
// not checked against the file's size.
//
// Writing follows the reference writer: tensors sorted by alignment, then
// name; the header padded with spaces to a multiple of 8, so every tensor
// starts at a multiple of its element size; `__metadata__` {"format": "pt"}.
// Sets split greedily in name order at a byte limit, as huggingface_hub does.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_SAFETENSORS_H
#define DTRT_SAFETENSORS_H

#include "dtrt/error.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dtrt {

/// One tensor of a safetensors file or set, from its header.
struct StTensor {
  std::string name;
  /// The format's spelling: "F32", "BF16", "F16", "I64", ...
  std::string dtype;
  std::vector<int64_t> shape;
  /// Bytes from the start of the file's data buffer, end exclusive.
  uint64_t begin = 0, end = 0;
  /// Index of the file in StSet::files() that holds it.
  size_t file = 0;

  int64_t elements() const;
};

/// Bits per element of a safetensors dtype; 0 for a spelling the format does
/// not define.
unsigned stDTypeBits(std::string_view dtype);

/// Whether dt converts the dtype to f32 on load (F32, F16, BF16, F64).
bool stIsFloat(std::string_view dtype);

/// One file's header, validated against the file's size.
struct StHeader {
  std::vector<StTensor> tensors;
  std::map<std::string, std::string> metadata;
  /// Bytes before the data buffer (8 + N).
  uint64_t dataStart = 0;
};

/// Parses and validates the JSON `header` of a file of `fileSize` bytes whose
/// header is `headerBytes` long; `path` names the file in errors.
Expected<StHeader> parseStHeader(std::string_view header, uint64_t headerBytes,
                                 uint64_t fileSize, const std::string &path);

/// Reads and validates the header of the file at `path` (the tensor bytes are
/// not read).
Expected<StHeader> readStHeader(const std::string &path);

/// A model's tensors in one file or a set, by name.
class StSet {
public:
  /// Opens `path`: a .safetensors file, an index .json, or a directory holding
  /// `model.safetensors` or `model.safetensors.index.json`. Reads and checks
  /// every header, and that the index names each tensor where it is.
  static Expected<StSet> open(const std::string &path);

  const StTensor *find(const std::string &name) const;
  const std::vector<StTensor> &tensors() const { return tensors_; }
  const std::vector<std::string> &files() const { return files_; }
  /// Each file's data start (8 + N).
  uint64_t dataStart(size_t file) const { return dataStarts_[file]; }

private:
  std::vector<std::string> files_;
  std::vector<uint64_t> dataStarts_;
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t> byName_;
};

/// Converts `count` elements of safetensors `dtype` at `src` (little-endian)
/// to f32. `dtype` must satisfy stIsFloat.
void stToF32(std::string_view dtype, const void *src, int64_t count,
             float *dst);

/// A tensor to write: its name, shape and dtype (the bytes come later).
struct StEntry {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "F32";
};

/// Where each tensor of a file to write goes: the header text (padded), the
/// data start and per entry (in the order given) its byte offset from the
/// file's start, and the file's size.
struct StFileLayout {
  std::string header;
  uint64_t dataStart = 0;
  std::vector<uint64_t> offsets;
  uint64_t size = 0;
};

/// Lays out one file of `entries` as the reference writer does.
StFileLayout layOutStFile(const std::vector<StEntry> &entries,
                          const std::map<std::string, std::string> &metadata);

/// Splits `entries` (sorted by name) into files of at most `limit` bytes of
/// tensor data, greedily; a tensor above the limit goes alone. Returns, per
/// file, the indices of its entries.
std::vector<std::vector<size_t>>
splitStEntries(const std::vector<StEntry> &entries, uint64_t limit);

/// The file names of a set of `n` files: `model.safetensors` for one,
/// `model-0000i-of-0000n.safetensors` for more.
std::string stFileName(size_t index, size_t n);

/// The index JSON of a set: total_size and the weight map.
std::string stIndexJSON(const std::vector<StEntry> &entries,
                        const std::vector<std::vector<size_t>> &files);


/// A tensor a model wants from a checkpoint: the parameter, the name it
/// has in the file (before the file's prefix) and the shape it must have
/// there (a transposed weight's reversed).
struct StWant {
  std::string param;
  std::string name;
  std::vector<int64_t> shape;
};

/// How a model's parameters meet a checkpoint.
struct StMatch {
  /// What the file's names add in front of the model's ("", "transformer.",
  /// "model.", "bert."): the one under which most wanted tensors are found
  /// (a layer norm's `gamma` and `beta` count for `weight` and `bias`).
  std::string prefix;
  /// Per wanted tensor, the file's (null: the file lacks it; the parameter
  /// keeps its declared initialiser).
  std::vector<const StTensor *> found;
  /// File tensors no parameter takes that are skipped: buffers that are not
  /// parameters (GPT-2's attn.bias, position_ids, rotary inv_freq) and those
  /// matching an ignore glob.
  std::vector<std::string> skipped;
  /// Everything wrong, one line each (a mis-shaped tensor with both shapes,
  /// a dtype that is not a float, a file tensor nothing takes): all reported
  /// at once. Empty when the checkpoint fits.
  std::vector<std::string> problems;
};

/// Matches `wants` against `set`; `ignore` holds fnmatch globs of file
/// tensors to skip.
StMatch matchStTensors(const StSet &set, const std::vector<StWant> &wants,
                       const std::vector<std::string> &ignore);

/// "[768, 2304]".
std::string stShapeText(const std::vector<int64_t> &shape);

} // namespace dtrt

#endif // DTRT_SAFETENSORS_H
