//===- dtrt/data/tokens.h - llm.c token shards ------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// llm.c's `.bin` shards: a header of 256 little-endian int32 (magic 20240520,
// version 1, the number of tokens, zeros) followed by that many uint16
// tokens; llm.c's LLaMA 3 variant (magic 20240801, version 7) holds uint32
// tokens, for vocabularies above 65 536. dt adds one thing llm.c lacks, a
// loss mask for instruction tuning: header word 3 set to 1 says that one
// byte per token follows the tokens, 1 where the token is a target and 0
// where it is not (a prompt's tokens); a target whose byte is 0 reads as
// label -1, which cross_entropy ignores (Hugging Face's -100). llm.c's own
// reader rejects such a file by its size rather than misreading it. A source's path may be a glob(3) pattern; the matching shards are
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

/// The shard header's magic number and version for uint16 tokens (llm.c).
inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
/// The same for uint32 tokens (llm.c's LLaMA 3 shards).
inline constexpr int32_t kTokenShard32Magic = 20240801;
inline constexpr int32_t kTokenShard32Version = 7;
/// Header size in int32 words.
inline constexpr int kTokenShardHeaderInts = 256;
/// The header word that says a loss mask follows the tokens (dt's own).
inline constexpr int kTokenShardMaskWord = 3;

/// Windows of `seq + 1` tokens, starting every `seq`, that fit in `tokens`.
inline int64_t tokenWindows(int64_t tokens, int64_t seq) {
  return tokens > seq ? (tokens - 1) / seq : 0;
}

} // namespace dtrt

#endif // DTRT_DATA_TOKENS_H
