//===- HFConfig.cpp - Model sizes from a Hugging Face config.json ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `nn.Llama(config = "llama/config.json")` takes its sizes from the
// `config.json` that transformers writes beside a checkpoint (a LlamaConfig),
// read by dtc at compile time: the program's shapes are static, so the file
// must be there when it compiles. Keys map to the layer's arguments;
// `tie_word_embeddings` picks between nn.Llama and nn.LlamaTied (the head as
// the embedding table), and a file for the other one is an error that says
// which; rope_scaling of types "linear" and "llama3" sets the rope_*
// arguments. What dt cannot build yet (a head width other than
// hidden_size / num_attention_heads, other RoPE scalings) is an error that
// names the key, not a model that silently differs from the checkpoint's.
// Newer files keep rope_theta (and the scaling) inside `rope_parameters`;
// both spellings are read. nn.Bert and nn.BertClassifier read a BertConfig
// the same way; the classifier's `classes` may stand beside `config`, as
// may any argument the file does not set. nn.DistilBert and
// nn.DistilBertClassifier read a DistilBertConfig.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;

namespace {

/// The argument of nn.Llama each LlamaConfig key sets.
struct KeyArg {
  const char *key, *arg;
  bool isInt;
};
constexpr KeyArg kLlamaKeys[] = {
    {"vocab_size", "vocab", true},
    {"hidden_size", "width", true},
    {"num_hidden_layers", "depth", true},
    {"num_attention_heads", "heads", true},
    {"num_key_value_heads", "kv_heads", true},
    {"intermediate_size", "hidden", true},
    {"rms_norm_eps", "eps", false},
    {"rope_theta", "rope_theta", false},
};

/// rope_scaling (or rope_parameters) as nn.Llama's rope_* arguments:
/// "linear" (every frequency divided by `factor`) and "llama3" (by
/// wavelength); "default" or none is no scaling. Others (dynamic NTK, YaRN,
/// LongRoPE) are an error that names the type.
llvm::LogicalResult
ropeScaling(const llvm::json::Object *scaling, llvm::StringRef key,
            llvm::StringRef model, llvm::StringMap<EvalValue> &values,
            llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)> fail) {
  if (!scaling)
    return llvm::success();
  // Older files say "type", newer ones "rope_type".
  std::optional<llvm::StringRef> type = scaling->getString("rope_type");
  if (!type)
    type = scaling->getString("type");
  if (!type || *type == "default")
    return llvm::success();
  if (*type != "linear" && *type != "llama3")
    return fail(key + ".rope_type is '" + *type + "', which nn." + model +
                " does not build (it builds 'linear' and 'llama3')");
  if (std::optional<double> a = scaling->getNumber("attention_factor"))
    if (*a != 1.0)
      return fail(key + ".attention_factor is not 1, which nn." + model +
                  " does not build");
  // Each is positive; the llama3 ones only for llama3.
  llvm::SmallVector<llvm::StringRef, 4> names{"factor"};
  if (*type == "llama3")
    names.append({"low_freq_factor", "high_freq_factor",
                  "original_max_position_embeddings"});
  llvm::SmallVector<double, 4> v;
  for (llvm::StringRef name : names) {
    std::optional<double> x = scaling->getNumber(name);
    if (!x || !(*x > 0))
      return fail(key + " (" + *type + ") needs a positive '" + name + "'");
    v.push_back(*x);
  }
  values["rope_factor"] = EvalValue::getFloat(v[0]);
  if (*type == "linear")
    return llvm::success();
  if (!(v[2] > v[1]))
    return fail(key + " needs high_freq_factor above low_freq_factor");
  values["rope_low_freq_factor"] = EvalValue::getFloat(v[1]);
  values["rope_high_freq_factor"] = EvalValue::getFloat(v[2]);
  values["rope_original_max"] = EvalValue::getInt(SymExpr(int64_t(v[3])));
  return llvm::success();
}

} // namespace

namespace {

/// Sets `values` from the config's `keys`: an integer must be positive, a
/// number not negative (a dropout probability below 1); a key `optional`
/// accepts may be absent (the layer's default is the config class's).
llvm::LogicalResult
readKeys(const llvm::json::Object &config, llvm::ArrayRef<KeyArg> keys,
         llvm::StringRef model,
         llvm::function_ref<bool(llvm::StringRef)> optional,
         llvm::StringMap<EvalValue> &values,
         llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)> fail) {
  for (const KeyArg &k : keys) {
    llvm::StringRef key(k.key);
    const llvm::json::Value *v = config.get(key);
    if (!v || v->kind() == llvm::json::Value::Null) {
      if (optional(key))
        continue;
      return fail("it has no '" + key + "', which nn." + model +
                  " needs for '" + k.arg + "'");
    }
    if (k.isInt) {
      std::optional<int64_t> n = v->getAsInteger();
      if (!n || *n <= 0)
        return fail("'" + key + "' must be a positive integer");
      values[k.arg] = EvalValue::getInt(SymExpr(*n));
      continue;
    }
    std::optional<double> x = v->getAsNumber();
    bool dropout = key.contains("dropout");
    if (!x || *x < 0 || (dropout && *x >= 1))
      return fail("'" + key + "' must be " +
                  (dropout ? "a probability in [0, 1)" : "a number >= 0"));
    values[k.arg] = EvalValue::getFloat(*x);
  }
  return llvm::success();
}

/// BertConfig's keys and nn.Bert's arguments (the last, classifier_dropout,
/// nn.BertClassifier's only); the last six have BertConfig's defaults when
/// absent.
constexpr KeyArg kBertKeys[] = {
    {"vocab_size", "vocab", true},
    {"hidden_size", "width", true},
    {"num_hidden_layers", "depth", true},
    {"num_attention_heads", "heads", true},
    {"intermediate_size", "hidden", true},
    {"max_position_embeddings", "positions", true},
    {"type_vocab_size", "types", true},
    {"layer_norm_eps", "eps", false},
    {"hidden_dropout_prob", "dropout_p", false},
    {"attention_probs_dropout_prob", "attention_dropout_p", false},
    {"classifier_dropout", "classifier_dropout_p", false},
};

bool isBert(llvm::StringRef model) {
  return model == "Bert" || model == "BertClassifier";
}

/// DistilBertConfig's keys and nn.DistilBert's arguments; the dropouts have
/// DistilBertConfig's defaults when absent.
constexpr KeyArg kDistilBertKeys[] = {
    {"vocab_size", "vocab", true},
    {"dim", "width", true},
    {"n_layers", "depth", true},
    {"n_heads", "heads", true},
    {"hidden_dim", "hidden", true},
    {"max_position_embeddings", "positions", true},
    {"dropout", "dropout_p", false},
    {"attention_dropout", "attention_dropout_p", false},
    {"seq_classif_dropout", "classifier_dropout_p", false},
};

bool isDistilBert(llvm::StringRef model) {
  return model == "DistilBert" || model == "DistilBertClassifier";
}

/// nn.DistilBert's and nn.DistilBertClassifier's arguments from a
/// DistilBertConfig; sinusoidal position tables and other activations are
/// errors naming the key.
llvm::LogicalResult distilBertArgs(
    const llvm::json::Object &config, llvm::StringRef model,
    llvm::StringMap<EvalValue> &values,
    llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)> fail) {
  if (std::optional<llvm::StringRef> type = config.getString("model_type"))
    if (*type != "distilbert")
      return fail("model_type is '" + *type + "'; nn." + model +
                  " builds transformers' DistilBERT (model_type distilbert)");
  if (std::optional<llvm::StringRef> act = config.getString("activation"))
    if (*act != "gelu")
      return fail("activation is '" + *act + "'; nn." + model +
                  " builds the exact GELU (\"gelu\") only");
  if (config.getBoolean("sinusoidal_pos_embds").value_or(false))
    return fail("sinusoidal_pos_embds is true; nn." + model +
                " builds learned position embeddings only");
  llvm::SmallVector<KeyArg> keys(std::begin(kDistilBertKeys),
                                 std::end(kDistilBertKeys));
  if (model != "DistilBertClassifier")
    keys.pop_back(); // seq_classif_dropout
  // The dropouts' defaults are DistilBertConfig's.
  return readKeys(
      config, keys, model,
      [](llvm::StringRef key) { return key.contains("dropout"); }, values,
      fail);
}

/// nn.Bert's and nn.BertClassifier's arguments from a BertConfig. What would
/// build a model other than the checkpoint's (another activation, relative
/// position embeddings) is an error naming the key.
llvm::LogicalResult
bertArgs(const llvm::json::Object &config, llvm::StringRef model,
         llvm::StringMap<EvalValue> &values,
         llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)> fail) {
  if (std::optional<llvm::StringRef> type = config.getString("model_type"))
    if (*type != "bert")
      return fail("model_type is '" + *type + "'; nn." + model +
                  " builds transformers' BERT (model_type bert)");
  if (std::optional<llvm::StringRef> act = config.getString("hidden_act"))
    if (*act != "gelu")
      return fail("hidden_act is '" + *act + "'; nn." + model +
                  " builds BERT's exact GELU (\"gelu\") only");
  if (std::optional<llvm::StringRef> pos =
          config.getString("position_embedding_type"))
    if (*pos != "absolute")
      return fail("position_embedding_type is '" + *pos + "'; nn." + model +
                  " builds absolute position embeddings only");
  llvm::SmallVector<KeyArg> keys(std::begin(kBertKeys), std::end(kBertKeys));
  if (model != "BertClassifier")
    keys.pop_back(); // classifier_dropout
  return readKeys(
      config, keys, model,
      [](llvm::StringRef key) {
        // nn.Bert's defaults are BertConfig's; classifier_dropout is the
        // hidden dropout when absent or null.
        return key == "type_vocab_size" || key == "layer_norm_eps" ||
               key.ends_with("dropout_prob") || key == "classifier_dropout";
      },
      values, fail);
}

} // namespace

bool sema::takesHFConfig(const ModuleScope &scope,
                         const ast::ModelDecl &decl) {
  return scope.isStdlib &&
         (decl.getName() == "Llama" || decl.getName() == "LlamaTied" ||
          isBert(decl.getName()) || isDistilBert(decl.getName()));
}

/// The config.json at `path` as JSON; a located error at `loc` when it is
/// missing or no JSON object.
static FailureOr<llvm::json::Value>
readConfig(SemaContext &ctx, llvm::StringRef path, llvm::SMLoc loc) {
  auto fail = [&](const llvm::Twine &why) {
    ctx.error(loc, "config '" + path + "': " + why);
    return failure();
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(path);
  if (!text)
    return fail("cannot read it: " + text.getError().message() +
                " (dtc reads the sizes at compile time, so the file must be "
                "there when the program compiles)");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*text)->getBuffer());
  if (!json)
    return fail("not JSON: " + llvm::toString(json.takeError()));
  if (!json->getAsObject())
    return fail("not a JSON object");
  return std::move(*json);
}

FailureOr<std::string> sema::hfModelType(SemaContext &ctx,
                                         llvm::StringRef path,
                                         llvm::SMLoc loc) {
  FailureOr<llvm::json::Value> json = readConfig(ctx, path, loc);
  if (failed(json))
    return failure();
  std::optional<llvm::StringRef> type =
      json->getAsObject()->getString("model_type");
  if (!type) {
    ctx.error(loc, "config '" + path + "': it has no 'model_type', by "
                                       "which nn.SequenceClassifier chooses "
                                       "the classifier");
    return failure();
  }
  return type->str();
}

FailureOr<llvm::StringMap<EvalValue>>
sema::argsFromHFConfig(SemaContext &ctx, llvm::StringRef model,
                       llvm::StringRef path, llvm::SMLoc loc) {
  auto fail = [&](const llvm::Twine &why) {
    ctx.error(loc, "config '" + path + "': " + why);
    return failure();
  };
  FailureOr<llvm::json::Value> json = readConfig(ctx, path, loc);
  if (failed(json))
    return failure();
  const llvm::json::Object *config = json->getAsObject();
  if (isBert(model) || isDistilBert(model)) {
    llvm::StringMap<EvalValue> values;
    if (failed(isBert(model) ? bertArgs(*config, model, values, fail)
                             : distilBertArgs(*config, model, values, fail)))
      return failure();
    return values;
  }

  // Only LLaMA's: Mistral's sliding window and Qwen2's implicit attention
  // biases would make a model that differs from the checkpoint's.
  if (std::optional<llvm::StringRef> type = config->getString("model_type"))
    if (*type != "llama")
      return fail("model_type is '" + *type + "'; nn." + model +
                  " builds transformers' LLaMA (model_type llama)");
  // LlamaConfig's default is an untied head.
  bool tied = config->getBoolean("tie_word_embeddings").value_or(false);
  if (tied && model != "LlamaTied")
    return fail("tie_word_embeddings is true: its head is the token "
                "embedding table, which nn.LlamaTied builds (nn." +
                model + " has a head of its own)");
  if (!tied && model == "LlamaTied")
    return fail("tie_word_embeddings is false (or absent, LlamaConfig's "
                "default): its head has weights of its own, which nn.Llama "
                "builds");
  for (const char *key : {"attention_bias", "mlp_bias"}) {
    const llvm::json::Value *v = config->get(key);
    if (v && v->kind() != llvm::json::Value::Null &&
        !(v->getAsBoolean() && !*v->getAsBoolean()))
      return fail(llvm::Twine(key) + " is set, which nn." + model +
                  " does not build yet");
  }
  // rope_theta (and the scaling) moved into rope_parameters in newer files.
  const llvm::json::Object *rope = config->getObject("rope_parameters");
  llvm::StringMap<EvalValue> values;
  const llvm::json::Object *scaling = config->getObject("rope_scaling");
  if (failed(ropeScaling(scaling ? scaling : rope,
                         scaling ? "rope_scaling" : "rope_parameters", model,
                         values, fail)))
    return failure();

  for (const KeyArg &k : kLlamaKeys) {
    const llvm::json::Value *v = config->get(k.key);
    if (llvm::StringRef(k.key) == "rope_theta" && !v && rope)
      v = rope->get("rope_theta");
    // num_key_value_heads null or absent: as many as the query heads.
    if (llvm::StringRef(k.key) == "num_key_value_heads" &&
        (!v || v->kind() == llvm::json::Value::Null))
      v = config->get("num_attention_heads");
    if (!v || v->kind() == llvm::json::Value::Null) {
      if (llvm::StringRef(k.key) == "rope_theta" ||
          llvm::StringRef(k.key) == "rms_norm_eps")
        continue; // nn.Llama's defaults are LlamaConfig's
      return fail("it has no '" + llvm::Twine(k.key) + "', which nn." + model +
                  " needs for '" + k.arg + "'");
    }
    if (k.isInt) {
      std::optional<int64_t> n = v->getAsInteger();
      if (!n || *n <= 0)
        return fail("'" + llvm::Twine(k.key) + "' must be a positive integer");
      values[k.arg] = EvalValue::getInt(SymExpr(*n));
    } else {
      std::optional<double> x = v->getAsNumber();
      if (!x || !(*x > 0))
        return fail("'" + llvm::Twine(k.key) + "' must be a positive number");
      values[k.arg] = EvalValue::getFloat(*x);
    }
  }
  if (std::optional<int64_t> headDim = config->getInteger("head_dim")) {
    int64_t width = *values["width"].intValue.getConstant(),
            heads = *values["heads"].intValue.getConstant();
    if (*headDim * heads != width)
      return fail("head_dim is " + llvm::Twine(*headDim) +
                  ", not hidden_size / num_attention_heads (" +
                  llvm::Twine(width / heads) +
                  "), which nn." + model + " does not build yet");
  }
  // LlamaConfig's only dropout, on the attention probabilities (0 when
  // absent, its default).
  if (const llvm::json::Value *v = config->get("attention_dropout");
      v && v->kind() != llvm::json::Value::Null) {
    std::optional<double> p = v->getAsNumber();
    if (!p || !(*p >= 0 && *p < 1))
      return fail("'attention_dropout' must be a probability in [0, 1)");
    values["attention_dropout_p"] = EvalValue::getFloat(*p);
  }

  return values;
}
