//===- dt-tokenize.cpp - Text to the token files dt programs read ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dt-tokenize --tokenizer PATH -o OUT.bin INPUT...          next-token shards
// dt-tokenize --tokenizer PATH --classes -o OUT.bin IN.jsonl  classification
//
// Text inputs are documents (the whole file, or split at lines, blank lines
// or a delimiter line); JSON-lines inputs hold one document or example per
// line. See `dt-tokenize --help` and docs/data.md.
//
//===----------------------------------------------------------------------===//

#include "dttok/shards.h"
#include "dttok/tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace {

using json = nlohmann::json;

const char *const kUsage =
    R"(usage: dt-tokenize --tokenizer PATH [options] -o OUTPUT INPUT...

Turns text into the files dt programs read, with a SentencePiece model
(tokenizer.model) or a Hugging Face tokenizer.json (or a directory holding one).

Next-token shards (nn.tokens), the default: llm.c's .bin format, uint16 tokens
(uint32 above 65 536 ids); each document starts with the separator token.
  INPUT                 a text file, or a JSON-lines file (*.jsonl)
  --split MODE          how a text file splits into documents: none (the whole
                        file, the default), lines, paragraphs (blank lines)
  --delimiter LINE      split a text file at lines equal to LINE (fortune's %)
  --text-field NAME     the JSON field of a document (default: text)
  --prompt-field NAME   instruction data: a prompt field and a response field;
  --response-field NAME   only the response's tokens (and the end token after
                        it) are targets: the shards carry a loss mask
  --separator TOKEN     the token before each document (default: the
                        tokenizer's start or end-of-text token); none: no token
  --shard-tokens N      tokens per shard (default 100000000); more shards are
                        named OUTPUT's stem + _000000.bin, _000001.bin, ...

Classification examples (nn.token_classes): --classes
  INPUT                 JSON-lines files, one example per line
  --text-field NAME     the text (default: text)
  --pair-field NAME     a second text, for sentence-pair tasks (an example
                        without it is a single text)
  --label-field NAME    the label (default: label): an integer, or a name
  --labels A,B,...      the label names, in class order
  --max-length N        at most N tokens per example, the template's special
                        tokens included (default 512)
)";

[[noreturn]] void fail(const std::string &message) {
  fmt::print(stderr, "dt-tokenize: error: {}\n", message);
  std::exit(1);
}

struct Options {
  std::string tokenizer, output;
  std::vector<std::string> inputs;
  bool classes = false;
  std::string split = "none", delimiter;
  std::string textField = "text", pairField, labelField = "label";
  std::string promptField, responseField;
  std::optional<std::string> separator;
  std::vector<std::string> labels;
  int64_t shardTokens = 100000000, maxLength = 512;
};

int64_t parsePositive(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || v <= 0)
    fail(fmt::format("{} wants a positive integer, not '{}'", flag, value));
  return v;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(a + " wants a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (a == "--tokenizer") {
      o.tokenizer = value();
    } else if (a == "-o" || a == "--output") {
      o.output = value();
    } else if (a == "--classes") {
      o.classes = true;
    } else if (a == "--split") {
      o.split = value();
      if (o.split != "none" && o.split != "lines" && o.split != "paragraphs")
        fail("--split is none, lines or paragraphs, not '" + o.split + "'");
    } else if (a == "--delimiter") {
      o.delimiter = value();
    } else if (a == "--text-field") {
      o.textField = value();
    } else if (a == "--pair-field") {
      o.pairField = value();
    } else if (a == "--label-field") {
      o.labelField = value();
    } else if (a == "--prompt-field") {
      o.promptField = value();
    } else if (a == "--response-field") {
      o.responseField = value();
    } else if (a == "--separator") {
      o.separator = value();
    } else if (a == "--labels") {
      std::stringstream ss(value());
      for (std::string name; std::getline(ss, name, ',');)
        o.labels.push_back(name);
    } else if (a == "--shard-tokens") {
      o.shardTokens = parsePositive(a, value());
    } else if (a == "--max-length") {
      o.maxLength = parsePositive(a, value());
    } else if (!a.empty() && a[0] == '-') {
      fail("unknown option '" + a + "' (see --help)");
    } else {
      o.inputs.push_back(a);
    }
  }
  if (o.tokenizer.empty())
    fail("no --tokenizer: name a tokenizer.json, a SentencePiece .model or a "
         "directory holding one");
  if (o.output.empty())
    fail("no -o OUTPUT");
  if (o.inputs.empty())
    fail("no input file");
  if (o.promptField.empty() != o.responseField.empty())
    fail("--prompt-field and --response-field go together");
  if (o.classes && !o.promptField.empty())
    fail("--prompt-field is for next-token shards, not --classes");
  return o;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(fmt::format("cannot open the input '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool isJsonLines(const std::string &path) {
  return path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
}

/// Calls `f(object, line)` for each non-empty line of a JSON-lines file.
template <typename F> void forEachJsonLine(const std::string &path, F f) {
  std::stringstream in(readFile(path));
  int64_t line = 0;
  for (std::string text; std::getline(in, text);) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception &e) {
      fail(fmt::format("{}:{}: not a JSON object: {}", path, line, e.what()));
    }
    if (!j.is_object())
      fail(fmt::format("{}:{}: not a JSON object", path, line));
    f(j, fmt::format("{}:{}", path, line));
  }
}

std::string field(const json &j, const std::string &name,
                  const std::string &where) {
  if (!j.contains(name) || !j[name].is_string())
    fail(fmt::format("{}: no string field \"{}\"", where, name));
  return j[name].get<std::string>();
}

/// The documents of a text file.
std::vector<std::string> textDocuments(const std::string &text,
                                       const Options &o) {
  std::vector<std::string> docs;
  if (o.split == "none" && o.delimiter.empty()) {
    docs.push_back(text);
    return docs;
  }
  std::stringstream in(text);
  std::string doc;
  auto close = [&] {
    if (doc.find_first_not_of(" \t\r\n") != std::string::npos)
      docs.push_back(doc);
    doc.clear();
  };
  for (std::string line; std::getline(in, line);) {
    bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    if (!o.delimiter.empty() ? line == o.delimiter
                             : (o.split == "paragraphs" && blank)) {
      close();
      continue;
    }
    if (o.split == "lines") {
      doc = line;
      close();
      continue;
    }
    doc += line;
    doc += '\n';
  }
  close();
  return docs;
}

int tokenizeShards(const dttok::Tokenizer &tok, const Options &o) {
  std::optional<int32_t> separator = tok.documentStart();
  if (o.separator) {
    if (*o.separator == "none")
      separator.reset();
    else if (auto id = tok.tokenId(*o.separator))
      separator = id;
    else
      fail("--separator: the tokenizer has no token '" + *o.separator + "'");
  }
  bool masked = !o.promptField.empty();
  std::optional<int32_t> end = masked ? tok.documentEnd() : std::nullopt;
  bool wide = tok.vocabSize() > 65536;
  dttok::TokenShardWriter out(o.output, o.shardTokens, wide, masked);
  int64_t documents = 0, targets = 0;
  std::optional<int32_t> last;
  auto document = [&](const std::vector<int32_t> &ids, size_t prompt) {
    // After a response's end token that is also the separator (GPT-2's
    // <|endoftext|>), the next document needs no second one.
    if (separator && last != separator)
      out.append({*separator}, /*target=*/!masked);
    std::vector<int32_t> head(ids.begin(), ids.begin() + long(prompt));
    std::vector<int32_t> rest(ids.begin() + long(prompt), ids.end());
    out.append(head, /*target=*/false);
    out.append(rest, /*target=*/true);
    targets += int64_t(rest.size());
    last.reset();
    if (end) {
      out.append({*end}, /*target=*/true);
      ++targets;
      last = end;
    }
    ++documents;
  };
  for (const std::string &path : o.inputs) {
    if (isJsonLines(path)) {
      forEachJsonLine(path, [&](const json &j, const std::string &where) {
        if (!masked) {
          document(tok.encode(field(j, o.textField, where)), 0);
          return;
        }
        // The prompt's tokens are those of the prompt alone; the whole
        // text is encoded at once, as it will be read.
        std::string prompt = field(j, o.promptField, where);
        std::vector<int32_t> ids =
            tok.encode(prompt + field(j, o.responseField, where));
        document(ids, std::min(tok.encode(prompt).size(), ids.size()));
      });
    } else {
      if (masked)
        fail(fmt::format("'{}': instruction data (--prompt-field) is read "
                         "from JSON-lines files (*.jsonl)",
                         path));
      for (const std::string &doc : textDocuments(readFile(path), o))
        document(tok.encode(doc), 0);
    }
  }
  int64_t tokens = out.tokens();
  std::vector<std::string> files = out.finish();
  fmt::print("dt-tokenize: {} tokens from {} documents in {} shard{} "
             "({}-bit tokens{}): {}\n",
             tokens, documents, files.size(), files.size() == 1 ? "" : "s",
             wide ? 32 : 16, masked ? fmt::format(", {} targets", targets) : "",
             files.size() == 1 ? files[0] : files[0] + " ... " + files.back());
  return 0;
}

int tokenizeClasses(const dttok::Tokenizer &tok, const Options &o) {
  std::optional<int32_t> pad = tok.padId();
  dttok::ClassFileWriter out;
  std::map<std::string, int32_t> names;
  for (size_t i = 0; i < o.labels.size(); ++i)
    names[o.labels[i]] = int32_t(i);
  int64_t truncated = 0;
  for (const std::string &path : o.inputs) {
    if (!isJsonLines(path))
      fail(fmt::format("'{}': classification examples are read from "
                       "JSON-lines files (*.jsonl)",
                       path));
    forEachJsonLine(path, [&](const json &j, const std::string &where) {
      std::string text = field(j, o.textField, where);
      std::optional<std::string> pair;
      // An example without the pair field (or with null) is a single text.
      if (!o.pairField.empty() && j.contains(o.pairField) &&
          !j[o.pairField].is_null())
        pair = field(j, o.pairField, where);
      if (!j.contains(o.labelField))
        fail(fmt::format("{}: no field \"{}\"", where, o.labelField));
      const json &l = j[o.labelField];
      int32_t label = -1;
      if (l.is_number_integer()) {
        label = l.get<int32_t>();
        if (label < 0 || (!names.empty() && size_t(label) >= names.size()))
          fail(fmt::format("{}: label {} is not a class", where, label));
      } else if (l.is_string()) {
        auto it = names.find(l.get<std::string>());
        if (names.empty())
          fail(fmt::format("{}: label \"{}\" is a name: list the class "
                           "names in order with --labels A,B,...",
                           where, l.get<std::string>()));
        if (it == names.end())
          fail(fmt::format("{}: label \"{}\" is not one of --labels", where,
                           l.get<std::string>()));
        label = it->second;
      } else {
        fail(fmt::format("{}: the label is neither an integer nor a name",
                         where));
      }
      dttok::Encoding e = tok.encodeExample(
          text, pair ? std::optional<std::string_view>(*pair) : std::nullopt,
          o.maxLength);
      truncated += int64_t(e.ids.size()) == o.maxLength;
      out.append(e, label);
    });
  }
  out.finish(o.output, pad.value_or(0), tok.trailingSpecials());
  fmt::print("dt-tokenize: {} examples ({} at the maximum length {}), pad id "
             "{}: {}\n",
             out.examples(), truncated, o.maxLength, pad.value_or(0), o.output);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  try {
    std::unique_ptr<dttok::Tokenizer> tok = dttok::openTokenizer(o.tokenizer);
    return o.classes ? tokenizeClasses(*tok, o) : tokenizeShards(*tok, o);
  } catch (const dttok::TokenizerError &e) {
    fail(e.what());
  }
}
