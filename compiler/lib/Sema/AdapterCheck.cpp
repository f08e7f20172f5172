//===- AdapterCheck.cpp - `adapters = nn.lora(...)` -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `adapters = nn.lora(rank = 8, alpha = 16, targets = ["*.attn.qkv"])` puts
// low-rank adapters (LoRA) on the Linear layers the targets name: a target is
// a path of the model written as in `freeze` (slices, indices, globs) and
// adapts every nn.Linear at or below what it names. Those layers become
// nn.LoraLinear (the standard library), y = x W^T + b + (x A^T) B^T ·
// alpha/rank, and every parameter but the adapters' A and B is frozen, so the
// base weights stay bit for bit as loaded. The adapters are ordinary
// parameters after that: they shard (B with a column-parallel weight, A with
// a row-parallel one), are saved, resumed and exported on any layout.
//
// The targets are matched against the model as declared; the model is then
// instantiated again with the adapted layers in place (TrainCheck).
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {

/// The paths of the standard library's Linear layers.
void collectLinear(const ModelInstance &node,
                   std::vector<std::string> &linear) {
  if (node.model == "nn.Linear")
    linear.push_back(node.path);
  for (const ModelInstance::Child &child : node.children)
    for (const auto &item : child.items)
      collectLinear(*item, linear);
}

} // namespace

LogicalResult dt::sema::checkAdapters(SemaContext &ctx, KeyEvaluator &keys,
                                      const ast::Expr &expr, Job &job) {
  const auto *call = llvm::dyn_cast<ast::CallExpr>(&expr);
  if (!call || ast::toSource(call->getCallee()) != "nn.lora") {
    ctx.error(expr.getLoc(), "'adapters' must be low-rank adapters, such as "
                             "nn.lora(rank = 8, alpha = 16, targets = "
                             "[\"*.attn.qkv\"])");
    return failure();
  }
  std::vector<ParamSpec> specs = {
      {"rank", false}, {"alpha", false}, {"dropout", false}, {"targets"}};
  FailureOr<std::vector<const ast::Field *>> bound =
      bindCallArgs(ctx, call->getArgs(), specs, "nn.lora", call->getLoc());
  if (failed(bound))
    return failure();
  AdapterConfig config;
  config.loc = ctx.diag.resolve(expr.getLoc());
  bool ok = true;
  if (const ast::Field *f = (*bound)[0]) {
    FailureOr<int64_t> rank =
        keys.integer(*f->value, "the rank of nn.lora", 1);
    ok &= succeeded(rank);
    if (succeeded(rank))
      config.rank = *rank;
  }
  // PEFT's default alpha is 8 whatever the rank.
  if (const ast::Field *f = (*bound)[1]) {
    FailureOr<double> alpha = keys.number(*f->value, "the alpha of nn.lora");
    if (succeeded(alpha) && *alpha <= 0) {
      ctx.error(f->value->getLoc(), "the alpha of nn.lora must be positive");
      alpha = failure();
    }
    ok &= succeeded(alpha);
    if (succeeded(alpha))
      config.alpha = *alpha;
  }
  if (const ast::Field *f = (*bound)[2]) {
    FailureOr<double> dropout =
        keys.number(*f->value, "the dropout of nn.lora");
    if (succeeded(dropout) && !(*dropout >= 0 && *dropout < 1)) {
      ctx.error(f->value->getLoc(),
                "the dropout of nn.lora is a probability in [0, 1)");
      dropout = failure();
    }
    ok &= succeeded(dropout);
    if (succeeded(dropout))
      config.dropout = *dropout;
  }
  if (!ok)
    return failure();

  std::vector<std::string> linear;
  collectLinear(*job.model, linear);
  FailureOr<std::vector<bool>> matched =
      matchModelPaths(ctx, keys, *(*bound)[3]->value, job, linear, linear,
                      "'targets' of nn.lora", "nn.Linear layer");
  if (failed(matched))
    return failure();
  for (size_t i = 0; i < linear.size(); ++i)
    if ((*matched)[i]) {
      config.layers.push_back(linear[i]);
      ctx.adapted[linear[i]] = {config.rank, config.alpha, config.dropout};
    }
  job.adapters = std::move(config);
  return success();
}

void dt::sema::freezeAllButAdapters(Job &job) {
  for (ParamInfo &p : job.params) {
    llvm::StringRef leaf = llvm::StringRef(p.name).rsplit('.').second;
    p.adapter = p.owner->model == "nn.LoraLinear" &&
                (leaf == "lora_A" || leaf == "lora_B");
    p.frozen = !p.adapter;
  }
}
