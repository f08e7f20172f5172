//===- hf_tokenizer.cpp - A Hugging Face tokenizer.json -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The pipeline around the components (hf.h): added tokens are found first,
// leftmost and then longest, in the raw text (and, for those marked
// `normalized`, again in the normalized text), so that "<|endoftext|>" in a
// text is one id; the text between them goes through the normalizer, the
// pre-tokenizer and the model. The post-processor's template (Template-,
// Bert- or no processing) is applied only to classification examples:
// next-token shards are plain token streams with a document separator.
//
//===----------------------------------------------------------------------===//

#include "hf.h"
#include "unicode.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace dttok::hf {

const json &member(const json &j, const char *key, const std::string &where) {
  if (!j.is_object() || !j.contains(key))
    throw TokenizerError(where + " has no \"" + key + "\"");
  return j[key];
}

std::string stringOr(const json &j, const char *key, std::string fallback) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null())
    return fallback;
  return j[key].get<std::string>();
}

bool boolOr(const json &j, const char *key, bool fallback) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null())
    return fallback;
  return j[key].get<bool>();
}

void unsupported(const std::string &where, const std::string &what) {
  throw TokenizerError(where + " uses " + what +
                       ", which dt-tokenize does not implement");
}

namespace {

struct AddedToken {
  int32_t id;
  std::string content;
  bool singleWord, lstrip, rstrip, normalized;
};

/// One item of a template: a special token's ids, or sequence 0 (A) or 1 (B).
struct TemplateItem {
  std::vector<int32_t> specialIds; // empty: a sequence
  int sequence = 0;
  int32_t typeId = 0;
};
using Template = std::vector<TemplateItem>;

bool isWordChar(char32_t c) { return c == U'_' || unicode::isAlphanumeric(c); }

class HfTokenizer final : public Tokenizer {
public:
  HfTokenizer(const json &j, std::string path) : path_(std::move(path)) {
    model_ = makeModel(member(j, "model", "tokenizer.json"), "model");
    normalizer_ = makeNormalizer(j.value("normalizer", json()), "normalizer");
    preTokenizer_ =
        makePreTokenizer(j.value("pre_tokenizer", json()), "pre_tokenizer");
    for (auto &[token, id] : model_->vocab())
      vocabSize_ = std::max<int64_t>(vocabSize_, int64_t(id) + 1);
    if (j.contains("added_tokens"))
      for (const json &t : j["added_tokens"]) {
        AddedToken a{
            t.at("id").get<int32_t>(),     t.at("content").get<std::string>(),
            t.value("single_word", false), t.value("lstrip", false),
            t.value("rstrip", false),      t.value("normalized", false)};
        if (a.content.empty())
          continue;
        startsAdded_[uint8_t(a.content[0])] = true;
        added_.push_back(a);
        vocabSize_ = std::max<int64_t>(vocabSize_, int64_t(a.id) + 1);
      }
    readPostProcessor(j.value("post_processor", json()), "post_processor");
  }

  std::string describe() const override {
    return fmt::format("{} (tokenizer.json, {}, {} ids)", path_, modelKind(),
                       vocabSize_);
  }
  int64_t vocabSize() const override { return vocabSize_; }

  std::optional<int32_t> tokenId(std::string_view token) const override {
    for (const AddedToken &a : added_)
      if (a.content == token)
        return a.id;
    auto it = model_->vocab().find(std::string(token));
    if (it != model_->vocab().end())
      return it->second;
    return std::nullopt;
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    // Added tokens that match the raw text.
    splitAdded(std::string(text), /*normalizedPass=*/false, /*first=*/true,
               ids);
    return ids;
  }

  Encoding encodeExample(std::string_view a, std::optional<std::string_view> b,
                         int64_t maxLength) const override {
    const Template &t = b ? pair_ : single_;
    int64_t specials = 0;
    for (const TemplateItem &item : t)
      specials += int64_t(item.specialIds.size());
    if (maxLength < specials + 1)
      throw TokenizerError(fmt::format(
          "a maximum length of {} leaves no room for text after the {} "
          "special tokens the template adds",
          maxLength, specials));
    std::vector<int32_t> seq[2] = {encode(a),
                                   b ? encode(*b) : std::vector<int32_t>()};
    truncateLongestFirst(seq[0], seq[1], maxLength - specials);
    Encoding e;
    for (const TemplateItem &item : t) {
      const std::vector<int32_t> &ids =
          item.specialIds.empty() ? seq[item.sequence] : item.specialIds;
      e.ids.insert(e.ids.end(), ids.begin(), ids.end());
      e.typeIds.insert(e.typeIds.end(), ids.size(), item.typeId);
    }
    return e;
  }

  std::optional<int32_t> documentStart() const override {
    if (!single_.empty() && !single_.front().specialIds.empty())
      return single_.front().specialIds.front();
    return firstOf({"<|endoftext|>", "<|begin_of_text|>", "<s>", "<bos>"});
  }
  std::optional<int32_t> documentEnd() const override {
    return firstOf(
        {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "[SEP]"});
  }
  std::optional<int32_t> padId() const override {
    return firstOf({"[PAD]", "<pad>", "<|pad|>"});
  }
  int trailingSpecials() const override {
    int n = 0;
    for (auto it = single_.rbegin();
         it != single_.rend() && !it->specialIds.empty(); ++it)
      n += int(it->specialIds.size());
    return n;
  }

private:
  std::string modelKind() const {
    // What the vocabulary's shape says, for the banner.
    if (model_->vocab().count("##s"))
      return "WordPiece";
    return "BPE";
  }

  std::optional<int32_t>
  firstOf(std::initializer_list<const char *> names) const {
    for (const char *n : names)
      if (auto id = tokenId(n))
        return id;
    return std::nullopt;
  }

  /// Cuts the added tokens out of `text` and encodes the rest; the raw pass
  /// looks for the tokens not marked `normalized`, the normalized pass (on
  /// text the normalizer has seen) for the others.
  void splitAdded(const std::string &text, bool normalizedPass, bool first,
                  std::vector<int32_t> &ids) const {
    size_t at = 0, textStart = 0;
    while (at < text.size()) {
      const AddedToken *best = nullptr;
      if (startsAdded_[uint8_t(text[at])])
        for (const AddedToken &a : added_)
          if (a.normalized == normalizedPass &&
              text.compare(at, a.content.size(), a.content) == 0 &&
              (!best || a.content.size() > best->content.size()) &&
              (!a.singleWord || singleWordAt(text, at, a.content.size())))
            best = &a;
      if (!best) {
        ++at;
        continue;
      }
      size_t begin = at, end = at + best->content.size();
      if (best->lstrip)
        while (begin > textStart && text[begin - 1] == ' ')
          --begin;
      if (best->rstrip)
        while (end < text.size() && text[end] == ' ')
          ++end;
      encodeText(text.substr(textStart, begin - textStart), normalizedPass,
                 first && textStart == 0, ids);
      ids.push_back(best->id);
      at = textStart = end;
    }
    encodeText(text.substr(textStart), normalizedPass, first && textStart == 0,
               ids);
  }

  bool singleWordAt(const std::string &text, size_t at, size_t len) const {
    std::vector<char32_t> before = unicode::decode(text.substr(0, at));
    std::vector<char32_t> after = unicode::decode(text.substr(at + len, 4));
    return (before.empty() || !isWordChar(before.back())) &&
           (after.empty() || !isWordChar(after.front()));
  }

  void encodeText(const std::string &text, bool normalized, bool first,
                  std::vector<int32_t> &ids) const {
    if (text.empty())
      return;
    if (!normalized) {
      std::string n = normalizer_ ? normalizer_->normalize(text) : text;
      splitAdded(n, /*normalizedPass=*/true, first, ids);
      return;
    }
    std::vector<Piece> pieces{{text, first}};
    if (preTokenizer_)
      preTokenizer_->split(pieces);
    for (const Piece &p : pieces)
      if (!p.text.empty())
        model_->tokenize(p.text, ids);
  }

  std::vector<int32_t> specialIds(const json &specials, const std::string &id,
                                  const std::string &where) const {
    if (specials.contains(id) && specials[id].contains("ids"))
      return specials[id]["ids"].get<std::vector<int32_t>>();
    if (auto known = tokenId(id))
      return {*known};
    throw TokenizerError(where + " names the special token \"" + id +
                         "\", which the tokenizer lacks");
  }

  Template readTemplate(const json &items, const json &specials,
                        const std::string &where) const {
    Template t;
    for (size_t i = 0; i < items.size(); ++i) {
      std::string here = fmt::format("{}[{}]", where, i);
      const json &item = items[i];
      TemplateItem ti;
      if (item.contains("SpecialToken")) {
        const json &s = item["SpecialToken"];
        ti.specialIds =
            specialIds(specials, s.at("id").get<std::string>(), here);
        ti.typeId = s.value("type_id", 0);
      } else if (item.contains("Sequence")) {
        const json &s = item["Sequence"];
        ti.sequence = s.at("id").get<std::string>() == "B" ? 1 : 0;
        ti.typeId = s.value("type_id", 0);
      } else {
        throw TokenizerError(here + " is neither a SpecialToken nor a "
                                    "Sequence");
      }
      t.push_back(std::move(ti));
    }
    return t;
  }

  void readPostProcessor(const json &j, const std::string &where) {
    // Without a processor: the texts as they are, the second of type 1.
    single_ = {{{}, 0, 0}};
    pair_ = {{{}, 0, 0}, {{}, 1, 1}};
    if (j.is_null())
      return;
    std::string type = stringOr(j, "type", "");
    if (type == "ByteLevel")
      return; // Only trims offsets, which dt-tokenize does not report.
    if (type == "TemplateProcessing") {
      json specials = j.value("special_tokens", json::object());
      single_ =
          readTemplate(member(j, "single", where), specials, where + ".single");
      pair_ = readTemplate(member(j, "pair", where), specials, where + ".pair");
      return;
    }
    if (type == "BertProcessing") {
      int32_t cls = member(j, "cls", where).at(1).get<int32_t>();
      int32_t sep = member(j, "sep", where).at(1).get<int32_t>();
      single_ = {{{cls}, 0, 0}, {{}, 0, 0}, {{sep}, 0, 0}};
      pair_ = {
          {{cls}, 0, 0}, {{}, 0, 0}, {{sep}, 0, 0}, {{}, 1, 1}, {{sep}, 0, 1}};
      return;
    }
    if (type == "Sequence") {
      const json &list = member(j, "processors", where);
      for (size_t i = 0; i < list.size(); ++i) {
        std::string t = stringOr(list[i], "type", "");
        if (t != "ByteLevel")
          readPostProcessor(list[i],
                            fmt::format("{}.processors[{}]", where, i));
      }
      return;
    }
    unsupported(where, "the post-processor \"" + type + "\"");
  }

  std::string path_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> preTokenizer_;
  std::vector<AddedToken> added_;
  /// The first bytes of added tokens, to skip the search elsewhere.
  bool startsAdded_[256] = {};
  int64_t vocabSize_ = 0;
  Template single_, pair_;
};

} // namespace

} // namespace dttok::hf

namespace dttok {

std::unique_ptr<Tokenizer> openHfTokenizer(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw TokenizerError("cannot open the tokenizer '" + path + "'");
  hf::json j;
  try {
    j = hf::json::parse(in);
  } catch (const hf::json::exception &e) {
    throw TokenizerError("the tokenizer '" + path +
                         "' is not JSON: " + e.what());
  }
  try {
    return std::make_unique<hf::HfTokenizer>(j, path);
  } catch (const hf::json::exception &e) {
    throw TokenizerError(
        "the tokenizer '" + path +
        "' is not a tokenizer.json dt-tokenize reads: " + e.what());
  } catch (const TokenizerError &e) {
    throw TokenizerError("the tokenizer '" + path + "': " + e.what());
  }
}

} // namespace dttok
