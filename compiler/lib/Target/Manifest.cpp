//===- Manifest.cpp - the program manifest
//---------------------------------===//
//
// Serialises the planned arena and the job description to the JSON of
// docs/abi.md. The job description is already a dictionary attribute (built by
// MLIRGen), so this is a direct attribute-to-JSON conversion plus one entry per
// dt.global.
//
//===----------------------------------------------------------------------------===//

#include "dt/Target/Manifest.h"
#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace {

/// JSON for an attribute of a job description (dictionaries, arrays, scalars).
FailureOr<llvm::json::Value> toJSON(Attribute attr, Operation *owner) {
  if (!attr || llvm::isa<UnitAttr>(attr))
    return llvm::json::Value(nullptr);
  if (auto s = llvm::dyn_cast<StringAttr>(attr))
    return llvm::json::Value(s.getValue().str());
  if (auto b = llvm::dyn_cast<BoolAttr>(attr))
    return llvm::json::Value(b.getValue());
  if (auto i = llvm::dyn_cast<IntegerAttr>(attr))
    return llvm::json::Value(i.getInt());
  if (auto f = llvm::dyn_cast<FloatAttr>(attr))
    return llvm::json::Value(f.getValueAsDouble());
  if (auto a = llvm::dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (Attribute e : a) {
      FailureOr<llvm::json::Value> v = toJSON(e, owner);
      if (failed(v))
        return failure();
      out.push_back(std::move(*v));
    }
    return llvm::json::Value(std::move(out));
  }
  if (auto d = llvm::dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object out;
    for (NamedAttribute n : d) {
      FailureOr<llvm::json::Value> v = toJSON(n.getValue(), owner);
      if (failed(v))
        return failure();
      out[n.getName().str()] = std::move(*v);
    }
    return llvm::json::Value(std::move(out));
  }
  return owner->emitError("cannot describe ") << attr << " in the manifest",
         failure();
}

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(32))
    return "i32";
  return "i64";
}

} // namespace

FailureOr<std::string> dt::buildManifest(ModuleOp module) {
  auto arena = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
  auto job = module->getAttrOfType<DictionaryAttr>("dt.job");
  if (!arena || !job)
    return module.emitError("the manifest needs a planned module with dt.job"),
           failure();

  FailureOr<llvm::json::Value> jobJson = toJSON(job, module);
  if (failed(jobJson))
    return failure();
  llvm::json::Object manifest = std::move(*jobJson->getAsObject());
  manifest["abi"] = 1;
  manifest["arena"] =
      llvm::json::Object{{"bytes", arena.getInt()}, {"align", 64}};

  llvm::json::Array buffers;
  for (GlobalOp g : module.getOps<GlobalOp>()) {
    RankedTensorType t = g.getTensorType();
    llvm::json::Object b{{"name", g.getSymName().str()},
                         {"role", stringifyRole(g.getRole()).str()},
                         {"dtype", dtypeName(t.getElementType())},
                         {"shape", llvm::json::Array(t.getShape())},
                         {"offset", *g.getOffset()}};
    if (auto init = g.getInit()) {
      FailureOr<llvm::json::Value> v = toJSON(*init, g);
      if (failed(v))
        return failure();
      b["init"] = std::move(*v);
    }
    buffers.push_back(std::move(b));
  }
  manifest["buffers"] = std::move(buffers);

  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return text;
}
