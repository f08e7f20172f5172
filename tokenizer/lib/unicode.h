//===- unicode.h - UTF-8 and Unicode properties -----------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The character classes and mappings Hugging Face's tokenizers take from
// Rust's `char` (White_Space, general categories, per-character full
// lowercasing) and its normalization forms, answered by ICU so that no
// Unicode table is written by hand here.
//
//===----------------------------------------------------------------------===//

#ifndef DTTOK_UNICODE_H
#define DTTOK_UNICODE_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dttok::unicode {

/// The code points of `text`; a malformed sequence becomes U+FFFD, as
/// Rust's lossy decoding does.
std::vector<char32_t> decode(std::string_view text);
/// Appends `c` to `out` as UTF-8.
void append(std::string &out, char32_t c);
/// `text` as UTF-8.
std::string encode(const std::vector<char32_t> &text);

/// Rust's char::is_whitespace (the White_Space property).
bool isWhitespace(char32_t c);
/// Any punctuation category (Pc Pd Ps Pe Pi Pf Po).
bool isPunctuation(char32_t c);
/// Letters (L*) and numbers (N*), `\w` minus the underscore's connector.
bool isAlphanumeric(char32_t c);
/// Decimal digits (Nd).
bool isDigit(char32_t c);
/// "Other" categories (Cc Cf Cs Co Cn), what BERT's clean-up drops.
bool isOther(char32_t c);
/// Non-spacing marks (Mn), what accent stripping drops.
bool isNonspacingMark(char32_t c);

/// Each character lower-cased on its own (full mappings, no context), as
/// Hugging Face's NormalizedString::lowercase does.
std::string lowercase(std::string_view text);
/// Unicode normalization: form is "NFC", "NFD", "NFKC" or "NFKD".
std::string normalize(std::string_view text, std::string_view form);

} // namespace dttok::unicode

#endif // DTTOK_UNICODE_H
