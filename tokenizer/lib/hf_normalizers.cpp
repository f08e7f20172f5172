//===- hf_normalizers.cpp - tokenizer.json normalizers --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each normalizer rewrites the text before it is split into words. BERT's
// clean-up follows Hugging Face's normalizers/bert.rs: NUL, U+FFFD and the
// "other" categories (but tab, newline, carriage return) go, then every
// whitespace becomes a space, CJK ideographs get spaces around them, accents
// are stripped after an NFD decomposition (by default exactly when
// lower-casing), and each character is lower-cased on its own.
//
//===----------------------------------------------------------------------===//

#include "hf.h"
#include "regex.h"
#include "unicode.h"

namespace dttok::hf {

namespace {

bool isChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string stripAccents(const std::string &text) {
  std::vector<char32_t> kept;
  for (char32_t c : unicode::decode(unicode::normalize(text, "NFD")))
    if (!unicode::isNonspacingMark(c))
      kept.push_back(c);
  return unicode::encode(kept);
}

class BertNormalizer final : public Normalizer {
public:
  BertNormalizer(const json &j)
      : cleanText_(boolOr(j, "clean_text", true)),
        chinese_(boolOr(j, "handle_chinese_chars", true)),
        lowercase_(boolOr(j, "lowercase", true)) {
    const json *strip =
        j.contains("strip_accents") ? &j["strip_accents"] : nullptr;
    stripAccents_ =
        strip && strip->is_boolean() ? strip->get<bool>() : lowercase_;
  }

  std::string normalize(std::string text) const override {
    if (cleanText_ || chinese_) {
      std::vector<char32_t> out;
      for (char32_t c : unicode::decode(text)) {
        if (cleanText_) {
          // Dropping comes first: a control character that is also
          // whitespace (form feed, U+0085) goes rather than becoming a space.
          bool tnr = c == U'\t' || c == U'\n' || c == U'\r';
          if (c == 0 || c == 0xFFFD || (!tnr && unicode::isOther(c)))
            continue;
          if (tnr || unicode::isWhitespace(c)) {
            out.push_back(U' ');
            continue;
          }
        }
        if (chinese_ && isChineseChar(c)) {
          out.insert(out.end(), {U' ', c, U' '});
          continue;
        }
        out.push_back(c);
      }
      text = unicode::encode(out);
    }
    if (stripAccents_)
      text = stripAccents(text);
    if (lowercase_)
      text = unicode::lowercase(text);
    return text;
  }

private:
  bool cleanText_, chinese_, lowercase_, stripAccents_;
};

class Lowercase final : public Normalizer {
public:
  std::string normalize(std::string text) const override {
    return unicode::lowercase(text);
  }
};

class StripAccents final : public Normalizer {
public:
  std::string normalize(std::string text) const override {
    return stripAccents(text);
  }
};

class Nf final : public Normalizer {
public:
  explicit Nf(std::string form) : form_(std::move(form)) {}
  std::string normalize(std::string text) const override {
    return unicode::normalize(text, form_);
  }

private:
  std::string form_;
};

class Strip final : public Normalizer {
public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    std::vector<char32_t> cs = unicode::decode(text);
    size_t b = 0, e = cs.size();
    while (left_ && b < e && unicode::isWhitespace(cs[b]))
      ++b;
    while (right_ && e > b && unicode::isWhitespace(cs[e - 1]))
      --e;
    return unicode::encode({cs.begin() + long(b), cs.begin() + long(e)});
  }

private:
  bool left_, right_;
};

class Replace final : public Normalizer {
public:
  Replace(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    std::string out;
    size_t last = 0;
    for (auto [b, e] : pattern_.findAll(text)) {
      out.append(text, last, b - last);
      out += content_;
      last = e;
    }
    out.append(text, last, std::string::npos);
    return out;
  }

private:
  Regex pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

private:
  std::string prefix_;
};

class Sequence final : public Normalizer {
public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string normalize(std::string text) const override {
    for (const auto &p : parts_)
      text = p->normalize(std::move(text));
    return text;
  }

private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

} // namespace

/// A pattern object {"String": s} or {"Regex": r}.
Regex makePattern(const json &j, const std::string &where) {
  if (j.is_object() && j.contains("String") && j["String"].is_string())
    return Regex(j["String"].get<std::string>(), /*literal=*/true, where);
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string())
    return Regex(j["Regex"].get<std::string>(), /*literal=*/false, where);
  throw TokenizerError(where + " is neither {\"String\": ...} nor "
                               "{\"Regex\": ...}");
}

std::unique_ptr<Normalizer> makeNormalizer(const json &j,
                                           const std::string &where) {
  if (j.is_null())
    return nullptr;
  std::string type = stringOr(j, "type", "");
  if (type == "BertNormalizer")
    return std::make_unique<BertNormalizer>(j);
  if (type == "Lowercase")
    return std::make_unique<Lowercase>();
  if (type == "StripAccents")
    return std::make_unique<StripAccents>();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<Nf>(type);
  if (type == "Strip")
    return std::make_unique<Strip>(boolOr(j, "strip_left", true),
                                   boolOr(j, "strip_right", true));
  if (type == "Replace")
    return std::make_unique<Replace>(
        makePattern(member(j, "pattern", where), where + ".pattern"),
        member(j, "content", where).get<std::string>());
  if (type == "Prepend")
    return std::make_unique<Prepend>(
        member(j, "prepend", where).get<std::string>());
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    const json &list = member(j, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i)
      if (auto n = makeNormalizer(list[i], where + ".normalizers[" +
                                               std::to_string(i) + "]"))
        parts.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(parts));
  }
  unsupported(where, "the normalizer \"" + type + "\"");
}

} // namespace dttok::hf
