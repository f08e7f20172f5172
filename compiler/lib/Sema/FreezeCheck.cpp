//===- FreezeCheck.cpp - `freeze = [...]` ---------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `freeze = ["blocks[0:6]", "wte", "*.ln_*"]` names parameters that do not
// train: they keep their initial (or pretrained) values and get no gradient,
// no optimizer state and no gradient communication. A pattern is a path of
// the model written as in `parallel`'s paths (a layer, a list, an item
// `blocks[3]` or a slice `blocks[0:6]`, a parameter) and may hold `*`, `?`
// and `[...]` classes of glob patterns; it freezes every parameter at or
// below what it matches. A pattern that freezes nothing, and a freeze that
// leaves nothing to train, are errors. An optimizer's `no_decay` names
// parameters with the same patterns (matchParamPaths).
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "llvm/Support/GlobPattern.h"

#include <set>

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {

/// The largest list index under `prefix.` among the parameters, plus one.
int64_t listLength(const Job &job, llvm::StringRef prefix) {
  int64_t length = 0;
  for (const ParamInfo &p : job.params) {
    llvm::StringRef rest = p.name;
    if (!rest.consume_front(prefix) || !rest.consume_front("."))
      continue;
    int64_t index = 0;
    if (!rest.consumeInteger(10, index))
      length = std::max(length, index + 1);
  }
  return length;
}

/// Expands `blocks[0:2].attn` to `blocks.0.attn`, `blocks.1.attn`; `[i]` to
/// `.i`. Brackets that are not indices or slices stay glob classes. Returns
/// false with `why` for a malformed slice.
bool expand(const Job &job, llvm::StringRef pattern, std::string done,
            std::vector<std::string> &out, std::string &why) {
  size_t open = pattern.find('[');
  if (open == llvm::StringRef::npos) {
    out.push_back(done + pattern.str());
    return true;
  }
  size_t close = pattern.find(']', open);
  llvm::StringRef inside =
      close == llvm::StringRef::npos ? "" : pattern.slice(open + 1, close);
  auto [lo, hi] = inside.split(':');
  int64_t a = 0, b = 0;
  bool slice = inside.contains(':');
  bool index = !slice && !inside.empty() && !inside.getAsInteger(10, a);
  if (!slice && !index) {
    // A glob class such as [0-3]: keep it.
    if (close == llvm::StringRef::npos)
      close = pattern.size() - 1;
    return expand(job, pattern.drop_front(close + 1),
                  done + pattern.take_front(close + 1).str(), out, why);
  }
  std::string list = done + pattern.take_front(open).str();
  if (slice) {
    int64_t length = listLength(job, list);
    if ((!lo.empty() && lo.getAsInteger(10, a)) ||
        (!hi.empty() && hi.getAsInteger(10, b))) {
      why = "'[" + inside.str() + "]' is not a slice of integers";
      return false;
    }
    if (hi.empty())
      b = length;
    if (a < 0 || a >= b || b > length) {
      why = "the slice [" + inside.str() + "] of '" + list + "' (" +
            std::to_string(length) + " items) is empty or out of range";
      return false;
    }
  } else {
    if (a < 0) // blocks[-1]: from the end, as in paths
      a += listLength(job, list);
    b = a + 1;
  }
  for (int64_t i = a; i < b; ++i)
    if (!expand(job, pattern.drop_front(close + 1),
                list + "." + std::to_string(i), out, why))
      return false;
  return true;
}

/// What a pattern that names nothing may have meant: `candidates` and, for a
/// pattern `*.a.b` written against the end of paths (as transformers'
/// module names are, `*.attention.self.query`), `*.` and the same number of
/// trailing components of each candidate or a layer above it
/// (`*.attention.attn.query`, `*.mlp`), shallower layers first.
std::vector<std::string> suffixCandidates(llvm::StringRef pattern,
                                          llvm::ArrayRef<std::string> paths) {
  std::vector<std::string> out(paths.begin(), paths.end());
  llvm::StringRef tail = pattern;
  if (!tail.consume_front("*."))
    return out;
  size_t parts = size_t(tail.count('.')) + 1;
  std::vector<llvm::SmallVector<llvm::StringRef>> split(paths.size());
  size_t deepest = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    llvm::StringRef(paths[i]).split(split[i], '.');
    deepest = std::max(deepest, split[i].size());
  }
  std::set<std::string> seen;
  for (size_t depth = parts; depth <= deepest; ++depth)
    for (const auto &pieces : split) {
      if (pieces.size() < depth)
        continue;
      std::string suffix = "*";
      for (size_t i = depth - parts; i < depth; ++i)
        suffix += "." + pieces[i].str();
      if (seen.insert(suffix).second)
        out.push_back(suffix);
    }
  return out;
}

} // namespace

std::vector<std::string> dt::sema::parameterPaths(const Job &job) {
  std::set<std::string> paths;
  for (const ParamInfo &p : job.params) {
    llvm::StringRef name = p.name;
    for (size_t dot = name.find('.'); dot != llvm::StringRef::npos;
         dot = name.find('.', dot + 1))
      paths.insert(name.take_front(dot).str());
    paths.insert(p.name);
  }
  return std::vector<std::string>(paths.begin(), paths.end());
}

FailureOr<std::vector<bool>> dt::sema::matchModelPaths(
    SemaContext &ctx, KeyEvaluator &keys, const ast::Expr &expr,
    const Job &job, llvm::ArrayRef<std::string> names,
    llvm::ArrayRef<std::string> candidates, llvm::StringRef what,
    llvm::StringRef noun) {
  std::vector<const ast::Expr *> items;
  if (const auto *list = llvm::dyn_cast<ast::ListExpr>(&expr))
    for (const ast::ExprPtr &item : list->getItems())
      items.push_back(item.get());
  else
    items.push_back(&expr);

  bool ok = true;
  std::vector<bool> matched(names.size(), false);
  for (const ast::Expr *item : items) {
    FailureOr<std::string> text =
        keys.string(*item, "a path of " + what.str());
    if (failed(text)) {
      ok = false;
      continue;
    }
    std::vector<std::string> expanded;
    std::string why;
    if (!expand(job, *text, "", expanded, why)) {
      ctx.error(item->getLoc(), "'" + *text + "' in " + what + ": " + why);
      ok = false;
      continue;
    }
    bool any = false, valid = true;
    for (const std::string &pattern : expanded) {
      // The pattern, or anything below what it names.
      llvm::Expected<llvm::GlobPattern> exact =
          llvm::GlobPattern::create(pattern);
      llvm::Expected<llvm::GlobPattern> below =
          llvm::GlobPattern::create(pattern + ".*");
      if (!exact || !below) {
        llvm::consumeError(exact.takeError());
        llvm::consumeError(below.takeError());
        ctx.error(item->getLoc(),
                  "'" + *text + "' in " + what + " is not a valid pattern");
        ok = valid = false;
        break;
      }
      for (size_t i = 0; i < names.size(); ++i)
        if (exact->match(names[i]) || below->match(names[i])) {
          matched[i] = true;
          any = true;
        }
    }
    if (valid && !any) {
      ctx.error(item->getLoc(),
                "'" + *text + "' in " + what + " names no " + noun +
                    " of the model" +
                    suggest(expanded.front(),
                            suffixCandidates(expanded.front(), candidates)));
      ok = false;
    }
  }
  if (!ok)
    return failure();
  return matched;
}

FailureOr<std::vector<bool>>
dt::sema::matchParamPaths(SemaContext &ctx, KeyEvaluator &keys,
                          const ast::Expr &expr, const Job &job,
                          llvm::StringRef what) {
  std::vector<std::string> names;
  for (const ParamInfo &p : job.params)
    names.push_back(p.name);
  return matchModelPaths(ctx, keys, expr, job, names, parameterPaths(job),
                         what, "parameter");
}

LogicalResult dt::sema::checkFreeze(SemaContext &ctx, KeyEvaluator &keys,
                                    const ast::Expr &expr, Job &job) {
  FailureOr<std::vector<bool>> frozen =
      matchParamPaths(ctx, keys, expr, job, "'freeze'");
  if (failed(frozen))
    return failure();
  if (llvm::all_of(*frozen, [](bool f) { return f; })) {
    ctx.error(expr.getLoc(), "'freeze' freezes every parameter of the "
                             "model: nothing would train");
    return failure();
  }
  for (size_t i = 0; i < job.params.size(); ++i)
    job.params[i].frozen = (*frozen)[i];
  return success();
}
