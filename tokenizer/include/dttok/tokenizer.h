//===- dttok/tokenizer.h - Text to token ids --------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What dt-tokenize encodes with: a SentencePiece model (`tokenizer.model`,
// through Debian's libsentencepiece) or a Hugging Face `tokenizer.json`
// (byte-level BPE as GPT-2 and LLaMA 3 use, SentencePiece-style BPE with byte
// fallback as LLaMA 2 uses, WordPiece as BERT uses), implemented here from
// the file's normalizer, pre-tokenizer, model and post-processor. A component
// this library does not implement is an error when the file is opened, never
// a silently different encoding.
//
//===----------------------------------------------------------------------===//

#ifndef DTTOK_TOKENIZER_H
#define DTTOK_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dttok {

/// A tokenizer file that cannot be used, or text that cannot be encoded;
/// what() is the message for the user.
class TokenizerError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One example as a model takes it.
struct Encoding {
  std::vector<int32_t> ids;
  /// The segment of each id (0 for the first text, 1 for the second).
  std::vector<int32_t> typeIds;
};

class Tokenizer {
public:
  virtual ~Tokenizer() = default;

  /// One line for the user: the kind, the file and the vocabulary size.
  virtual std::string describe() const = 0;
  /// Number of ids (the largest id + 1).
  virtual int64_t vocabSize() const = 0;
  /// The id of the token spelled `token`, if the vocabulary has it.
  virtual std::optional<int32_t> tokenId(std::string_view token) const = 0;

  /// The ids of `text` with no special token added (special tokens written
  /// in the text, such as "<|endoftext|>", are recognised as Hugging Face
  /// tokenizers recognise them).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;

  /// `a` (and `b`) as a model takes them: the tokenizer's template applied
  /// ([CLS] a [SEP] b [SEP] for BERT, <s> a for LLaMA), after truncating the
  /// texts, the longest first, so that at most `maxLength` ids remain.
  virtual Encoding encodeExample(std::string_view a,
                                 std::optional<std::string_view> b,
                                 int64_t maxLength) const = 0;

  /// The token that starts each document in a next-token shard: the
  /// template's leading special token, else the first of GPT-2's
  /// <|endoftext|>, LLaMA 3's <|begin_of_text|>, <s> the vocabulary has.
  virtual std::optional<int32_t> documentStart() const = 0;
  /// The token that ends a response in instruction data (</s>,
  /// <|endoftext|>, <|end_of_text|>, [SEP]), if the vocabulary has one.
  virtual std::optional<int32_t> documentEnd() const = 0;
  /// The padding token ([PAD], <pad>), if the vocabulary has one.
  virtual std::optional<int32_t> padId() const = 0;
  /// Special tokens the template puts after the last text of a single
  /// example (1 for BERT's [SEP], 0 for LLaMA): what a reader that truncates
  /// an example further keeps at its end.
  virtual int trailingSpecials() const = 0;
};

/// Truncates `a` and `b` to at most `budget` ids together, one id at a time
/// from the longer (`b` on a tie), as transformers' longest_first truncation
/// does.
void truncateLongestFirst(std::vector<int32_t> &a, std::vector<int32_t> &b,
                          int64_t budget);

/// Opens `path`: a `tokenizer.json`, a SentencePiece `.model`, or a
/// directory holding either (tokenizer.json first, as `transformers`' fast
/// tokenizers prefer it). Throws TokenizerError with a message that names
/// the file and what is wrong.
std::unique_ptr<Tokenizer> openTokenizer(const std::string &path);

/// Opens a Hugging Face tokenizer.json.
std::unique_ptr<Tokenizer> openHfTokenizer(const std::string &path);
/// Opens a SentencePiece model.
std::unique_ptr<Tokenizer> openSentencePiece(const std::string &path);

} // namespace dttok

#endif // DTTOK_TOKENIZER_H
