//===- regex.h - The regular expressions of tokenizer.json ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// tokenizer.json's patterns are written for Oniguruma (Unicode properties
// such as \p{L}, look-ahead, inline (?i:...) groups). ICU's engine accepts
// that syntax with the same meaning for the patterns real tokenizers use;
// matches are reported as byte ranges of the UTF-8 text.
//
//===----------------------------------------------------------------------===//

#ifndef DTTOK_REGEX_H
#define DTTOK_REGEX_H

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dttok {

class Regex {
public:
  /// Compiles `pattern` (a literal string when `literal`); a pattern ICU
  /// rejects is a TokenizerError naming `where`.
  Regex(const std::string &pattern, bool literal, const std::string &where);
  ~Regex();
  Regex(Regex &&) noexcept;

  /// The [begin, end) byte ranges of the successive non-empty matches.
  std::vector<std::pair<size_t, size_t>> findAll(std::string_view text) const;

private:
  struct Impl; // ICU's compiled pattern
  std::unique_ptr<Impl> impl_;
};

} // namespace dttok

#endif // DTTOK_REGEX_H
