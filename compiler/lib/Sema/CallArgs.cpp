//===- CallArgs.cpp - Binding call arguments to parameters ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Python's rules, for every kind of call (builtins, models, data sources,
// optimizers, schedules, initialisers, forwards): positional arguments first,
// then named ones; each parameter at most once; required ones present.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

using namespace dt;
using namespace dt::sema;

FailureOr<std::vector<const ast::Field *>>
sema::bindCallArgs(SemaContext &ctx, llvm::ArrayRef<ast::Field> args,
                   llvm::ArrayRef<ParamSpec> params, llvm::StringRef callee,
                   llvm::SMLoc callLoc) {
  std::vector<const ast::Field *> bound(params.size(), nullptr);
  bool ok = true;
  bool seenNamed = false;
  size_t position = 0;
  for (const ast::Field &arg : args) {
    if (!arg.isNamed()) {
      if (seenNamed) {
        ctx.error(arg.getLoc(), "a positional argument cannot follow a named "
                                "one in the call of '" +
                                    callee + "'");
        ok = false;
        continue;
      }
      if (position >= params.size()) {
        ctx.error(arg.getLoc(),
                  "'" + callee + "' takes " +
                      (params.empty()
                           ? std::string("no arguments")
                           : "at most " + std::to_string(params.size()) +
                                 " argument" +
                                 (params.size() == 1 ? "" : "s")) +
                      " but " + std::to_string(args.size()) + " were given");
        return llvm::failure();
      }
      bound[position++] = &arg;
      continue;
    }
    seenNamed = true;
    auto it = llvm::find_if(
        params, [&](const ParamSpec &p) { return p.name == arg.name; });
    if (it == params.end()) {
      std::vector<std::string> names;
      for (const ParamSpec &p : params)
        names.push_back(p.name);
      ctx.error(arg.nameLoc, "'" + callee + "' has no argument named '" +
                                 arg.name + "'" + suggest(arg.name, names));
      ok = false;
      continue;
    }
    size_t index = it - params.begin();
    if (bound[index]) {
      ctx.error(arg.nameLoc, "argument '" + arg.name + "' of '" + callee +
                                 "' is given twice");
      ctx.note(bound[index]->getLoc(), "first given here");
      ok = false;
      continue;
    }
    bound[index] = &arg;
  }
  if (!ok)
    return llvm::failure();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].required && !bound[i]) {
      ctx.error(callLoc,
                "'" + callee + "' needs the argument '" + params[i].name + "'");
      return llvm::failure();
    }
  }
  return bound;
}
