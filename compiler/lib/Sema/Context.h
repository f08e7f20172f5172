//===- Context.h - State shared by Sema's parts -----------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The modules' scopes, the symbolic-integer context and the reporter. The
// reporter is where "point at the user's code" is implemented: while Sema
// evaluates inside a standard-library model it keeps a stack of sites (the
// user's call or member that led there); an error located in the standard
// library is reported at the innermost user site, with a note at the line in
// the library. Identical errors (same place, same text) are reported once.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_CONTEXT_H
#define DT_LIB_SEMA_CONTEXT_H

#include "SymExpr.h"

#include "dt/Sema/ModuleLoader.h"
#include "dt/Sema/Sema.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <set>

namespace dt::sema {

/// The names a file declares and imports.
struct ModuleScope {
  const LoadedModule *loaded = nullptr;
  /// How other files name it: `nn`, the import alias; empty for the main file.
  std::string name;
  bool isStdlib = false;
  llvm::StringMap<const ast::ModelDecl *> models;
  llvm::StringMap<const ast::SourceDecl *> sources;
  llvm::StringMap<const ModuleScope *> imports;

  /// `nn.Linear` for `Linear` in nn; `MLP` in the main file.
  std::string qualify(llvm::StringRef declName) const;
};

/// "; did you mean 'x'?" for the candidate closest to `name`, or "".
std::string suggest(llvm::StringRef name,
                    llvm::ArrayRef<std::string> candidates);

/// State shared by Sema's parts.
class SemaContext {
  struct Site {
    llvm::SMLoc loc;
    std::string what;
  };

public:
  explicit SemaContext(ModuleLoader &loader)
      : loader(loader), diag(loader.getDiagnostics()) {}

  ModuleLoader &loader;
  DiagnosticEngine &diag;
  SymContext syms;
  AnalyzeOptions options;

  std::vector<std::unique_ptr<ModuleScope>> scopes;
  llvm::DenseMap<const LoadedModule *, ModuleScope *> scopeOf;

  /// Reports an error (re-pointed to the user's code when `loc` is in the
  /// standard library and a user site is on the stack).
  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::ArrayRef<llvm::SMRange> ranges = {});
  /// A note for the last error.
  void note(llvm::SMLoc loc, const llvm::Twine &message);
  bool hasErrors() const { return diag.hasErrors(); }
  /// Errors reported so far, including repeats that were not printed again.
  unsigned getErrorCount() const { return errorCount; }

  /// Pushes a site (a call or member in the code being evaluated) for its
  /// lifetime.
  class SiteGuard {
  public:
    SiteGuard(SemaContext &ctx, llvm::SMLoc loc, std::string what) : ctx(ctx) {
      ctx.sites.push_back({loc, std::move(what)});
    }
    ~SiteGuard() { ctx.sites.pop_back(); }

  private:
    SemaContext &ctx;
  };

  /// Clears the site stack for its lifetime: an independent check (of
  /// another model declaration) must not blame the caller's sites.
  class SiteIsolation {
  public:
    explicit SiteIsolation(SemaContext &ctx) : ctx(ctx) {
      std::swap(saved, ctx.sites);
    }
    ~SiteIsolation() { std::swap(saved, ctx.sites); }

  private:
    SemaContext &ctx;
    std::vector<Site> saved;
  };

  /// A fresh leading-dims variable id.
  int newEllipsis() { return nextEllipsis++; }

  /// Generic check states of model declarations.
  enum class CheckState { InProgress, Ok, Broken };
  llvm::DenseMap<const ast::ModelDecl *, CheckState> modelStates;

  /// Instances created by the current instantiation (bounded so that
  /// `Layer(...) * 1_000_000` is an error, not an hour).
  unsigned instanceCount = 0;
  static constexpr unsigned kMaxInstances = 100000;
  /// Instances created by the whole analysis: every model is checked
  /// generically, so many large models could otherwise add up.
  unsigned totalInstances = 0;
  static constexpr unsigned kMaxTotalInstances = 1000000;
  /// Nesting of model instantiation and forward calls.
  unsigned depth = 0;
  /// The declaration or train key whose instantiation is under way, where a
  /// too-deep nesting is reported.
  llvm::SMLoc rootLoc;
  static constexpr unsigned kMaxDepth = 128;

  /// The Linear layers (by path, `blocks.0.attn.qkv`) that the train block's
  /// `adapters` targets: instantiation makes them nn.LoraLinear with these
  /// sizes.
  struct Adapter {
    int64_t rank = 0;
    double alpha = 0;
    double dropout = 0;
  };
  llvm::StringMap<Adapter> adapted;

private:
  std::vector<Site> sites;
  friend class SiteIsolation;
  unsigned errorCount = 0;
  int nextEllipsis = 0;
  std::set<std::pair<const char *, std::string>> reported;
  bool lastSuppressed = false;
};

} // namespace dt::sema

#endif // DT_LIB_SEMA_CONTEXT_H
