//===- dttok/shards.h - Writing token shards and example files --*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The files dt programs read (runtime/include/dtrt/data/tokens.h and
// token_classes.h). Each file is written beside its final name and renamed
// into place when complete, so an interrupted run leaves no half file that a
// program would take for data.
//
//===----------------------------------------------------------------------===//

#ifndef DTTOK_SHARDS_H
#define DTTOK_SHARDS_H

#include "dttok/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dttok {

/// Next-token shards in llm.c's format: `output` itself when everything fits
/// in one shard of `shardTokens`, else output's stem + _000000.bin, ...
class TokenShardWriter {
public:
  /// `wide`: uint32 tokens (vocabularies above 65 536); `masked`: the shards
  /// carry a loss mask.
  TokenShardWriter(std::string output, int64_t shardTokens, bool wide,
                   bool masked);
  /// Appends tokens; `target` is their mask value.
  void append(const std::vector<int32_t> &ids, bool target = true);
  /// Writes what is left; returns every file written, in order.
  std::vector<std::string> finish();
  int64_t tokens() const { return total_; }

private:
  void flush(bool last);

  std::string output_;
  int64_t shardTokens_;
  bool wide_, masked_;
  std::vector<int32_t> ids_;
  std::vector<uint8_t> mask_;
  std::vector<std::string> written_;
  int64_t total_ = 0;
};

/// dt's classification examples file.
class ClassFileWriter {
public:
  void append(const Encoding &example, int32_t label);
  /// Writes `path`; token width from the largest id.
  void finish(const std::string &path, int32_t padId, int trailingSpecials);
  int64_t examples() const { return int64_t(labels_.size()); }

private:
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> labels_, ids_;
  std::vector<uint8_t> types_;
};

/// Writes `bytes` to `path` through a temporary file and a rename.
void writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace dttok

#endif // DTTOK_SHARDS_H
