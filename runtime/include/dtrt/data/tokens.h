//===- dtrt/data/tokens.h - llm.c token shards ------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// llm.c's `.bin` shards: a header of 256 little-endian int32 (magic 20240520,
// version 1, the number of tokens, zeros) followed by that many uint16
// tokens. A source's path may be a glob(3) pattern; the matching shards are
// taken in sorted order. Sample i is the i-th window of seq + 1 tokens that
// fits in one shard (windows start at multiples of seq and never straddle two
// shards): x is its first seq tokens, y its last seq, both widened to i32.
// Shards are memory-mapped read-only, so a large corpus costs no copy.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_TOKENS_H
#define DTRT_DATA_TOKENS_H

#include <cstdint>

namespace dtrt {

/// The shard header's magic number (llm.c).
inline constexpr int32_t kTokenShardMagic = 20240520;
/// The shard format version this reader accepts.
inline constexpr int32_t kTokenShardVersion = 1;
/// Header size in int32 words.
inline constexpr int kTokenShardHeaderInts = 256;

/// Windows of `seq + 1` tokens, starting every `seq`, that fit in `tokens`.
inline int64_t tokenWindows(int64_t tokens, int64_t seq) {
  return tokens > seq ? (tokens - 1) / seq : 0;
}

} // namespace dtrt

#endif // DTRT_DATA_TOKENS_H
