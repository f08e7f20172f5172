//===- dtrt/data/token_classes.h - Classification examples ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dt's file of tokenized classification examples (what `dt-tokenize
// --classes` writes and `nn.token_classes` reads), little-endian:
//
//   int32 header[256]: magic, version, examples, token bytes (2 or 4),
//                      pad id, trailing specials, classes, 0...
//   int64 offsets[examples + 1]   where each example's tokens start
//   int32 labels[examples]
//   uint16|uint32 tokens[offsets[examples]]
//   uint8 types[offsets[examples]]   each token's segment (0 or 1)
//
// Examples keep their own lengths (at most dt-tokenize's --max-length); the
// reader pads or truncates them to the program's `seq`, keeping the
// template's trailing special tokens ([SEP]) when it truncates.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DATA_TOKEN_CLASSES_H
#define DTRT_DATA_TOKEN_CLASSES_H

#include <cstdint>

namespace dtrt {

inline constexpr int32_t kTokenClassesMagic = 20261126;
inline constexpr int32_t kTokenClassesVersion = 1;
inline constexpr int kTokenClassesHeaderInts = 256;

/// The header's words.
enum TokenClassesHeader : int {
  kTcMagic = 0,
  kTcVersion = 1,
  kTcExamples = 2,
  kTcTokenBytes = 3,
  kTcPadId = 4,
  kTcTrailing = 5,
  kTcClasses = 6,
};

} // namespace dtrt

#endif // DTRT_DATA_TOKEN_CLASSES_H
