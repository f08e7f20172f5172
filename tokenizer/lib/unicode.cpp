//===- unicode.cpp - UTF-8 and Unicode properties -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "unicode.h"

#include "dttok/tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

namespace dttok::unicode {

std::vector<char32_t> decode(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  const auto *s = reinterpret_cast<const uint8_t *>(text.data());
  int32_t i = 0, n = int32_t(text.size());
  while (i < n) {
    UChar32 c;
    U8_NEXT(s, i, n, c);
    out.push_back(c < 0 ? U'\uFFFD' : char32_t(c));
  }
  return out;
}

void append(std::string &out, char32_t c) {
  uint8_t buf[4];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, UChar32(c));
  out.append(reinterpret_cast<const char *>(buf), size_t(len));
}

std::string encode(const std::vector<char32_t> &text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text)
    append(out, c);
  return out;
}

bool isWhitespace(char32_t c) { return u_isUWhiteSpace(UChar32(c)); }

bool isPunctuation(char32_t c) { return u_ispunct(UChar32(c)); }

bool isAlphanumeric(char32_t c) {
  int8_t type = u_charType(UChar32(c));
  return (U_GC_L_MASK | U_GC_N_MASK) & U_MASK(type);
}

bool isDigit(char32_t c) {
  return u_charType(UChar32(c)) == U_DECIMAL_DIGIT_NUMBER;
}

bool isOther(char32_t c) {
  int8_t type = u_charType(UChar32(c));
  return U_GC_C_MASK & U_MASK(type);
}

bool isNonspacingMark(char32_t c) {
  return u_charType(UChar32(c)) == U_NON_SPACING_MARK;
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : decode(text)) {
    if (c < 0x80) {
      out.push_back(char(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
      continue;
    }
    // One character at a time: no final-sigma context, as Rust's
    // char::to_lowercase.
    UChar in[2], lower[8];
    int32_t inLen = 0;
    U16_APPEND_UNSAFE(in, inLen, UChar32(c));
    UErrorCode status = U_ZERO_ERROR;
    int32_t len = u_strToLower(lower, 8, in, inLen, "", &status);
    if (U_FAILURE(status)) {
      append(out, c);
      continue;
    }
    icu::UnicodeString(lower, len).toUTF8String(out);
  }
  return out;
}

std::string normalize(std::string_view text, std::string_view form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *n = nullptr;
  if (form == "NFC")
    n = icu::Normalizer2::getNFCInstance(status);
  else if (form == "NFD")
    n = icu::Normalizer2::getNFDInstance(status);
  else if (form == "NFKC")
    n = icu::Normalizer2::getNFKCInstance(status);
  else if (form == "NFKD")
    n = icu::Normalizer2::getNFKDInstance(status);
  if (!n || U_FAILURE(status))
    throw TokenizerError("ICU has no " + std::string(form) + " normalizer");
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), int32_t(text.size())));
  icu::UnicodeString result = n->normalize(s, status);
  if (U_FAILURE(status))
    throw TokenizerError("cannot " + std::string(form) + "-normalize a text");
  std::string out;
  result.toUTF8String(out);
  return out;
}

} // namespace dttok::unicode
