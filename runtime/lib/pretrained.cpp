//===- pretrained.cpp - Hugging Face weights in ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Loading: each rank maps the checkpoint's files and converts only the
// elements of its own pieces of each parameter (the export is export.cpp).
//
//===----------------------------------------------------------------------===//

#include "dtrt/pretrained.h"

#include "dtrt/file.h"
#include "dtrt/layout.h"
#include "dtrt/safetensors.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>

namespace dtrt {

namespace {

std::vector<int64_t> fileShape(const BufferDesc &b, bool transposed) {
  std::vector<int64_t> shape = b.globalShape;
  if (transposed)
    std::reverse(shape.begin(), shape.end());
  return shape;
}

/// Every line of `problems`, at most `shown` of them.
std::string listed(const std::vector<std::string> &problems, size_t shown) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < shown; ++i)
    out += "\n  " + problems[i];
  if (problems.size() > shown)
    out += fmt::format("\n  ... and {} more", problems.size() - shown);
  return out;
}

/// Reads this rank's elements of `b` from tensor `t` (the file mapped at
/// `file`, its data at `dataStart`) into the arena.
Status readParam(const BufferDesc &b, const StTensor &t, bool transposed,
                 const MappedFile &file, uint64_t dataStart, Arena &arena,
                 const MeshSpec &mesh, const std::vector<int> &coords,
                 uint64_t &bytesRead) {
  const char *src = file.data() + dataStart + t.begin;
  size_t esize = stDTypeBits(t.dtype) / 8;
  // dt's [rows, cols]; a transposed file holds [cols, rows].
  int64_t rows = b.globalShape.empty() ? 1 : b.globalShape[0];
  int64_t cols = b.globalShape.size() < 2 ? 1 : b.globalShape[1];
  std::vector<float> values;
  std::optional<Error> bad;
  forEachRun(b, mesh, coords, [&](int64_t local, int64_t global, int64_t n) {
    if (bad)
      return;
    values.resize(size_t(n));
    if (!transposed) {
      stToF32(t.dtype, src + uint64_t(global) * esize, n, values.data());
    } else {
      // A run may span rows (a whole unsharded buffer is one run).
      for (int64_t k = 0; k < n; ++k) {
        int64_t g = global + k, r = g / cols, c = g % cols;
        stToF32(t.dtype, src + uint64_t(c * rows + r) * esize, 1,
                &values[size_t(k)]);
      }
    }
    bytesRead += uint64_t(n) * esize;
    for (int64_t k = 0; k < n; ++k)
      if (!std::isfinite(values[size_t(k)])) {
        // The element as the file counts it.
        int64_t g = global + k;
        int64_t at = transposed ? (g % cols) * rows + g / cols : g;
        bad = Error(fmt::format(
            "tensor '{}' of '{}' holds {} at element {}: the file is "
            "corrupt, or the weights diverged before they were saved",
            t.name, file.path(), values[size_t(k)], at));
        return;
      }
    arena.writePart(b, size_t(local) * sizeof(float),
                    size_t(n) * sizeof(float), values.data());
  });
  if (bad)
    return *bad;
  return Status::ok();
}

} // namespace

Expected<PretrainedLoad> loadPretrained(const std::string &path,
                                        const std::vector<std::string> &ignore,
                                        Arena &arena,
                                        const std::vector<int> &coords) {
  const Manifest &m = arena.manifest();
  auto fail = [&](const std::string &why) {
    return Error(fmt::format("cannot start from the weights in '{}': {}",
                             path, why));
  };
  Expected<StSet> set = StSet::open(path);
  if (!set)
    return fail(set.error().message());
  std::vector<StWant> wants;
  std::vector<const BufferDesc *> buffers;
  for (const CheckpointName &n : m.checkpointNames) {
    const BufferDesc *b = m.find(n.param);
    buffers.push_back(b);
    wants.push_back({n.param, n.name, fileShape(*b, n.transposed)});
  }
  StMatch match = matchStTensors(*set, wants, ignore);
  if (!match.problems.empty())
    return fail(fmt::format(
        "it does not fit the model ({} problem{}):{}\nmap names in the "
        "program's init = nn.safetensors(..., names = {{...}}), or skip "
        "file tensors with ignore = [...]",
        match.problems.size(), match.problems.size() == 1 ? "" : "s",
        listed(match.problems, 24)));

  PretrainedLoad load;
  load.prefix = match.prefix;
  load.skipped = match.skipped;
  std::vector<std::optional<MappedFile>> files(set->files().size());
  for (size_t i = 0; i < wants.size(); ++i) {
    const StTensor *t = match.found[i];
    if (!t) {
      load.fresh.push_back(wants[i].param);
      continue;
    }
    ++load.loaded;
    const BufferDesc &b = *buffers[i];
    if (!m.holds(b, coords))
      continue;
    if (!files[t->file]) {
      Expected<MappedFile> f =
          MappedFile::open(set->files()[t->file], /*writable=*/false);
      if (!f)
        return fail(f.error().message());
      // The header was checked against the size when the set was opened;
      // a file that shrank since would fault on access.
      if (f->size() < set->dataStart(t->file) + t->end)
        return fail(fmt::format("'{}' shrank while it was read",
                                set->files()[t->file]));
      files[t->file].emplace(std::move(*f));
    }
    if (Status s = readParam(b, *t, m.checkpointNames[i].transposed,
                             *files[t->file], set->dataStart(t->file), arena,
                             m.mesh, coords, load.bytesRead);
        !s)
      return fail(s.error().message());
  }
  return load;
}

} // namespace dtrt
