//===- Manifest.cpp - the program manifest ------------------------------===//
//
// Serialises the planned arena and the job description to the JSON of
// docs/abi.md. The job description is already a dictionary attribute (built by
// MLIRGen), so this is a direct attribute-to-JSON conversion plus one entry per
// dt.global.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/Manifest.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"

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

/// A layout as the manifest writes it: axes by index into the mesh.
llvm::json::Object layoutJSON(const dt::Sharding &s) {
  llvm::json::Array dims;
  for (const dt::DimSharding &d : s.dims)
    dims.push_back(llvm::json::Object{
        {"axes", llvm::json::Array(d.axes)},
        {"blocks", d.isSplit() ? d.blocks : 1}});
  return llvm::json::Object{{"dims", std::move(dims)},
                            {"partial", llvm::json::Array(s.partial)}};
}

} // namespace

void dt::numberCollectives(ModuleOp module) {
  int64_t next = 0;
  module.walk([&](Operation *op) {
    if (auto id = op->getAttrOfType<IntegerAttr>("dt.id"))
      next = std::max(next, id.getInt() + 1);
  });
  module.walk([&](Operation *op) {
    if (collectiveKind(op) && !op->hasAttr("dt.id"))
      op->setAttr("dt.id",
                  IntegerAttr::get(IntegerType::get(op->getContext(), 64),
                                   next++));
  });
}

FailureOr<std::string> dt::buildManifest(ModuleOp module) {
  numberCollectives(module);
  FailureOr<MeshInfo> mesh = MeshInfo::get(module);
  if (failed(mesh))
    return failure();
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

  if (mesh->rank() > 0) {
    llvm::json::Array axes;
    for (size_t a = 0; a < mesh->rank(); ++a)
      axes.push_back(llvm::json::Object{{"name", mesh->name(a).str()},
                                        {"size", mesh->size(a)}});
    manifest["mesh"] = llvm::json::Object{{"axes", std::move(axes)}};
  }

  llvm::json::Array buffers;
  for (GlobalOp g : module.getOps<GlobalOp>()) {
    RankedTensorType t = g.getTensorType();
    llvm::json::Object b{{"name", g.getSymName().str()},
                         {"role", stringifyRole(g.getRole()).str()},
                         {"dtype", dtypeName(t.getElementType())},
                         {"shape", llvm::json::Array(t.getShape())},
                         {"offset", *g.getOffset()}};
    if (g.getSharding() && mesh->rank() > 0) {
      FailureOr<Sharding> layout = Sharding::fromAttr(
          *g.getSharding(), *mesh, [&] { return g.emitError(); });
      if (failed(layout))
        return failure();
      b["global_shape"] = llvm::json::Array(g.getGlobalTensorType().getShape());
      b["sharding"] = layoutJSON(*layout);
    }
    if (auto init = g.getInit()) {
      FailureOr<llvm::json::Value> v = toJSON(*init, g);
      if (failed(v))
        return failure();
      b["init"] = std::move(*v);
    }
    buffers.push_back(std::move(b));
  }
  manifest["buffers"] = std::move(buffers);

  // The collectives, by dt.id: what each moves, over which axes, from which
  // entry point, and the bytes this rank hands it per call.
  llvm::json::Array collectives;
  for (auto fn : module.getOps<func::FuncOp>())
    fn.walk([&](Operation *op) {
      const char *kind = collectiveKind(op);
      if (!kind)
        return;
      auto in = cast<RankedTensorType>(op->getOperand(0).getType());
      int64_t bytes =
          in.getNumElements() * ((in.getElementTypeBitWidth() + 7) / 8);
      llvm::json::Array axes;
      ArrayRef<int16_t> groupAxes = dt::collectiveAxes(op).value();
      for (int16_t a : groupAxes)
        axes.push_back(mesh->name(a).str());
      auto what = op->getAttrOfType<StringAttr>("dt.what");
      collectives.push_back(llvm::json::Object{
          {"id", op->getAttrOfType<IntegerAttr>("dt.id").getInt()},
          {"kind", kind},
          {"what", what ? what.getValue().str() : std::string(kind)},
          {"axes", std::move(axes)},
          {"entry", fn.getSymName().str()},
          {"bytes", bytes},
          {"async", op->hasAttr(dt::kAsyncAttr)}});
    });
  llvm::sort(collectives, [](const llvm::json::Value &a,
                             const llvm::json::Value &b) {
    return *a.getAsObject()->getInteger("id") <
           *b.getAsObject()->getInteger("id");
  });
  if (!collectives.empty())
    manifest["collectives"] = std::move(collectives);

  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return text;
}
