//===- BlockValues.cpp - Key values and model paths -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Block keys are evaluated by the concrete evaluator (so `6e-4`, `1.0 / 255`,
// `(0.9, 0.95)` and records work as everywhere else) and converted to plain
// constants; model paths are resolved structurally, because a path names a
// layer or a parameter rather than computing a value.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "llvm/ADT/StringExtras.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;

FailureOr<Constant> sema::toConstant(SemaContext &ctx, const EvalValue &value,
                                     llvm::SMLoc loc) {
  switch (value.kind) {
  case EvalValue::Kind::Int:
    if (std::optional<int64_t> c =
            ctx.syms.resolve(value.intValue).getConstant())
      return Constant::getInt(*c);
    break;
  case EvalValue::Kind::Float:
    if (value.floatValue)
      return Constant::getFloat(*value.floatValue);
    break;
  case EvalValue::Kind::Bool:
    if (value.boolValue)
      return Constant::getBool(*value.boolValue);
    break;
  case EvalValue::Kind::String:
    if (value.stringValue)
      return Constant::getString(*value.stringValue);
    break;
  case EvalValue::Kind::Tuple:
  case EvalValue::Kind::List:
  case EvalValue::Kind::Record: {
    std::vector<Constant> items;
    for (const EvalValue &item : value.items) {
      FailureOr<Constant> c = toConstant(ctx, item, loc);
      if (failed(c))
        return failure();
      items.push_back(std::move(*c));
    }
    if (value.kind == EvalValue::Kind::List)
      return Constant::getList(std::move(items));
    if (value.kind == EvalValue::Kind::Record)
      return Constant::getRecord(value.keys, std::move(items));
    return Constant::getTuple(std::move(items), value.keys);
  }
  default:
    break;
  }
  ctx.error(loc, "expected a constant here, not " + describe(value, ctx.syms));
  return failure();
}

FailureOr<Constant> KeyEvaluator::constant(const ast::Expr &expr) {
  FailureOr<EvalValue> value = ev.eval(expr, frame);
  if (failed(value))
    return failure();
  return toConstant(ctx, *value, expr.getLoc());
}

FailureOr<int64_t> KeyEvaluator::integer(const ast::Expr &expr,
                                         llvm::StringRef what, int64_t min) {
  FailureOr<Constant> c = constant(expr);
  if (failed(c))
    return failure();
  if (!c->isInt()) {
    ctx.error(expr.getLoc(), what + " must be an integer, not " + c->str());
    return failure();
  }
  if (c->getInt() < min) {
    ctx.error(expr.getLoc(),
              what + " must be " +
                  (min == 1 ? std::string("positive")
                            : "at least " + std::to_string(min)) +
                  ", not " + std::to_string(c->getInt()));
    return failure();
  }
  return c->getInt();
}

FailureOr<double> KeyEvaluator::number(const ast::Expr &expr,
                                       llvm::StringRef what) {
  FailureOr<Constant> c = constant(expr);
  if (failed(c))
    return failure();
  if (!c->isNumber()) {
    ctx.error(expr.getLoc(), what + " must be a number, not " + c->str());
    return failure();
  }
  return c->getNumber();
}

FailureOr<bool> KeyEvaluator::boolean(const ast::Expr &expr,
                                      llvm::StringRef what) {
  FailureOr<Constant> c = constant(expr);
  if (failed(c))
    return failure();
  if (c->getKind() != Constant::Kind::Bool) {
    ctx.error(expr.getLoc(), what + " must be true or false, not " + c->str());
    return failure();
  }
  return c->getBool();
}

FailureOr<std::string> KeyEvaluator::string(const ast::Expr &expr,
                                            llvm::StringRef what) {
  FailureOr<Constant> c = constant(expr);
  if (failed(c))
    return failure();
  if (c->getKind() != Constant::Kind::String) {
    ctx.error(expr.getLoc(), what + " must be a string, not " + c->str());
    return failure();
  }
  return c->getString().str();
}

FailureOr<std::string> KeyEvaluator::name(const ast::Expr &expr,
                                          llvm::StringRef what) {
  if (const auto *name = llvm::dyn_cast<ast::NameExpr>(&expr))
    return name->getName().str();
  if (const auto *str = llvm::dyn_cast<ast::StringExpr>(&expr))
    return str->getValue().str();
  ctx.error(expr.getLoc(), what + " must be a name, such as " +
                               (what.contains("precision") ? "bf16" : "dp") +
                               ", not " + ast::toSource(expr));
  return failure();
}

FailureOr<std::vector<const ast::Field *>>
KeyEvaluator::record(const ast::Expr &expr, llvm::StringRef what,
                     llvm::ArrayRef<std::pair<llvm::StringRef, bool>> allowed) {
  const auto *rec = llvm::dyn_cast<ast::RecordExpr>(&expr);
  std::string keys;
  std::vector<std::string> names;
  for (const auto &[key, required] : allowed) {
    keys += (keys.empty() ? "" : ", ") + key.str() + ": ...";
    names.push_back(key.str());
  }
  if (!rec) {
    ctx.error(expr.getLoc(), what + " must be a record {" + keys + "}");
    return failure();
  }
  std::vector<const ast::Field *> result(allowed.size(), nullptr);
  bool ok = true;
  for (const ast::Field &field : rec->getFields()) {
    auto it = llvm::find(names, field.name);
    if (it == names.end()) {
      ctx.error(field.nameLoc, what + " has no key '" + field.name +
                                   "' (keys: " + llvm::join(names, ", ") + ")" +
                                   suggest(field.name, names));
      ok = false;
      continue;
    }
    size_t i = it - names.begin();
    if (result[i]) {
      ctx.error(field.nameLoc, "'" + field.name + "' appears twice in " + what);
      ctx.note(result[i]->nameLoc, "first here");
      ok = false;
      continue;
    }
    result[i] = &field;
  }
  for (size_t i = 0; ok && i < allowed.size(); ++i) {
    if (allowed[i].second && !result[i]) {
      ctx.error(expr.getLoc(),
                what + " needs the key '" + allowed[i].first + "'");
      ok = false;
    }
  }
  if (!ok)
    return failure();
  return result;
}

std::vector<const Instance *> PathTarget::layers() const {
  std::vector<const Instance *> result;
  if (kind == Kind::Layer)
    result.push_back(layer);
  else if (kind == Kind::Layers)
    for (int64_t i = lo; i < hi; ++i)
      result.push_back(list->items[i].get());
  return result;
}

/// Looks up `name` in `layer`: a child (layer or list) or a parameter.
static FailureOr<PathTarget> lookupIn(SemaContext &ctx, const Instance &layer,
                                      llvm::StringRef name, llvm::SMLoc loc) {
  PathTarget target;
  if (const InstanceChild *child = layer.findChild(name)) {
    if (child->isList) {
      target.kind = PathTarget::Kind::Layers;
      target.list = child;
      target.lo = 0;
      target.hi = child->items.size();
      target.layer = &layer;
      target.text = childPath(layer, name, std::nullopt);
    } else {
      target.kind = PathTarget::Kind::Layer;
      target.layer = child->items[0].get();
      target.text = target.layer->path;
    }
    return target;
  }
  if (const InstanceParam *param = layer.findParam(name)) {
    if (!param->present) {
      ctx.error(loc, "'" + name + "' of " + layer.describe() +
                         " is absent (its condition is false)");
      return failure();
    }
    target.kind = PathTarget::Kind::Param;
    target.layer = &layer;
    target.param = param;
    target.text = childPath(layer, name, std::nullopt);
    return target;
  }
  std::vector<std::string> names;
  for (const auto &member : layer.decl->getMembers())
    names.push_back(member->getName().str());
  ctx.error(loc, "'" + name + "' is not a member of " + layer.describe() +
                     suggest(name, names));
  return failure();
}

FailureOr<PathTarget> sema::resolvePath(SemaContext &ctx, const ast::Expr &expr,
                                        const Instance &root) {
  if (const auto *name = llvm::dyn_cast<ast::NameExpr>(&expr)) {
    if (name->getName() == "model") {
      PathTarget target;
      target.layer = &root;
      return target;
    }
    return lookupIn(ctx, root, name->getName(), name->getLoc());
  }
  auto baseOf = [&](const ast::Expr &base) -> FailureOr<PathTarget> {
    return resolvePath(ctx, base, root);
  };
  if (const auto *member = llvm::dyn_cast<ast::MemberExpr>(&expr)) {
    FailureOr<PathTarget> base = baseOf(member->getBase());
    if (failed(base))
      return failure();
    if (base->kind != PathTarget::Kind::Layer) {
      ctx.error(member->getLoc(),
                base->kind == PathTarget::Kind::Layers
                    ? "'" + base->text +
                          "' is a list of layers; pick one with [i]"
                    : "a parameter has no members");
      return failure();
    }
    return lookupIn(ctx, *base->layer, member->getName(), member->getLoc());
  }
  auto bound = [&](const ast::Expr *e, int64_t dflt) -> FailureOr<int64_t> {
    if (!e)
      return dflt;
    const auto *lit = llvm::dyn_cast<ast::IntExpr>(e);
    const auto *neg = llvm::dyn_cast<ast::NegExpr>(e);
    if (lit)
      return lit->getValue();
    if (neg)
      if (const auto *inner = llvm::dyn_cast<ast::IntExpr>(&neg->getOperand()))
        if (inner->getValue() != INT64_MIN)
          return -inner->getValue();
    ctx.error(e->getLoc(), "a path index must be an integer literal");
    return failure();
  };
  if (const auto *index = llvm::dyn_cast<ast::IndexExpr>(&expr)) {
    FailureOr<PathTarget> base = baseOf(index->getBase());
    if (failed(base))
      return failure();
    FailureOr<int64_t> i = bound(&index->getIndex(), 0);
    if (failed(i))
      return failure();
    if (base->kind != PathTarget::Kind::Layers) {
      ctx.error(index->getLoc(), "only a list of layers can be indexed in a "
                                 "path");
      return failure();
    }
    int64_t size = base->hi - base->lo;
    int64_t k = *i < 0 ? *i + size : *i;
    if (k < 0 || k >= size) {
      ctx.error(index->getIndex().getLoc(),
                "index " + std::to_string(*i) + " is out of range for '" +
                    base->text + "', a list of " + std::to_string(size) +
                    " layers");
      return failure();
    }
    PathTarget target;
    target.layer = base->list->items[base->lo + k].get();
    target.text = target.layer->path;
    return target;
  }
  if (const auto *slice = llvm::dyn_cast<ast::SliceExpr>(&expr)) {
    FailureOr<PathTarget> base = baseOf(slice->getBase());
    if (failed(base))
      return failure();
    if (base->kind != PathTarget::Kind::Layers) {
      ctx.error(slice->getLoc(), "only a list of layers can be sliced in a "
                                 "path");
      return failure();
    }
    int64_t size = base->hi - base->lo;
    FailureOr<int64_t> lo = bound(slice->getLo(), 0);
    FailureOr<int64_t> hi = bound(slice->getHi(), size);
    if (failed(lo) || failed(hi))
      return failure();
    int64_t a = *lo < 0 ? *lo + size : *lo, b = *hi < 0 ? *hi + size : *hi;
    if (a < 0 || b > size || a >= b) {
      ctx.error(slice->getLoc(), "slice [" + std::to_string(*lo) + ":" +
                                     std::to_string(*hi) + "] of '" +
                                     base->text + "' (" + std::to_string(size) +
                                     " layers) is empty or out of range");
      return failure();
    }
    PathTarget target = *base;
    target.lo = base->lo + a;
    target.hi = base->lo + b;
    target.text =
        childPath(*base->layer, base->list->member->getName(), std::nullopt) +
        "[" + std::to_string(target.lo) + ":" + std::to_string(target.hi) + "]";
    return target;
  }
  ctx.error(expr.getLoc(), "expected a path into the model, such as "
                           "model.blocks[0:4] or model.wte.weight");
  return failure();
}
