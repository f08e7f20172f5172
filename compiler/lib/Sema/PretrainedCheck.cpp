//===- PretrainedCheck.cpp - `init = nn.safetensors(...)` -----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A program that starts from pretrained weights names a Hugging Face
// checkpoint in its train block:
//
//   init = nn.safetensors("gpt2/", names = {blocks: "h"}, ignore = ["lm_head.*"])
//
// Each parameter gets the name it has in such a file. By default that is its
// path with the standard library's layers named as Hugging Face names them:
// nn.Block is GPT-2's block (`ln1` is `ln_1`, the attention's `qkv` is
// `c_attn`, its MLP's `up` is `c_fc`), and GPT-2 stores those layers' weights
// as Conv1D does, transposed ([in, out]). `names` maps a path of the model
// (a layer or a parameter) to the file's name for it; the rest of the path
// keeps the default names. The file's own prefix (`transformer.`, `model.`)
// is found by the matcher (dtrt/safetensors.h), which both dtc and the
// program run.
//
// When the file exists at compile time, dtc reads its headers (never the
// weights) and reports everything that does not fit at once: tensors of the
// wrong shape or type, tensors no parameter takes. Parameters the file lacks
// keep their declared initialisers (a new classifier head) and are listed by
// --report.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "dtrt/safetensors.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <set>

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {

/// Hugging Face's name for member `member` of a standard-library layer of
/// kind `parent`, whose own parent is of kind `grandparent`.
std::string hfMemberName(llvm::StringRef parent, llvm::StringRef grandparent,
                         llvm::StringRef member) {
  if (parent == "nn.Block")
    return llvm::StringSwitch<std::string>(member)
        .Case("ln1", "ln_1")
        .Case("ln2", "ln_2")
        .Default(member.str());
  if (parent == "nn.CausalSelfAttention")
    return llvm::StringSwitch<std::string>(member)
        .Case("qkv", "c_attn")
        .Case("proj", "c_proj")
        .Default(member.str());
  // BERT's layer norms are `LayerNorm`, and the attention proper `self`.
  if ((parent == "nn.BertEmbeddings" || parent == "nn.BertResidual" ||
       parent == "nn.DistilBertEmbeddings") &&
      member == "norm")
    return "LayerNorm";
  if (parent == "nn.BertAttention" && member == "attn")
    return "self";
  // Only GPT-2's MLP has GPT-2's names; an MLP of its own keeps dt's.
  if (parent == "nn.MLP" && grandparent == "nn.Block")
    return llvm::StringSwitch<std::string>(member)
        .Case("up", "c_fc")
        .Case("down", "c_proj")
        .Default(member.str());
  return member.str();
}

/// One step of a parameter's path: dt's name for it and the file's (empty
/// when the file's path has no step for it).
struct Component {
  std::string dt, file;
};

/// torchvision's names for the steps of a ResNet's path that dt's layers name
/// otherwise: a stage's `first` block is block 0 and `rest.i` block i + 1; a
/// block's one `downsample.0` shortcut is `downsample`, whose convolution
/// and batch norm are its items 0 and 1. Returns false for other steps.
bool torchvisionStep(llvm::StringRef parent, llvm::StringRef member,
                     llvm::StringRef index, std::vector<Component> &out) {
  if (parent == "nn.BasicStage" || parent == "nn.BottleneckStage") {
    int64_t i = 0;
    if (member == "first") {
      out.push_back({member.str(), "0"});
      return true;
    }
    if (member != "rest" || index.getAsInteger(10, i))
      return false;
    out.push_back({member.str(), ""});
    out.push_back({index.str(), std::to_string(i + 1)});
    return true;
  }
  if ((parent == "nn.BasicBlock" || parent == "nn.Bottleneck") &&
      member == "downsample") {
    out.push_back({member.str(), member.str()});
    out.push_back({index.str(), ""});
    return true;
  }
  if (parent == "nn.ResNetDownsample" && (member == "conv" || member == "bn")) {
    out.push_back({member.str(), member == "conv" ? "0" : "1"});
    return true;
  }
  return false;
}

/// The path of `param` from the root, component by component.
std::vector<Component> components(const ParamInfo &param) {
  std::vector<const ModelInstance *> chain;
  for (const ModelInstance *i = param.owner; i; i = i->parent)
    chain.insert(chain.begin(), i);
  std::vector<Component> out;
  for (size_t k = 1; k < chain.size(); ++k) {
    const ModelInstance *parent = chain[k - 1];
    llvm::StringRef grandparent =
        k >= 2 ? llvm::StringRef(chain[k - 2]->model) : llvm::StringRef();
    // What this instance adds to its parent's path: `attn`, or `blocks.3`
    // for an item of a list.
    llvm::StringRef rest = chain[k]->path;
    if (!parent->path.empty())
      rest = rest.drop_front(parent->path.size() + 1);
    auto [member, index] = rest.split('.');
    if (torchvisionStep(parent->model, member, index, out))
      continue;
    out.push_back(
        {member.str(), hfMemberName(parent->model, grandparent, member)});
    if (!index.empty())
      out.push_back({index.str(), index.str()});
  }
  llvm::StringRef leaf = llvm::StringRef(param.name).rsplit('.').second;
  if (leaf.empty())
    leaf = param.name;
  out.push_back({leaf.str(), leaf.str()});
  return out;
}

/// Whether the file keeps `param` transposed: the weight of a Linear inside
/// GPT-2's block, which Hugging Face's GPT-2 builds from Conv1D.
bool isConv1DWeight(const ParamInfo &param) {
  if ((param.owner->model != "nn.Linear" &&
       param.owner->model != "nn.LoraLinear") ||
      !llvm::StringRef(param.name).ends_with(".weight"))
    return false;
  for (const ModelInstance *i = param.owner->parent; i; i = i->parent)
    if (i->model == "nn.Block")
      return true;
  return false;
}

/// `blocks[3].attn` -> `blocks.3.attn`.
std::string dottedPath(llvm::StringRef path) {
  std::string out;
  for (char c : path) {
    if (c == '[')
      out += '.';
    else if (c != ']')
      out += c;
  }
  return out;
}

std::string join(llvm::ArrayRef<std::string> parts) {
  std::string out;
  for (const std::string &p : parts)
    if (!p.empty())
      out += (out.empty() ? "" : ".") + p;
  return out;
}

std::string gpt2Config(const Job &job);
std::string llamaConfig(const Job &job);
std::string bertConfig(const Job &job);
std::string distilBertConfig(const Job &job);

/// The config.json of a model transformers knows, or "".
std::string hfConfig(const Job &job) {
  for (auto config : {gpt2Config, llamaConfig, bertConfig, distilBertConfig})
    if (std::string text = config(job); !text.empty())
      return text;
  return "";
}

/// Whether the model is the standard library's nn.Llama or nn.LlamaTied,
/// whose parameters transformers' LlamaForCausalLM keeps under `model.`
/// (all but an untied head).
bool isLlama(const Job &job) {
  return job.model && (job.model->model == "nn.Llama" ||
                       job.model->model == "nn.LlamaTied");
}

/// nn.LlamaTied: the head is the token embedding table.
bool isTiedLlama(const Job &job) {
  return job.model && job.model->model == "nn.LlamaTied";
}

/// Where `names` maps a model path to a file path.
struct NameMapping {
  std::vector<std::string> from; ///< Components of the model path.
  std::string to;
};

class PretrainedChecker {
public:
  PretrainedChecker(SemaContext &ctx, KeyEvaluator &keys, Job &job)
      : ctx(ctx), keys(keys), job(job) {}

  LogicalResult check(const ast::Expr *expr);

private:
  LogicalResult checkNames(const ast::Expr &expr);
  LogicalResult checkIgnore(const ast::Expr &expr);
  void nameParams();
  LogicalResult checkFile(llvm::SMLoc pathLoc);
  /// PEFT's names and adapter_config.json for the adapters, if any.
  void describeAdapters();

  SemaContext &ctx;
  KeyEvaluator &keys;
  Job &job;
  PretrainedConfig config;
  std::vector<NameMapping> mappings;
};

LogicalResult PretrainedChecker::check(const ast::Expr *expr) {
  if (!expr) {
    nameParams();
    job.hfConfig = hfConfig(job);
    describeAdapters();
    return success();
  }
  const auto *call = llvm::dyn_cast<ast::CallExpr>(expr);
  if (!call || ast::toSource(call->getCallee()) != "nn.safetensors") {
    ctx.error(expr->getLoc(), "'init' must name a checkpoint, such as "
                              "nn.safetensors(\"model.safetensors\")");
    return failure();
  }
  config.loc = ctx.diag.resolve(expr->getLoc());
  std::vector<ParamSpec> specs = {{"path"}, {"names", false}, {"ignore", false}};
  FailureOr<std::vector<const ast::Field *>> bound = bindCallArgs(
      ctx, call->getArgs(), specs, "nn.safetensors", call->getLoc());
  if (failed(bound))
    return failure();
  const ast::Expr &pathExpr = *(*bound)[0]->value;
  FailureOr<std::string> path =
      keys.string(pathExpr, "the path of nn.safetensors");
  if (failed(path))
    return failure();
  if (path->empty()) {
    ctx.error(pathExpr.getLoc(), "the path of nn.safetensors is empty");
    return failure();
  }
  config.path = *path;
  bool ok = true;
  if ((*bound)[1])
    ok &= succeeded(checkNames(*(*bound)[1]->value));
  if ((*bound)[2])
    ok &= succeeded(checkIgnore(*(*bound)[2]->value));
  if (!ok)
    return failure();
  nameParams();
  job.hfConfig = hfConfig(job);
  if (failed(checkFile(pathExpr.getLoc())))
    return failure();
  job.pretrained = std::move(config);
  describeAdapters();
  return success();
}

void PretrainedChecker::describeAdapters() {
  if (!job.adapters)
    return;
  AdapterConfig &a = *job.adapters;
  // transformers' GPT2LMHeadModel keeps the blocks under `transformer.`;
  // another model has the prefix of the file it started from, if any.
  // (nn.Llama's names carry transformers' `model.` already.)
  std::string prefix = !gpt2Config(job).empty() ? "transformer."
                       : job.pretrained         ? job.pretrained->prefix
                                                : "";
  a.peftPrefix = "base_model.model." + prefix;
  llvm::json::Array targets;
  bool conv1D = false;
  for (size_t i = 0; i < job.params.size(); ++i) {
    const ParamInfo &p = job.params[i];
    if (!p.adapter || !llvm::StringRef(p.name).ends_with(".lora_A"))
      continue;
    // The layer's module name: its lora_A's name less `.lora_A.weight`.
    llvm::StringRef module = job.checkpointNames[i].name;
    module.consume_back(".lora_A.weight");
    targets.push_back(module.str());
    const ParamInfo *weight = job.findParam(p.owner->path + ".weight");
    conv1D |= weight && job.checkpointNames[weight->index].transposed;
  }
  // PEFT matches each target as a suffix of a module's name; the full names
  // adapt exactly the layers dt adapted.
  llvm::json::Object config{
      {"peft_type", "LORA"},
      {"task_type", job.hfConfig.empty() ? llvm::json::Value(nullptr)
                                         : llvm::json::Value("CAUSAL_LM")},
      {"base_model_name_or_path",
       job.pretrained ? llvm::json::Value(job.pretrained->path)
                      : llvm::json::Value(nullptr)},
      {"r", a.rank},
      {"lora_alpha", a.alpha},
      {"lora_dropout", a.dropout},
      {"target_modules", std::move(targets)},
      {"fan_in_fan_out", conv1D},
      {"bias", "none"},
      {"modules_to_save", nullptr},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"inference_mode", true}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(config))) << "\n";
  a.peftConfig = std::move(text);
}

LogicalResult PretrainedChecker::checkNames(const ast::Expr &expr) {
  const auto *record = llvm::dyn_cast<ast::RecordExpr>(&expr);
  if (!record) {
    ctx.error(expr.getLoc(), "'names' of nn.safetensors must be a record "
                             "such as {blocks: \"h\"}");
    return failure();
  }
  bool ok = true;
  for (const ast::Field &f : record->getFields()) {
    FailureOr<std::string> to =
        keys.string(*f.value, "the file's name for '" + f.name + "'");
    if (failed(to)) {
      ok = false;
      continue;
    }
    std::string from = dottedPath(f.name);
    // The path must lead to parameters: a layer, a list, an item, a
    // parameter.
    bool found = false;
    for (const ParamInfo &p : job.params)
      found |= llvm::StringRef(p.name) == from ||
               llvm::StringRef(p.name).starts_with(from + ".");
    std::vector<std::string> candidates = parameterPaths(job);
    if (!found) {
      ctx.error(f.nameLoc, "'" + f.name +
                               "' in 'names' is no layer or parameter of "
                               "the model" +
                               suggest(from, candidates));
      ok = false;
      continue;
    }
    NameMapping m;
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(from).split(parts, '.');
    for (llvm::StringRef part : parts)
      m.from.push_back(part.str());
    m.to = *to;
    mappings.push_back(std::move(m));
  }
  return success(ok);
}

LogicalResult PretrainedChecker::checkIgnore(const ast::Expr &expr) {
  const auto *list = llvm::dyn_cast<ast::ListExpr>(&expr);
  if (!list) {
    ctx.error(expr.getLoc(), "'ignore' of nn.safetensors must be a list of "
                             "name patterns such as [\"lm_head.*\"]");
    return failure();
  }
  bool ok = true;
  for (const ast::ExprPtr &item : list->getItems()) {
    FailureOr<std::string> glob = keys.string(*item, "a pattern of 'ignore'");
    if (failed(glob))
      ok = false;
    else
      config.ignore.push_back(*glob);
  }
  return success(ok);
}

void PretrainedChecker::nameParams() {
  // A tied checkpoint may still carry the head, a copy of the table
  // (safetensors files saved without deduplication): the tied model's head
  // is the table, so the copy is skipped, as transformers skips it.
  if (isTiedLlama(job))
    job.checkpointSkip = {"lm_head.weight"};
  for (const ParamInfo &p : job.params) {
    std::vector<Component> parts = components(p);
    // The longest mapping that is a prefix of the path wins.
    const NameMapping *best = nullptr;
    for (const NameMapping &m : mappings) {
      if (m.from.size() > parts.size() ||
          (best && best->from.size() >= m.from.size()))
        continue;
      bool prefix = true;
      for (size_t i = 0; i < m.from.size() && prefix; ++i)
        prefix = parts[i].dt == m.from[i];
      if (prefix)
        best = &m;
    }
    std::vector<std::string> names;
    size_t from = 0;
    if (best) {
      if (!best->to.empty())
        names.push_back(best->to);
      from = best->from.size();
    }
    for (size_t i = from; i < parts.size(); ++i)
      names.push_back(parts[i].file);
    // PEFT's name for a LoRA factor: `c_attn.lora_A.weight`.
    if (p.adapter)
      names.push_back("weight");
    if (isLlama(job) && parts.front().dt != "lm_head")
      names.insert(names.begin(), "model");
    job.checkpointNames.push_back({join(names), isConv1DWeight(p)});
  }
}

LogicalResult PretrainedChecker::checkFile(llvm::SMLoc pathLoc) {
  // Like a data path, the file may exist only where the program runs; dtc
  // checks what it can see, and the program checks again.
  if (!llvm::sys::fs::exists(config.path))
    return success();
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(config.path, status) &&
      !llvm::sys::fs::is_directory(status) &&
      !llvm::sys::fs::is_regular_file(status)) {
    ctx.error(pathLoc, "'" + config.path + "' is neither a file nor a "
                                           "directory");
    return failure();
  }
  dtrt::Expected<dtrt::StSet> set = dtrt::StSet::open(config.path);
  if (!set) {
    ctx.error(pathLoc, set.error().message());
    return failure();
  }
  std::vector<dtrt::StWant> wants;
  for (size_t i = 0; i < job.params.size(); ++i) {
    std::vector<int64_t> shape(job.params[i].type.shape.begin(),
                               job.params[i].type.shape.end());
    if (job.checkpointNames[i].transposed)
      std::reverse(shape.begin(), shape.end());
    wants.push_back(
        {job.params[i].name, job.checkpointNames[i].name, shape});
  }
  // What the program skips too: the user's patterns and the model's own.
  std::vector<std::string> ignore = config.ignore;
  ignore.insert(ignore.end(), job.checkpointSkip.begin(),
                job.checkpointSkip.end());
  dtrt::StMatch match = dtrt::matchStTensors(*set, wants, ignore);
  if (!match.problems.empty()) {
    // Every problem at once, so that one edit fixes them all.
    constexpr size_t kShown = 24;
    std::string text = "the checkpoint '" + config.path +
                       "' does not fit the model (" +
                       std::to_string(match.problems.size()) + " problem" +
                       (match.problems.size() == 1 ? "" : "s") + "):";
    for (size_t i = 0; i < match.problems.size() && i < kShown; ++i)
      text += "\n  " + match.problems[i];
    if (match.problems.size() > kShown)
      text += "\n  ... and " + std::to_string(match.problems.size() - kShown) +
              " more";
    text += "\nmap names with names = {path: \"file name\"}, or skip file "
            "tensors with ignore = [\"pattern\"]";
    ctx.error(pathLoc, text);
    return failure();
  }
  config.checked = true;
  config.prefix = match.prefix;
  for (size_t i = 0; i < match.found.size(); ++i)
    if (!match.found[i])
      config.fresh.push_back(unsigned(i));
  config.skipped = match.skipped;
  return success();
}

/// The Hugging Face `config.json` of a model that is GPT-2 as transformers'
/// GPT2LMHeadModel builds it: by its checkpoint names exactly `wte`, `wpe`,
/// blocks `h.0` ... `h.{L-1}` (the standard library's nn.Block) and `ln_f`,
/// the head tied to `wte` (the model has no head of its own). Empty for any
/// other model: its export is the weights alone.
std::string gpt2Config(const Job &job) {
  // The adapters are not part of the model transformers builds (PEFT's
  // adapter_config.json describes them).
  std::map<std::string, const ParamInfo *> byName;
  size_t baseParams = 0;
  for (size_t i = 0; i < job.params.size(); ++i)
    if (!job.params[i].adapter) {
      byName[job.checkpointNames[i].name] = &job.params[i];
      ++baseParams;
    }
  auto shape = [&](llvm::StringRef name) -> llvm::ArrayRef<int64_t> {
    auto it = byName.find(name.str());
    return it == byName.end() ? llvm::ArrayRef<int64_t>()
                              : llvm::ArrayRef<int64_t>(it->second->type.shape);
  };
  llvm::ArrayRef<int64_t> wte = shape("wte.weight"), wpe = shape("wpe.weight");
  if (wte.size() != 2 || wpe.size() != 2 || wte[1] != wpe[1] ||
      shape("ln_f.weight").size() != 1 || shape("ln_f.bias").size() != 1)
    return "";
  std::vector<const ModelInstance *> blocks;
  for (const ParamInfo &p : job.params) {
    if (p.adapter)
      continue;
    const ModelInstance *block = p.owner;
    while (block && block->model != "nn.Block")
      block = block->parent;
    if (block && (blocks.empty() || blocks.back() != block))
      blocks.push_back(block);
  }
  // Every parameter is one of the four, or a block's under `h.i.`.
  if (blocks.empty() || byName.size() != baseParams ||
      baseParams != 4 + 12 * blocks.size())
    return "";
  for (size_t i = 0; i < job.params.size(); ++i) {
    if (job.params[i].adapter)
      continue;
    llvm::StringRef name = job.checkpointNames[i].name;
    if (name.starts_with("h.")) {
      unsigned index = 0;
      if (name.drop_front(2).consumeInteger(10, index) ||
          index >= blocks.size())
        return "";
    } else if (name != "wte.weight" && name != "wpe.weight" &&
               name != "ln_f.weight" && name != "ln_f.bias") {
      return "";
    }
  }
  const ModelInstance &first = *blocks.front();
  const Constant *heads = lookup(first.args, "heads");
  const Constant *ratio = lookup(first.args, "mlp_ratio");
  const ModelInstance *lnf = byName["ln_f.weight"]->owner;
  const Constant *eps = lookup(lnf->args, "eps");
  if (!heads || !ratio || !eps)
    return "";
  // The blocks' dropouts; the embeddings' is the program's own code.
  auto probability = [&](llvm::StringRef name) {
    const Constant *p = lookup(first.args, name);
    return p ? p->getNumber() : 0.0;
  };
  int64_t width = wte[1];
  llvm::json::Object config{
      {"architectures", llvm::json::Array{"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", wte[0]},
      {"n_positions", wpe[0]},
      {"n_ctx", wpe[0]},
      {"n_embd", width},
      {"n_layer", int64_t(blocks.size())},
      {"n_head", heads->getInt()},
      {"n_inner", ratio->getInt() == 4
                      ? llvm::json::Value(nullptr)
                      : llvm::json::Value(ratio->getInt() * width)},
      // dt's gelu is GPT-2's tanh approximation.
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", eps->getNumber()},
      {"resid_pdrop", probability("dropout_p")},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", probability("attention_dropout_p")},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(config))) << "\n";
  return text;
}

/// The config.json of transformers' LlamaForCausalLM for nn.Llama or
/// nn.LlamaTied, from its arguments.
std::string llamaConfig(const Job &job) {
  if (!isLlama(job))
    return "";
  const std::vector<NamedConstant> &args = job.model->args;
  auto integer = [&](llvm::StringRef name) -> llvm::json::Value {
    const Constant *c = lookup(args, name);
    return c ? llvm::json::Value(c->getInt()) : llvm::json::Value(nullptr);
  };
  auto number = [&](llvm::StringRef name) -> llvm::json::Value {
    const Constant *c = lookup(args, name);
    return c ? llvm::json::Value(c->getNumber()) : llvm::json::Value(nullptr);
  };
  // The rotary embedding has no table, so nothing bounds the positions; the
  // training sequence is the length the model has seen.
  const Constant *seq = lookup(job.data.args, "seq");
  int64_t positions = seq ? seq->getInt() : 0;
  // rope_scaling as transformers writes it: null, "linear" or "llama3".
  llvm::json::Value scaling = nullptr;
  const Constant *factor = lookup(args, "rope_factor");
  if (factor && factor->getNumber() != 1.0) {
    const Constant *original = lookup(args, "rope_original_max");
    if (original && original->getInt() > 0)
      scaling = llvm::json::Object{
          {"rope_type", "llama3"},
          {"factor", factor->getNumber()},
          {"low_freq_factor", number("rope_low_freq_factor")},
          {"high_freq_factor", number("rope_high_freq_factor")},
          {"original_max_position_embeddings", original->getInt()}};
    else
      scaling = llvm::json::Object{{"rope_type", "linear"},
                                   {"factor", factor->getNumber()}};
  }
  llvm::json::Object config{
      {"architectures", llvm::json::Array{"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", integer("vocab")},
      {"hidden_size", integer("width")},
      {"intermediate_size", integer("hidden")},
      {"num_hidden_layers", integer("depth")},
      {"num_attention_heads", integer("heads")},
      {"num_key_value_heads", integer("kv_heads")},
      {"hidden_act", "silu"},
      {"rms_norm_eps", number("eps")},
      {"rope_theta", number("rope_theta")},
      {"rope_scaling", std::move(scaling)},
      {"max_position_embeddings",
       positions ? llvm::json::Value(positions) : llvm::json::Value(2048)},
      {"attention_bias", false},
      {"attention_dropout", lookup(args, "attention_dropout_p")
                                ? number("attention_dropout_p")
                                : llvm::json::Value(0.0)},
      {"mlp_bias", false},
      {"tie_word_embeddings", isTiedLlama(job)},
      {"torch_dtype", "float32"}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(config))) << "\n";
  return text;
}

/// A model argument's value as JSON (null when the model has none).
llvm::json::Value argValue(const Job &job, llvm::StringRef name) {
  const Constant *c = lookup(job.model->args, name);
  if (!c)
    return nullptr;
  return c->isInt() ? llvm::json::Value(c->getInt())
                    : llvm::json::Value(c->getNumber());
}

/// A config.json's text, as transformers indents it.
std::string configText(llvm::json::Object config) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(config))) << "\n";
  return text;
}

/// BertConfig for nn.Bert (BertModel) and nn.BertClassifier
/// (BertForSequenceClassification).
std::string bertConfig(const Job &job) {
  if (!job.model || (job.model->model != "nn.Bert" &&
                     job.model->model != "nn.BertClassifier"))
    return "";
  bool classifier = job.model->model == "nn.BertClassifier";
  auto value = [&](llvm::StringRef name) { return argValue(job, name); };
  llvm::json::Object config{
      {"architectures",
       llvm::json::Array{classifier ? "BertForSequenceClassification"
                                    : "BertModel"}},
      {"model_type", "bert"},
      {"vocab_size", value("vocab")},
      {"hidden_size", value("width")},
      {"num_hidden_layers", value("depth")},
      {"num_attention_heads", value("heads")},
      {"intermediate_size", value("hidden")},
      {"hidden_act", "gelu"},
      {"max_position_embeddings", value("positions")},
      {"type_vocab_size", value("types")},
      {"layer_norm_eps", value("eps")},
      {"hidden_dropout_prob", value("dropout_p")},
      {"attention_probs_dropout_prob", value("attention_dropout_p")},
      {"position_embedding_type", "absolute"},
      {"initializer_range", 0.02},
      {"torch_dtype", "float32"}};
  if (classifier) {
    config["num_labels"] = value("classes");
    config["classifier_dropout"] = value("classifier_dropout_p");
  }
  return configText(std::move(config));
}

/// DistilBertConfig for nn.DistilBert (DistilBertModel) and
/// nn.DistilBertClassifier (DistilBertForSequenceClassification).
std::string distilBertConfig(const Job &job) {
  if (!job.model || (job.model->model != "nn.DistilBert" &&
                     job.model->model != "nn.DistilBertClassifier"))
    return "";
  bool classifier = job.model->model == "nn.DistilBertClassifier";
  auto value = [&](llvm::StringRef name) { return argValue(job, name); };
  llvm::json::Object config{
      {"architectures",
       llvm::json::Array{classifier ? "DistilBertForSequenceClassification"
                                    : "DistilBertModel"}},
      {"model_type", "distilbert"},
      {"vocab_size", value("vocab")},
      {"dim", value("width")},
      {"n_layers", value("depth")},
      {"n_heads", value("heads")},
      {"hidden_dim", value("hidden")},
      {"max_position_embeddings", value("positions")},
      {"dropout", value("dropout_p")},
      {"attention_dropout", value("attention_dropout_p")},
      {"activation", "gelu"},
      {"sinusoidal_pos_embds", false},
      {"initializer_range", 0.02},
      {"torch_dtype", "float32"}};
  if (classifier) {
    config["num_labels"] = value("classes");
    config["seq_classif_dropout"] = value("classifier_dropout_p");
  }
  return configText(std::move(config));
}

} // namespace

LogicalResult dt::sema::checkPretrained(SemaContext &ctx, KeyEvaluator &keys,
                                        const ast::Expr *expr, Job &job) {
  return PretrainedChecker(ctx, keys, job).check(expr);
}
