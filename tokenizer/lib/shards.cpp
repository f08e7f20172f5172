//===- shards.cpp - Writing token shards and example files ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dttok/shards.h"

#include "dtrt/data/token_classes.h"
#include "dtrt/data/tokens.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dttok {

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  std::string tmp = path + ".partial";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw TokenizerError(
        fmt::format("cannot write '{}': {}", tmp, std::strerror(errno)));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok &= std::fflush(f) == 0;
  ok &= std::fclose(f) == 0;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw TokenizerError(
        fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
}

namespace {

template <typename T> void put(std::string &out, const T &v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof v);
}

/// `ids` as uint16 or uint32 little-endian words.
void putTokens(std::string &out, const std::vector<int32_t> &ids, bool wide) {
  for (int32_t id : ids) {
    if (wide)
      put(out, uint32_t(id));
    else
      put(out, uint16_t(id));
  }
}

} // namespace

TokenShardWriter::TokenShardWriter(std::string output, int64_t shardTokens,
                                   bool wide, bool masked)
    : output_(std::move(output)), shardTokens_(shardTokens), wide_(wide),
      masked_(masked) {}

void TokenShardWriter::append(const std::vector<int32_t> &ids, bool target) {
  for (int32_t id : ids) {
    if (id < 0 || (!wide_ && id > 0xFFFF))
      throw TokenizerError(fmt::format(
          "token id {} does not fit a {}-bit shard", id, wide_ ? 32 : 16));
    ids_.push_back(id);
    mask_.push_back(target ? 1 : 0);
    ++total_;
    if (int64_t(ids_.size()) == shardTokens_)
      flush(/*last=*/false);
  }
}

void TokenShardWriter::flush(bool last) {
  if (ids_.empty() && !(last && written_.empty()))
    return;
  std::string bytes;
  int32_t header[dtrt::kTokenShardHeaderInts] = {};
  header[0] = wide_ ? dtrt::kTokenShard32Magic : dtrt::kTokenShardMagic;
  header[1] = wide_ ? dtrt::kTokenShard32Version : dtrt::kTokenShardVersion;
  header[2] = int32_t(ids_.size());
  header[dtrt::kTokenShardMaskWord] = masked_ ? 1 : 0;
  bytes.append(reinterpret_cast<const char *>(header), sizeof header);
  putTokens(bytes, ids_, wide_);
  if (masked_)
    bytes.append(reinterpret_cast<const char *>(mask_.data()), mask_.size());
  // One shard: the name asked for; several: numbered from the stem.
  std::string path = output_;
  if (!(last && written_.empty())) {
    std::string stem = output_;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".bin") == 0)
      stem.resize(stem.size() - 4);
    path = fmt::format("{}_{:06d}.bin", stem, written_.size());
  }
  writeFileAtomically(path, bytes);
  written_.push_back(path);
  ids_.clear();
  mask_.clear();
}

std::vector<std::string> TokenShardWriter::finish() {
  flush(/*last=*/true);
  return written_;
}

void ClassFileWriter::append(const Encoding &example, int32_t label) {
  if (label < 0)
    throw TokenizerError(fmt::format("label {} is negative", label));
  ids_.insert(ids_.end(), example.ids.begin(), example.ids.end());
  for (int32_t t : example.typeIds)
    types_.push_back(uint8_t(t));
  offsets_.push_back(int64_t(ids_.size()));
  labels_.push_back(label);
}

void ClassFileWriter::finish(const std::string &path, int32_t padId,
                             int trailingSpecials) {
  int32_t maxId = padId;
  for (int32_t id : ids_)
    maxId = std::max(maxId, id);
  bool wide = maxId > 0xFFFF;
  int32_t classes = 0;
  for (int32_t l : labels_)
    classes = std::max(classes, l + 1);
  int32_t header[dtrt::kTokenClassesHeaderInts] = {};
  header[dtrt::kTcMagic] = dtrt::kTokenClassesMagic;
  header[dtrt::kTcVersion] = dtrt::kTokenClassesVersion;
  header[dtrt::kTcExamples] = int32_t(labels_.size());
  header[dtrt::kTcTokenBytes] = wide ? 4 : 2;
  header[dtrt::kTcPadId] = padId;
  header[dtrt::kTcTrailing] = trailingSpecials;
  header[dtrt::kTcClasses] = classes;
  std::string bytes(reinterpret_cast<const char *>(header), sizeof header);
  for (int64_t o : offsets_)
    put(bytes, o);
  for (int32_t l : labels_)
    put(bytes, l);
  putTokens(bytes, ids_, wide);
  bytes.append(reinterpret_cast<const char *>(types_.data()), types_.size());
  writeFileAtomically(path, bytes);
}

} // namespace dttok
