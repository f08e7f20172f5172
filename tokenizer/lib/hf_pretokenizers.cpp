//===- hf_pretokenizers.cpp - tokenizer.json pre-tokenizers ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A pre-tokenizer splits each piece of text into the words the model
// encodes one by one. Every splitter here reduces to one operation: find the
// delimiters (pattern matches or characters of a class), then keep, drop or
// attach them to a neighbour as the JSON's `behavior` says, exactly as
// Hugging Face's SplitDelimiterBehavior does.
//
//===----------------------------------------------------------------------===//

#include "hf.h"
#include "regex.h"
#include "unicode.h"

#include <array>
#include <functional>

namespace dttok::hf {

namespace {

enum class Behavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

Behavior parseBehavior(const json &j, const std::string &where,
                       Behavior fallback) {
  if (!j.contains("behavior") || j["behavior"].is_null())
    return fallback;
  std::string b = j["behavior"].get<std::string>();
  if (b == "Removed")
    return Behavior::Removed;
  if (b == "Isolated")
    return Behavior::Isolated;
  if (b == "MergedWithPrevious")
    return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext")
    return Behavior::MergedWithNext;
  if (b == "Contiguous")
    return Behavior::Contiguous;
  unsupported(where + ".behavior", "\"" + b + "\"");
}

using Ranges = std::vector<std::pair<size_t, size_t>>;

/// Splits `piece` at the delimiters `matches` (sorted, disjoint byte ranges).
void splitPiece(const Piece &piece, const Ranges &matches, Behavior behavior,
                bool invert, std::vector<Piece> &out) {
  const std::string &t = piece.text;
  // The whole text as segments, each a delimiter or not.
  struct Segment {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Segment> segs;
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (b > last)
      segs.push_back({last, b, invert});
    segs.push_back({b, e, !invert});
    last = e;
  }
  if (last < t.size())
    segs.push_back({last, t.size(), invert});

  std::vector<Segment> kept;
  switch (behavior) {
  case Behavior::Removed:
    for (const Segment &s : segs)
      if (!s.delimiter)
        kept.push_back(s);
    break;
  case Behavior::Isolated:
    kept = segs;
    break;
  case Behavior::Contiguous:
    for (const Segment &s : segs)
      if (!kept.empty() && kept.back().delimiter && s.delimiter)
        kept.back().end = s.end;
      else
        kept.push_back(s);
    break;
  case Behavior::MergedWithPrevious: {
    bool previousDelimiter = false;
    for (const Segment &s : segs) {
      if (s.delimiter && !previousDelimiter && !kept.empty())
        kept.back().end = s.end;
      else
        kept.push_back({s.begin, s.end, false});
      previousDelimiter = s.delimiter;
    }
    break;
  }
  case Behavior::MergedWithNext: {
    bool nextDelimiter = false;
    for (size_t i = segs.size(); i-- > 0;) {
      const Segment &s = segs[i];
      if (s.delimiter && !nextDelimiter && !kept.empty())
        kept.back().begin = s.begin;
      else
        kept.push_back({s.begin, s.end, false});
      nextDelimiter = s.delimiter;
    }
    std::reverse(kept.begin(), kept.end());
    break;
  }
  }
  for (const Segment &s : kept)
    if (s.end > s.begin)
      out.push_back(
          {t.substr(s.begin, s.end - s.begin), piece.first && s.begin == 0});
}

/// The byte range of every character of `text` that `pred` accepts.
Ranges charMatches(const std::string &text,
                   const std::function<bool(char32_t)> &pred) {
  Ranges out;
  size_t at = 0;
  for (char32_t c : unicode::decode(text)) {
    std::string enc;
    unicode::append(enc, c);
    if (pred(c))
      out.emplace_back(at, at + enc.size());
    at += enc.size();
  }
  return out;
}

void splitAll(std::vector<Piece> &pieces,
              const std::function<Ranges(const std::string &)> &find,
              Behavior behavior, bool invert = false) {
  std::vector<Piece> out;
  for (const Piece &p : pieces)
    splitPiece(p, find(p.text), behavior, invert, out);
  pieces = std::move(out);
}

bool isBertPunctuation(char32_t c) {
  return (c < 0x80 && std::ispunct(int(c))) || unicode::isPunctuation(c);
}

/// GPT-2's byte-to-character table: printable bytes stand for themselves,
/// the others for U+0100 onwards, so every byte string is printable text.
const std::array<std::string, 256> &byteChars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      unicode::append(t[size_t(b)],
                      printable ? char32_t(b) : char32_t(256 + next++));
    }
    return t;
  }();
  return table;
}

const char *const kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

class ByteLevel final : public PreTokenizer {
public:
  ByteLevel(const json &j, const std::string &where)
      : addPrefixSpace_(boolOr(j, "add_prefix_space", true)) {
    if (boolOr(j, "use_regex", true))
      regex_ = std::make_unique<Regex>(kGpt2Pattern, false, where);
  }
  void split(std::vector<Piece> &pieces) const override {
    if (addPrefixSpace_)
      for (Piece &p : pieces)
        if (p.text.empty() || p.text[0] != ' ')
          p.text.insert(0, 1, ' ');
    if (regex_)
      splitAll(
          pieces, [&](const std::string &t) { return regex_->findAll(t); },
          Behavior::Isolated);
    const auto &table = byteChars();
    for (Piece &p : pieces) {
      std::string mapped;
      for (unsigned char b : p.text)
        mapped += table[b];
      p.text = std::move(mapped);
    }
  }

private:
  bool addPrefixSpace_;
  std::unique_ptr<Regex> regex_;
};

class Split final : public PreTokenizer {
public:
  Split(const json &j, const std::string &where)
      : pattern_(makePattern(member(j, "pattern", where), where + ".pattern")),
        behavior_(parseBehavior(j, where, Behavior::Isolated)),
        invert_(boolOr(j, "invert", false)) {}
  void split(std::vector<Piece> &pieces) const override {
    splitAll(
        pieces, [&](const std::string &t) { return pattern_.findAll(t); },
        behavior_, invert_);
  }

private:
  Regex pattern_;
  Behavior behavior_;
  bool invert_;
};

class Whitespace final : public PreTokenizer {
public:
  explicit Whitespace(const std::string &where)
      : words_("\\w+|[^\\w\\s]+", false, where) {}
  void split(std::vector<Piece> &pieces) const override {
    // The words are what stays: the matches, with the gaps removed.
    splitAll(
        pieces, [&](const std::string &t) { return words_.findAll(t); },
        Behavior::Removed, /*invert=*/true);
  }

private:
  Regex words_;
};

class WhitespaceSplit final : public PreTokenizer {
public:
  void split(std::vector<Piece> &pieces) const override {
    splitAll(
        pieces,
        [](const std::string &t) {
          return charMatches(t, unicode::isWhitespace);
        },
        Behavior::Removed);
  }
};

class Punctuation final : public PreTokenizer {
public:
  explicit Punctuation(Behavior behavior) : behavior_(behavior) {}
  void split(std::vector<Piece> &pieces) const override {
    splitAll(
        pieces,
        [](const std::string &t) { return charMatches(t, isBertPunctuation); },
        behavior_);
  }

private:
  Behavior behavior_;
};

class Digits final : public PreTokenizer {
public:
  explicit Digits(bool individual) : individual_(individual) {}
  void split(std::vector<Piece> &pieces) const override {
    splitAll(
        pieces,
        [](const std::string &t) { return charMatches(t, unicode::isDigit); },
        individual_ ? Behavior::Isolated : Behavior::Contiguous);
  }

private:
  bool individual_;
};

class Metaspace final : public PreTokenizer {
public:
  Metaspace(const json &j, const std::string &where)
      : replacement_(stringOr(j, "replacement", "\u2581")),
        split_(boolOr(j, "split", true)) {
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      scheme_ = j["prepend_scheme"].get<std::string>();
      if (scheme_ != "always" && scheme_ != "first" && scheme_ != "never")
        unsupported(where + ".prepend_scheme", "\"" + scheme_ + "\"");
    } else {
      scheme_ = boolOr(j, "add_prefix_space", true) ? "always" : "never";
    }
  }
  void split(std::vector<Piece> &pieces) const override {
    for (Piece &p : pieces) {
      std::string replaced;
      for (char c : p.text)
        if (c == ' ')
          replaced += replacement_;
        else
          replaced += c;
      bool starts = replaced.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == "always" || (scheme_ == "first" && p.first)))
        replaced.insert(0, replacement_);
      p.text = std::move(replaced);
    }
    if (split_)
      splitAll(
          pieces,
          [&](const std::string &t) {
            Ranges r;
            for (size_t at = t.find(replacement_); at != std::string::npos;
                 at = t.find(replacement_, at + replacement_.size()))
              r.emplace_back(at, at + replacement_.size());
            return r;
          },
          Behavior::MergedWithNext);
  }

private:
  std::string replacement_, scheme_;
  bool split_;
};

class Sequence final : public PreTokenizer {
public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(std::vector<Piece> &pieces) const override {
    for (const auto &p : parts_)
      p->split(pieces);
  }

private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

} // namespace

std::unique_ptr<PreTokenizer> makePreTokenizer(const json &j,
                                               const std::string &where) {
  if (j.is_null())
    return nullptr;
  std::string type = stringOr(j, "type", "");
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(j, where);
  if (type == "Split")
    return std::make_unique<Split>(j, where);
  if (type == "BertPreTokenizer") {
    // Whitespace goes, then each punctuation character stands alone.
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(std::make_unique<WhitespaceSplit>());
    parts.push_back(std::make_unique<Punctuation>(Behavior::Isolated));
    return std::make_unique<Sequence>(std::move(parts));
  }
  if (type == "Whitespace")
    return std::make_unique<Whitespace>(where);
  if (type == "WhitespaceSplit")
    return std::make_unique<WhitespaceSplit>();
  if (type == "Punctuation")
    return std::make_unique<Punctuation>(
        parseBehavior(j, where, Behavior::Isolated));
  if (type == "Digits")
    return std::make_unique<Digits>(boolOr(j, "individual_digits", false));
  if (type == "Metaspace")
    return std::make_unique<Metaspace>(j, where);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    const json &list = member(j, "pretokenizers", where);
    for (size_t i = 0; i < list.size(); ++i)
      if (auto p = makePreTokenizer(list[i], where + ".pretokenizers[" +
                                                 std::to_string(i) + "]"))
        parts.push_back(std::move(p));
    return std::make_unique<Sequence>(std::move(parts));
  }
  unsupported(where, "the pre-tokenizer \"" + type + "\"");
}

} // namespace dttok::hf
