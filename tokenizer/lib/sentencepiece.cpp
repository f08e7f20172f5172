//===- sentencepiece.cpp - A SentencePiece model ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A `tokenizer.model` (LLaMA 1/2, Mistral, T5) encoded by Debian's
// libsentencepiece itself. An example is <s> text as LLaMA's tokenizer
// builds it (a pair: <s> a <s> b), and documents in a shard start with <s>.
//
//===----------------------------------------------------------------------===//

#include "dttok/tokenizer.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

namespace dttok {

namespace {

class SentencePiece final : public Tokenizer {
public:
  explicit SentencePiece(std::string path) : path_(std::move(path)) {
    auto status = sp_.Load(path_);
    if (!status.ok())
      throw TokenizerError("the tokenizer '" + path_ +
                           "' is not a SentencePiece model (a file not "
                           "named *.json is read as one): " +
                           status.ToString());
  }

  std::string describe() const override {
    return fmt::format("{} (SentencePiece, {} ids)", path_, vocabSize());
  }
  int64_t vocabSize() const override { return sp_.GetPieceSize(); }

  std::optional<int32_t> tokenId(std::string_view token) const override {
    int id = sp_.PieceToId(std::string(token));
    // PieceToId answers the unknown id for a piece it lacks.
    if (id < 0 || (id == sp_.unk_id() && sp_.IdToPiece(id) != token))
      return std::nullopt;
    return id;
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    auto status = sp_.Encode(std::string(text), &ids);
    if (!status.ok())
      throw TokenizerError("SentencePiece cannot encode a text: " +
                           status.ToString());
    return {ids.begin(), ids.end()};
  }

  Encoding encodeExample(std::string_view a, std::optional<std::string_view> b,
                         int64_t maxLength) const override {
    std::optional<int32_t> bos = documentStart();
    int64_t specials = (bos ? 1 : 0) * (b ? 2 : 1);
    if (maxLength < specials + 1)
      throw TokenizerError(fmt::format(
          "a maximum length of {} leaves no room for text", maxLength));
    std::vector<int32_t> seq[2] = {encode(a),
                                   b ? encode(*b) : std::vector<int32_t>()};
    truncateLongestFirst(seq[0], seq[1], maxLength - specials);
    Encoding e;
    for (int s = 0; s < (b ? 2 : 1); ++s) {
      if (bos) {
        e.ids.push_back(*bos);
        e.typeIds.push_back(s);
      }
      e.ids.insert(e.ids.end(), seq[s].begin(), seq[s].end());
      e.typeIds.insert(e.typeIds.end(), seq[s].size(), s);
    }
    return e;
  }

  std::optional<int32_t> documentStart() const override {
    return sp_.bos_id() >= 0 ? std::optional<int32_t>(sp_.bos_id())
                             : std::nullopt;
  }
  std::optional<int32_t> documentEnd() const override {
    return sp_.eos_id() >= 0 ? std::optional<int32_t>(sp_.eos_id())
                             : std::nullopt;
  }
  std::optional<int32_t> padId() const override {
    return sp_.pad_id() >= 0 ? std::optional<int32_t>(sp_.pad_id())
                             : std::nullopt;
  }
  int trailingSpecials() const override { return 0; }

private:
  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
};

} // namespace

std::unique_ptr<Tokenizer> openSentencePiece(const std::string &path) {
  return std::make_unique<SentencePiece>(path);
}

} // namespace dttok
