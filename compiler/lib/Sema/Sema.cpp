//===- Sema.cpp - Semantic analysis of a .dt program ----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The order of analysis:
//   1. scopes: imports resolved depth-first from the main file (a cycle is
//      reported with its chain), each file's models and data sources named;
//   2. declarations: data sources, then every model of every file checked
//      generically (checkModelDecl);
//   3. the train block (with the parallel block) concretely, into a Job;
//      a parallel block without a train block is checked on its own;
//   4. the deploy blocks.
// Import errors stop the analysis (every later name would be unknown); model
// errors skip the concrete job, whose errors would repeat them.
//
//===----------------------------------------------------------------------===//

#include "dt/Sema/Sema.h"

#include "Checks.h"

#include "llvm/Support/thread.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {
class Analyzer {
public:
  Analyzer(ModuleLoader &loader, const AnalyzeOptions &options)
      : ctx(std::make_unique<SemaContext>(loader)) {
    ctx->options = options;
  }

  llvm::FailureOr<std::unique_ptr<Program>> run(const LoadedModule &main);

private:
  /// Builds the scope of `module` and, first, of everything it imports.
  FailureOr<ModuleScope *> buildScope(const LoadedModule &module,
                                      llvm::StringRef name);
  LogicalResult checkSource(const ModuleScope &scope,
                            const ast::SourceDecl &decl);

  std::unique_ptr<SemaContext> ctx;
  /// The files whose imports are being resolved, outermost first.
  std::vector<std::pair<const LoadedModule *, const ast::ImportDecl *>> stack;
};
} // namespace

FailureOr<ModuleScope *> Analyzer::buildScope(const LoadedModule &module,
                                              llvm::StringRef name) {
  if (ModuleScope *known = ctx->scopeOf.lookup(&module))
    return known;
  ctx->scopes.push_back(std::make_unique<ModuleScope>());
  ModuleScope *scope = ctx->scopes.back().get();
  scope->loaded = &module;
  scope->name = module.isStdlib ? module.stdlibName : name.str();
  scope->isStdlib = module.isStdlib;
  bool ok = true;

  stack.push_back({&module, nullptr});
  for (const ast::ImportDecl &import : module.ast->getImports()) {
    stack.back().second = &import;
    if (scope->imports.count(import.alias)) {
      ctx->error(import.aliasLoc, "'" + import.alias + "' is imported twice");
      ok = false;
      continue;
    }
    llvm::FailureOr<const LoadedModule *> imported =
        ctx->loader.resolveImport(module, import);
    if (failed(imported)) {
      ok = false;
      continue;
    }
    auto onStack = llvm::find_if(
        stack, [&](const auto &entry) { return entry.first == *imported; });
    if (onStack != stack.end()) {
      ctx->error(import.pathLoc,
                 "import cycle: " + (*imported)->ast->getFilename() +
                     " imports itself through this file");
      for (auto it = onStack; it != stack.end(); ++it)
        ctx->note(it->second->loc, it->first->ast->getFilename() +
                                       " imports '" + it->second->path + "'");
      ok = false;
      continue;
    }
    FailureOr<ModuleScope *> child = buildScope(**imported, import.alias);
    if (failed(child)) {
      ok = false;
      continue;
    }
    scope->imports[import.alias] = *child;
  }
  stack.pop_back();

  for (const auto &decl : module.ast->getDecls()) {
    llvm::StringRef declName;
    llvm::SMLoc loc;
    if (const auto *model = llvm::dyn_cast<ast::ModelDecl>(decl.get())) {
      declName = model->getName();
      loc = model->getNameLoc();
    } else if (const auto *source =
                   llvm::dyn_cast<ast::SourceDecl>(decl.get())) {
      declName = source->getName();
      loc = source->getNameLoc();
    } else {
      continue;
    }
    if (scope->models.count(declName) || scope->sources.count(declName)) {
      ctx->error(loc, "'" + declName + "' is declared twice in this file");
      ok = false;
      continue;
    }
    if (scope->imports.count(declName)) {
      ctx->error(loc, "'" + declName + "' is also the name of an import");
      ok = false;
      continue;
    }
    if (const auto *model = llvm::dyn_cast<ast::ModelDecl>(decl.get()))
      scope->models[declName] = model;
    else
      scope->sources[declName] = llvm::cast<ast::SourceDecl>(decl.get());
  }
  ctx->scopeOf[&module] = scope;
  if (!ok)
    return failure();
  return scope;
}

LogicalResult Analyzer::checkSource(const ModuleScope &scope,
                                    const ast::SourceDecl &decl) {
  static const char *const readers[] = {"idx", "tokens", "token_classes",
                                        "synthetic"};
  std::vector<std::string> names(std::begin(readers), std::end(readers));
  if (!llvm::is_contained(names, decl.getName())) {
    ctx->error(decl.getNameLoc(), "no data reader named '" + decl.getName() +
                                      "'; the runtime reads idx, tokens, "
                                      "token_classes and synthetic" +
                                      suggest(decl.getName(), names));
    return failure();
  }
  bool ok = true;
  Evaluator ev(*ctx, Evaluator::Mode::Generic);
  ArgList args;
  for (const ast::ArgDecl &arg : decl.getArgs()) {
    EvalValue value;
    if (arg.defaultValue) {
      Frame frame;
      frame.module = &scope;
      frame.args = &args;
      FailureOr<EvalValue> v = ev.eval(*arg.defaultValue, frame);
      if (failed(v)) {
        ok = false;
        continue;
      }
      value = *v;
    }
    FailureOr<EvalValue> checked =
        ev.checkArgType(arg, value, arg.loc, decl.getName());
    if (failed(checked)) {
      ok = false;
      continue;
    }
    args.push_back({arg.name, *checked});
  }
  for (const ast::SourceField &field : decl.getFields()) {
    if (!parseDType(field.type.name)) {
      ctx->error(field.type.loc, "unknown dtype '" + field.type.name +
                                     "' for the field '" + field.name + "'");
      ok = false;
    }
    for (const ast::ExprPtr &dim : field.type.dims)
      if (!llvm::isa<ast::NameExpr>(*dim) && !llvm::isa<ast::IntExpr>(*dim)) {
        ctx->error(dim->getLoc(), "a sample dimension is an argument, an "
                                  "integer or a name for a size known at "
                                  "run time");
        ok = false;
      }
  }
  return success(ok);
}

llvm::FailureOr<std::unique_ptr<Program>>
Analyzer::run(const LoadedModule &main) {
  // 1. Scopes.
  FailureOr<ModuleScope *> mainScope = buildScope(main, "");
  if (failed(mainScope))
    return failure();

  // 2. Declarations of every file.
  const ast::TrainDecl *train = nullptr;
  const ast::ParallelDecl *parallel = nullptr;
  std::vector<const ast::DeployDecl *> deploys;
  bool ok = true;
  for (const auto &scope : ctx->scopes) {
    bool isMain = scope.get() == *mainScope;
    for (const auto &decl : scope->loaded->ast->getDecls()) {
      switch (decl->getKind()) {
      case ast::Decl::Kind::Model:
        break;
      case ast::Decl::Kind::Source:
        ok &=
            succeeded(checkSource(*scope, llvm::cast<ast::SourceDecl>(*decl)));
        break;
      case ast::Decl::Kind::Train:
      case ast::Decl::Kind::Parallel:
      case ast::Decl::Kind::Deploy: {
        if (!isMain) {
          ctx->error(decl->getLoc(), "an imported file declares models and "
                                     "data sources only; train, parallel and "
                                     "deploy blocks belong to the main file");
          ok = false;
          break;
        }
        if (const auto *t = llvm::dyn_cast<ast::TrainDecl>(decl.get())) {
          if (train) {
            ctx->error(t->getLoc(), "a file has at most one train block");
            ctx->note(train->getLoc(), "the first train block");
            ok = false;
          }
          train = t;
        } else if (const auto *p =
                       llvm::dyn_cast<ast::ParallelDecl>(decl.get())) {
          if (parallel) {
            ctx->error(p->getLoc(), "a file has at most one parallel block");
            ctx->note(parallel->getLoc(), "the first parallel block");
            ok = false;
          }
          parallel = p;
        } else {
          const auto *d = llvm::cast<ast::DeployDecl>(decl.get());
          for (const ast::DeployDecl *other : deploys)
            if (other->getTarget() == d->getTarget()) {
              ctx->error(d->getTargetLoc(),
                         "a second deploy block for '" + d->getTarget() + "'");
              ctx->note(other->getTargetLoc(), "the first one");
              ok = false;
            }
          deploys.push_back(d);
        }
        break;
      }
      }
    }
  }
  for (const auto &scope : ctx->scopes)
    for (const auto &decl : scope->loaded->ast->getDecls())
      if (const auto *model = llvm::dyn_cast<ast::ModelDecl>(decl.get()))
        ok &= succeeded(checkModelDecl(*ctx, *scope, *model));

  // 3. The job.
  auto trace = std::make_shared<TraceContext>();
  std::unique_ptr<Job> job;
  Job standalone;
  bool layoutKnown = ok;
  if (ok && train) {
    job = std::make_unique<Job>();
    layoutKnown = succeeded(
        checkTrain(*ctx, **mainScope, *train, parallel, *job, *trace));
  } else if (ok && parallel) {
    layoutKnown = succeeded(
        checkParallel(*ctx, **mainScope, *parallel, standalone, nullptr));
  }
  ok &= layoutKnown;

  // 4. Deploy blocks (independent of the model; the rank count is compared
  // with the mesh only when the mesh is known).
  const ParallelConfig &layout = job ? job->parallel : standalone.parallel;
  std::vector<DeployConfig> deployConfigs;
  for (const ast::DeployDecl *deploy : deploys) {
    DeployConfig config;
    // A job compiled for another world size (a restart on other hosts) is
    // no longer the launch its deploy blocks describe.
    bool compare = layoutKnown && !ctx->options.worldSize;
    if (succeeded(checkDeploy(*ctx, **mainScope, *deploy,
                              compare ? &layout : nullptr, config)))
      deployConfigs.push_back(std::move(config));
    else
      ok = false;
  }

  if (!ok || ctx->hasErrors())
    return failure();
  if (job) {
    job->deploys = std::move(deployConfigs);
    trace->ctx = std::move(ctx);
    job->traceContext = std::move(trace);
  }
  return std::make_unique<Program>(main, std::move(job));
}

llvm::FailureOr<std::unique_ptr<Program>>
dt::analyze(ModuleLoader &loader, const LoadedModule &main,
            const AnalyzeOptions &options) {
  return Analyzer(loader, options).run(main);
}

void dt::runOnLargeStack(llvm::function_ref<void()> body) {
  // Parse trees and ASTs are bounded by the parser's limits; this leaves
  // ample room for every recursion over them, sanitizers included.
  constexpr unsigned kStackSize = 256u << 20;
  llvm::thread worker(std::optional<unsigned>(kStackSize), [&] { body(); });
  worker.join();
}
