//===- hf_models.cpp - tokenizer.json models: BPE and WordPiece -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// BPE starts from a word's characters (each byte as <0xXX> when the
// vocabulary lacks the character and byte_fallback is set, else the unknown
// token) and applies the merge of lowest rank, leftmost first, until none
// applies: what Hugging Face's priority queue computes. WordPiece takes the
// longest vocabulary entry from the left, continuations prefixed with "##",
// and makes the whole word unknown when any part is not in the vocabulary.
//
//===----------------------------------------------------------------------===//

#include "hf.h"
#include "unicode.h"

#include <fmt/format.h>

#include <climits>
#include <queue>

namespace dttok::hf {

namespace {

std::unordered_map<std::string, int32_t> readVocab(const json &j,
                                                   const std::string &where) {
  const json &v = member(j, "vocab", where);
  if (!v.is_object())
    throw TokenizerError(where + ".vocab is not an object of token: id");
  std::unordered_map<std::string, int32_t> vocab;
  for (auto it = v.begin(); it != v.end(); ++it)
    vocab[it.key()] = it.value().get<int32_t>();
  return vocab;
}

class Bpe final : public Model {
public:
  Bpe(const json &j, const std::string &where) {
    vocab_ = readVocab(j, where);
    if (j.contains("dropout") && !j["dropout"].is_null() &&
        j["dropout"].get<double>() != 0.0)
      unsupported(where + ".dropout", "BPE dropout (a random encoding)");
    prefix_ = stringOr(j, "continuing_subword_prefix", "");
    suffix_ = stringOr(j, "end_of_word_suffix", "");
    fuseUnk_ = boolOr(j, "fuse_unk", false);
    byteFallback_ = boolOr(j, "byte_fallback", false);
    ignoreMerges_ = boolOr(j, "ignore_merges", false);
    std::string unk = stringOr(j, "unk_token", "");
    if (!unk.empty()) {
      auto it = vocab_.find(unk);
      if (it == vocab_.end())
        throw TokenizerError(where + ".unk_token \"" + unk +
                             "\" is not in the vocabulary");
      unk_ = it->second;
    }
    const json &merges = member(j, "merges", where);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const json &m = merges[rank];
      std::string a, b;
      if (m.is_string()) {
        std::string s = m.get<std::string>();
        size_t space = s.find(' ');
        if (space == std::string::npos ||
            s.find(' ', space + 1) != std::string::npos)
          throw TokenizerError(fmt::format(
              "{}.merges[{}] \"{}\" is not two tokens", where, rank, s));
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        throw TokenizerError(
            fmt::format("{}.merges[{}] is not a pair", where, rank));
      }
      std::string merged = a + (b.compare(0, prefix_.size(), prefix_) == 0
                                    ? b.substr(prefix_.size())
                                    : b);
      auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(merged);
      if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end())
        throw TokenizerError(fmt::format(
            "{}.merges[{}] (\"{}\" \"{}\") names a token the vocabulary "
            "lacks",
            where, rank, a, b));
      merges_.emplace(pairKey(ia->second, ib->second),
                      Merge{int32_t(rank), im->second});
    }
  }

  void tokenize(const std::string &word,
                std::vector<int32_t> &out) const override {
    if (ignoreMerges_) {
      auto it = vocab_.find(word);
      if (it != vocab_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    auto cached = cache_.find(word);
    if (cached != cache_.end()) {
      out.insert(out.end(), cached->second.begin(), cached->second.end());
      return;
    }
    std::vector<int32_t> symbols = merge(initialSymbols(word));
    out.insert(out.end(), symbols.begin(), symbols.end());
    if (cache_.size() < kCacheWords && word.size() <= kCacheWordBytes)
      cache_.emplace(word, std::move(symbols));
  }

private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pairKey(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  static constexpr size_t kCacheWords = 1 << 18;
  static constexpr size_t kCacheWordBytes = 256;

  /// Applies the merges to `symbols`: the lowest rank first, the leftmost
  /// among equal ranks. A linked list and a heap of candidate pairs keep a
  /// long word (a whole text when there is no pre-tokenizer, as LLaMA 2's
  /// tokenizer.json has none) O(n log n).
  std::vector<int32_t> merge(std::vector<int32_t> symbols) const {
    size_t n = symbols.size();
    if (n < 2)
      return symbols;
    std::vector<int64_t> prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
      prev[i] = int64_t(i) - 1;
      next[i] = i + 1 < n ? int64_t(i) + 1 : -1;
    }
    struct Candidate {
      int32_t rank;
      int64_t left;
      int32_t leftId, rightId, merged;
      bool operator>(const Candidate &o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>,
                        std::greater<Candidate>>
        heap;
    auto consider = [&](int64_t left) {
      if (left < 0 || next[size_t(left)] < 0)
        return;
      int32_t a = symbols[size_t(left)],
              b = symbols[size_t(next[size_t(left)])];
      auto it = merges_.find(pairKey(a, b));
      if (it != merges_.end())
        heap.push({it->second.rank, left, a, b, it->second.id});
    };
    for (size_t i = 0; i + 1 < n; ++i)
      consider(int64_t(i));
    std::vector<bool> alive(n, true);
    while (!heap.empty()) {
      Candidate c = heap.top();
      heap.pop();
      size_t l = size_t(c.left);
      int64_t r = next[l];
      // Stale: a symbol of the pair has changed since it was pushed.
      if (!alive[l] || r < 0 || symbols[l] != c.leftId ||
          symbols[size_t(r)] != c.rightId)
        continue;
      symbols[l] = c.merged;
      alive[size_t(r)] = false;
      next[l] = next[size_t(r)];
      if (next[l] >= 0)
        prev[size_t(next[l])] = int64_t(l);
      consider(prev[l]);
      consider(int64_t(l));
    }
    std::vector<int32_t> out;
    for (int64_t i = 0; i >= 0; i = next[size_t(i)])
      out.push_back(symbols[size_t(i)]);
    return out;
  }

  std::vector<int32_t> initialSymbols(const std::string &word) const {
    std::vector<int32_t> symbols;
    std::vector<char32_t> chars = unicode::decode(word);
    bool previousUnk = false;
    for (size_t i = 0; i < chars.size(); ++i) {
      std::string c;
      unicode::append(c, chars[i]);
      std::string s =
          (i > 0 ? prefix_ : "") + c + (i + 1 == chars.size() ? suffix_ : "");
      auto it = vocab_.find(s);
      if (it != vocab_.end()) {
        symbols.push_back(it->second);
        previousUnk = false;
        continue;
      }
      if (byteFallback_) {
        std::vector<int32_t> bytes;
        for (unsigned char b : c) {
          auto bt = vocab_.find(fmt::format("<0x{:02X}>", b));
          if (bt == vocab_.end())
            break;
          bytes.push_back(bt->second);
        }
        if (bytes.size() == c.size()) {
          symbols.insert(symbols.end(), bytes.begin(), bytes.end());
          previousUnk = false;
          continue;
        }
      }
      // Unknown: the unknown token (once for a run when fuse_unk), or
      // nothing when the model has none, as Hugging Face drops it.
      if (unk_ >= 0 && !(fuseUnk_ && previousUnk))
        symbols.push_back(unk_);
      previousUnk = unk_ >= 0;
    }
    return symbols;
  }

  std::string prefix_, suffix_;
  bool fuseUnk_ = false, byteFallback_ = false, ignoreMerges_ = false;
  int32_t unk_ = -1;
  std::unordered_map<uint64_t, Merge> merges_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

class WordPiece final : public Model {
public:
  WordPiece(const json &j, const std::string &where) {
    vocab_ = readVocab(j, where);
    prefix_ = stringOr(j, "continuing_subword_prefix", "##");
    maxChars_ = j.contains("max_input_chars_per_word")
                    ? j["max_input_chars_per_word"].get<int64_t>()
                    : 100;
    std::string unk = stringOr(j, "unk_token", "[UNK]");
    auto it = vocab_.find(unk);
    if (it == vocab_.end())
      throw TokenizerError(where + ".unk_token \"" + unk +
                           "\" is not in the vocabulary");
    unk_ = it->second;
  }

  void tokenize(const std::string &word,
                std::vector<int32_t> &out) const override {
    std::vector<char32_t> chars = unicode::decode(word);
    if (int64_t(chars.size()) > maxChars_) {
      out.push_back(unk_);
      return;
    }
    // Byte offset of each character boundary.
    std::vector<size_t> at{0};
    for (char32_t c : chars) {
      std::string enc;
      unicode::append(enc, c);
      at.push_back(at.back() + enc.size());
    }
    std::vector<int32_t> pieces;
    size_t start = 0;
    while (start < chars.size()) {
      int32_t found = -1;
      size_t end = chars.size();
      for (; end > start; --end) {
        std::string sub = (start > 0 ? prefix_ : "") +
                          word.substr(at[start], at[end] - at[start]);
        auto it = vocab_.find(sub);
        if (it != vocab_.end()) {
          found = it->second;
          break;
        }
      }
      if (found < 0) {
        out.push_back(unk_);
        return;
      }
      pieces.push_back(found);
      start = end;
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }

private:
  std::string prefix_;
  int64_t maxChars_ = 100;
  int32_t unk_ = -1;
};

} // namespace

std::unique_ptr<Model> makeModel(const json &j, const std::string &where) {
  std::string type = stringOr(j, "type", "");
  // Old files omit the type of a BPE model.
  if (type == "BPE" || (type.empty() && j.contains("merges")))
    return std::make_unique<Bpe>(j, where);
  if (type == "WordPiece")
    return std::make_unique<WordPiece>(j, where);
  unsupported(where, "the model \"" + type + "\"");
}

} // namespace dttok::hf
