//===- hf.h - The components of a Hugging Face tokenizer.json ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A tokenizer.json is a pipeline: added tokens are cut out of the text, each
// remaining part is normalized, split into words by the pre-tokenizer, and
// each word becomes ids through the model; the post-processor adds the
// template's special tokens. Each stage is a small class built from its JSON
// object by a make* function that rejects any type or option it does not
// implement (TokenizerError naming the JSON path).
//
//===----------------------------------------------------------------------===//

#ifndef DTTOK_HF_H
#define DTTOK_HF_H

#include "dttok/tokenizer.h"
#include "regex.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace dttok::hf {

using json = nlohmann::json;

/// A piece of text between the pipeline's stages. `first` marks the piece
/// that starts the whole text (Metaspace's prepend_scheme "first").
struct Piece {
  std::string text;
  bool first = false;
};

class Normalizer {
public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  /// Replaces `pieces` by their finer split.
  virtual void split(std::vector<Piece> &pieces) const = 0;
};

class Model {
public:
  virtual ~Model() = default;
  /// Appends the ids of one pre-tokenized word.
  virtual void tokenize(const std::string &word,
                        std::vector<int32_t> &out) const = 0;
  const std::unordered_map<std::string, int32_t> &vocab() const {
    return vocab_;
  }

protected:
  std::unordered_map<std::string, int32_t> vocab_;
};

/// `where` is the JSON path of `j` (for messages). A null object gives null.
std::unique_ptr<Normalizer> makeNormalizer(const json &j,
                                           const std::string &where);
std::unique_ptr<PreTokenizer> makePreTokenizer(const json &j,
                                               const std::string &where);
std::unique_ptr<Model> makeModel(const json &j, const std::string &where);

/// A pattern object, {"String": literal} or {"Regex": pattern}.
Regex makePattern(const json &j, const std::string &where);

/// A member of `j` that must be there, or TokenizerError.
const json &member(const json &j, const char *key, const std::string &where);
/// A string member, or `fallback` when absent or null.
std::string stringOr(const json &j, const char *key, std::string fallback);
/// A boolean member, or `fallback` when absent or null.
bool boolOr(const json &j, const char *key, bool fallback);
/// TokenizerError: `where` uses `what`, which dt-tokenize does not implement.
[[noreturn]] void unsupported(const std::string &where,
                              const std::string &what);

} // namespace dttok::hf

#endif // DTTOK_HF_H
