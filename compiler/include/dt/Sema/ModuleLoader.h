//===- ModuleLoader.h - Finding, reading and parsing .dt files --*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Owns every parsed file of a compilation. Each file becomes a buffer of the
// DiagnosticEngine's SourceMgr (so diagnostics anywhere print with their
// source line) and is parsed once, however often it is imported. Import
// resolution: `import nn` reads `<stdlib>/nn.dt`; `import "x.dt" as x` reads
// `x.dt` relative to the importing file, then relative to each -I directory.
// Cycles are found by Sema, which walks imports depth-first.
//
//===----------------------------------------------------------------------===//

#ifndef DT_SEMA_MODULELOADER_H
#define DT_SEMA_MODULELOADER_H

#include "dt/AST/AST.h"
#include "dt/AST/Diagnostics.h"
#include "dt/Parse/Parser.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/LogicalResult.h"

#include <memory>
#include <string>
#include <vector>

namespace dt {

/// Where imports are looked up.
struct SearchPaths {
  /// The directory holding `nn.dt` and the other standard modules.
  std::string stdlibDir;
  /// `-I` directories, in order.
  std::vector<std::string> includeDirs;
};

/// Finds the standard library: `explicitDir` if not empty, else the
/// DT_STDLIB environment variable, else `<dir of argv0>/../share/dt/stdlib`,
/// else `fallbackDir` (the source tree's stdlib/, compiled into dtc).
std::string findStdlibDir(llvm::StringRef explicitDir, const char *argv0,
                          void *mainAddr, llvm::StringRef fallbackDir);

/// One loaded file.
struct LoadedModule {
  std::unique_ptr<ast::Module> ast;
  /// The canonical path (the key for "same file").
  std::string realPath;
  /// Whether it came from the standard library directory.
  bool isStdlib = false;
  /// The stdlib module name (`nn`), empty for user files.
  std::string stdlibName;
};

/// Loads and parses files, each once.
class ModuleLoader {
public:
  ModuleLoader(DiagnosticEngine &diag, SearchPaths paths,
               ParseLimits limits = {});
  ~ModuleLoader();

  /// Reads and parses the main file. Returns null after reporting an error.
  const LoadedModule *loadMain(llvm::StringRef path);

  /// Resolves `import` of `importer`, reading and parsing the file on first
  /// use. Reports a missing file or a parse error at the import.
  llvm::FailureOr<const LoadedModule *>
  resolveImport(const LoadedModule &importer, const ast::ImportDecl &import);

  /// Reads and parses a buffer given in memory (tests, the fuzzer).
  const LoadedModule *loadBuffer(llvm::StringRef name, llvm::StringRef text);

  DiagnosticEngine &getDiagnostics() { return diag; }
  const SearchPaths &getSearchPaths() const { return paths; }
  /// Whether `loc` lies in a standard library file.
  bool isInStdlib(llvm::SMLoc loc) const;

private:
  /// Parses `buffer` (already added to the SourceMgr) into a LoadedModule.
  const LoadedModule *parseBuffer(unsigned bufferId, std::string realPath,
                                  bool isStdlib, llvm::StringRef stdlibName);

  DiagnosticEngine &diag;
  SearchPaths paths;
  ParseLimits limits;
  std::vector<std::unique_ptr<LoadedModule>> modules;
  /// Canonical path -> module (null when the file failed to parse).
  llvm::StringMap<const LoadedModule *> byPath;
  /// Buffer ids of standard library files.
  std::vector<unsigned> stdlibBuffers;
};

} // namespace dt

#endif // DT_SEMA_MODULELOADER_H
