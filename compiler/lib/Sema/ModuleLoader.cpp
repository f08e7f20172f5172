//===- ModuleLoader.cpp - Finding, reading and parsing .dt files ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Files are identified by their canonical path, so importing one file under
// two spellings parses it once. A file that fails to parse is remembered as
// failed, so its errors print once however often it is imported.
//
//===----------------------------------------------------------------------===//

#include "dt/Sema/ModuleLoader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

using namespace dt;

std::string dt::findStdlibDir(llvm::StringRef explicitDir, const char *argv0,
                              void *mainAddr, llvm::StringRef fallbackDir) {
  if (!explicitDir.empty())
    return explicitDir.str();
  if (std::optional<std::string> env = llvm::sys::Process::GetEnv("DT_STDLIB"))
    if (!env->empty())
      return *env;
  if (argv0) {
    std::string exe = llvm::sys::fs::getMainExecutable(argv0, mainAddr);
    if (!exe.empty()) {
      llvm::SmallString<256> dir(llvm::sys::path::parent_path(exe));
      llvm::sys::path::append(dir, "..", "share", "dt", "stdlib");
      if (llvm::sys::fs::is_directory(dir))
        return std::string(dir);
    }
  }
  return fallbackDir.str();
}

ModuleLoader::ModuleLoader(DiagnosticEngine &diag, SearchPaths paths,
                           ParseLimits limits)
    : diag(diag), paths(std::move(paths)), limits(limits) {}

ModuleLoader::~ModuleLoader() = default;

/// The canonical spelling of `path`, or `path` itself if it cannot be had.
static std::string canonical(llvm::StringRef path) {
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real))
    return path.str();
  return std::string(real);
}

const LoadedModule *ModuleLoader::parseBuffer(unsigned bufferId,
                                              std::string realPath,
                                              bool isStdlib,
                                              llvm::StringRef stdlibName) {
  if (isStdlib)
    stdlibBuffers.push_back(bufferId);
  std::unique_ptr<ast::Module> ast = parseModule(bufferId, diag, limits);
  if (!ast) {
    byPath[realPath] = nullptr;
    return nullptr;
  }
  auto module = std::make_unique<LoadedModule>();
  module->ast = std::move(ast);
  module->realPath = realPath;
  module->isStdlib = isStdlib;
  module->stdlibName = stdlibName.str();
  modules.push_back(std::move(module));
  byPath[realPath] = modules.back().get();
  return modules.back().get();
}

const LoadedModule *ModuleLoader::loadMain(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!buffer) {
    diag.error(llvm::SMLoc(),
               "cannot read '" + path + "': " + buffer.getError().message());
    return nullptr;
  }
  unsigned id =
      diag.getSourceMgr().AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  return parseBuffer(id, canonical(path), false, "");
}

const LoadedModule *ModuleLoader::loadBuffer(llvm::StringRef name,
                                             llvm::StringRef text) {
  unsigned id = diag.getSourceMgr().AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, name), llvm::SMLoc());
  return parseBuffer(id, name.str(), false, "");
}

bool ModuleLoader::isInStdlib(llvm::SMLoc loc) const {
  if (!loc.isValid() || stdlibBuffers.empty())
    return false;
  unsigned id = diag.getSourceMgr().FindBufferContainingLoc(loc);
  return llvm::is_contained(stdlibBuffers, id);
}

llvm::FailureOr<const LoadedModule *>
ModuleLoader::resolveImport(const LoadedModule &importer,
                            const ast::ImportDecl &import) {
  std::vector<std::string> candidates;
  if (import.isStdlib) {
    if (paths.stdlibDir.empty()) {
      diag.error(import.pathLoc, "cannot import '" + import.path +
                                     "': no standard library directory (pass "
                                     "--stdlib DIR or set DT_STDLIB)");
      return llvm::failure();
    }
    llvm::SmallString<256> file(paths.stdlibDir);
    llvm::sys::path::append(file, import.path + ".dt");
    candidates.push_back(std::string(file));
  } else if (llvm::sys::path::is_absolute(import.path)) {
    candidates.push_back(import.path);
  } else {
    llvm::SmallString<256> file(
        llvm::sys::path::parent_path(importer.realPath));
    llvm::sys::path::append(file, import.path);
    candidates.push_back(std::string(file));
    for (const std::string &dir : paths.includeDirs) {
      llvm::SmallString<256> inDir(dir);
      llvm::sys::path::append(inDir, import.path);
      candidates.push_back(std::string(inDir));
    }
  }

  for (const std::string &candidate : candidates) {
    if (!llvm::sys::fs::is_regular_file(candidate))
      continue;
    std::string real = canonical(candidate);
    auto known = byPath.find(real);
    if (known != byPath.end()) {
      if (!known->second)
        return llvm::failure();
      return known->second;
    }
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(candidate, /*IsText=*/true);
    if (!buffer) {
      diag.error(import.pathLoc, "cannot read '" + candidate +
                                     "': " + buffer.getError().message());
      return llvm::failure();
    }
    unsigned id = diag.getSourceMgr().AddNewSourceBuffer(std::move(*buffer),
                                                         llvm::SMLoc());
    const LoadedModule *module = parseBuffer(
        id, real, import.isStdlib, import.isStdlib ? import.path : "");
    if (!module) {
      diag.note(import.loc, "imported here");
      return llvm::failure();
    }
    return module;
  }

  if (import.isStdlib) {
    // Suggest the standard modules that exist.
    std::string known;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(paths.stdlibDir, ec), end;
         !ec && it != end; it.increment(ec))
      if (llvm::sys::path::extension(it->path()) == ".dt")
        known += (known.empty() ? "" : ", ") +
                 llvm::sys::path::stem(it->path()).str();
    diag.error(import.pathLoc, "no standard library module named '" +
                                   import.path + "' (in " + paths.stdlibDir +
                                   (known.empty() ? "" : ": " + known) + ")");
    return llvm::failure();
  }
  std::string looked;
  for (const std::string &candidate : candidates)
    looked += "\n  " + candidate;
  diag.error(import.pathLoc, "cannot find the file '" + import.path +
                                 "'; looked for:" + looked);
  return llvm::failure();
}
