//===- regex.cpp - The regular expressions of tokenizer.json --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "regex.h"

#include "dttok/tokenizer.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

namespace dttok {

struct Regex::Impl {
  std::unique_ptr<icu::RegexPattern> pattern;
};

Regex::Regex(const std::string &pattern, bool literal,
             const std::string &where) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse;
  impl_ = std::make_unique<Impl>();
  impl_->pattern.reset(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern),
                                 literal ? UREGEX_LITERAL : 0, parse, status));
  if (U_FAILURE(status) || !impl_->pattern)
    throw TokenizerError(where + ": the pattern '" + pattern +
                         "' is not a regular expression ICU compiles (" +
                         u_errorName(status) + " at offset " +
                         std::to_string(parse.offset) + ")");
}

Regex::~Regex() = default;
Regex::Regex(Regex &&) noexcept = default;

std::vector<std::pair<size_t, size_t>>
Regex::findAll(std::string_view text) const {
  // ICU matches UTF-16; remember the byte offset of every UTF-16 index.
  icu::UnicodeString s;
  std::vector<size_t> byteAt;
  byteAt.reserve(text.size() + 1);
  const auto *bytes = reinterpret_cast<const uint8_t *>(text.data());
  int32_t i = 0, n = int32_t(text.size());
  while (i < n) {
    int32_t start = i;
    UChar32 c;
    U8_NEXT(bytes, i, n, c);
    if (c < 0)
      c = 0xFFFD;
    s.append(c);
    byteAt.push_back(size_t(start));
    if (c > 0xFFFF)
      byteAt.push_back(size_t(start));
  }
  byteAt.push_back(text.size());

  std::vector<std::pair<size_t, size_t>> out;
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(impl_->pattern->matcher(s, status));
  if (U_FAILURE(status))
    throw TokenizerError(std::string("cannot match a pattern: ") +
                         u_errorName(status));
  while (m->find(status) && U_SUCCESS(status)) {
    int32_t begin = m->start(status), end = m->end(status);
    if (end > begin)
      out.emplace_back(byteAt[size_t(begin)], byteAt[size_t(end)]);
  }
  return out;
}

} // namespace dttok
