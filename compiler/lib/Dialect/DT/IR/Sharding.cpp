//===- Sharding.cpp - Layouts of tensors over the device mesh ------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The mesh (`mesh.mesh @mesh` with `dt.axes`), the `#dt.shard` attribute's
// syntax and checks, and the arithmetic of padded, blocked shards.
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Dialect/DT/IR/DTDialect.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dt;

//===----------------------------------------------------------------------===//
// MeshInfo
//===----------------------------------------------------------------------===//

MeshInfo::MeshInfo(ArrayRef<std::string> names, ArrayRef<int64_t> sizes)
    : names(names.begin(), names.end()), sizes(sizes.begin(), sizes.end()) {}

FailureOr<MeshInfo> MeshInfo::get(ModuleOp module) {
  auto mesh = module.lookupSymbol<mesh::MeshOp>(kSymbol);
  if (!mesh)
    return MeshInfo();
  auto axes = mesh->getAttrOfType<ArrayAttr>(kAxesAttr);
  ArrayRef<int64_t> shape = mesh.getShape();
  if (!axes || axes.size() != shape.size() ||
      !llvm::all_of(axes, [](Attribute a) { return isa<StringAttr>(a); }))
    return mesh.emitError("the mesh needs '")
           << kAxesAttr << "', one axis name per dimension of its shape";
  SmallVector<std::string> names;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (llvm::is_contained(names, name))
      return mesh.emitError("the mesh names axis '") << name << "' twice";
    names.push_back(name.str());
  }
  for (int64_t size : shape)
    if (size <= 0)
      return mesh.emitError("every mesh axis needs a static, positive size");
  return MeshInfo(names, shape);
}

void MeshInfo::create(ModuleOp module, ArrayRef<std::string> names,
                      ArrayRef<int64_t> sizes) {
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  auto mesh = b.create<mesh::MeshOp>(module.getLoc(), kSymbol, sizes);
  SmallVector<Attribute> axes;
  for (const std::string &name : names)
    axes.push_back(b.getStringAttr(name));
  mesh->setAttr(kAxesAttr, b.getArrayAttr(axes));
}

int64_t MeshInfo::size(ArrayRef<AxisId> axes) const {
  int64_t n = 1;
  for (AxisId a : axes)
    n *= sizes[a];
  return n;
}

int64_t MeshInfo::worldSize() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

std::optional<AxisId> MeshInfo::find(StringRef name) const {
  for (auto [i, n] : llvm::enumerate(names))
    if (n == name)
      return AxisId(i);
  return std::nullopt;
}

std::string MeshInfo::describe(ArrayRef<AxisId> axes) const {
  std::string text = "(";
  for (auto [i, a] : llvm::enumerate(axes))
    text += (i ? ", " : "") + names[a];
  return text + ")";
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

Sharding Sharding::replicated(int64_t rank) {
  Sharding s;
  s.dims.resize(rank);
  return s;
}

bool Sharding::isReplicated() const {
  return partial.empty() &&
         llvm::none_of(dims, [](const DimSharding &d) { return d.isSplit(); });
}

AxisList Sharding::splitAxes() const {
  AxisList axes;
  for (const DimSharding &d : dims)
    axes.append(d.axes.begin(), d.axes.end());
  return axes;
}

bool Sharding::uses(AxisId axis) const {
  return llvm::is_contained(partial, axis) ||
         llvm::any_of(dims, [&](const DimSharding &d) {
           return llvm::is_contained(d.axes, axis);
         });
}

Sharding Sharding::withoutPartial() const {
  Sharding s = *this;
  s.partial.clear();
  return s;
}

DimPiece dt::dimPiece(int64_t size, const DimSharding &dim,
                      const MeshInfo &mesh, ArrayRef<int64_t> coordinates) {
  int64_t block = dim.isSplit() ? size / dim.blocks : size;
  DimPiece piece{block, 0, block};
  for (AxisId a : dim.axes) {
    // Axis a cuts the capacity the outer axes left into equal pieces; the
    // real entries are those below the outer piece's count.
    int64_t capacity = (piece.capacity + mesh.size(a) - 1) / mesh.size(a);
    int64_t offset = coordinates[a] * capacity;
    piece.start += offset;
    piece.count = std::clamp<int64_t>(piece.count - offset, 0, capacity);
    piece.capacity = capacity;
  }
  return piece;
}

std::optional<ArrayRef<int16_t>> dt::collectiveAxes(Operation *op) {
  if (auto c = dyn_cast<mesh::AllReduceOp>(op))
    return c.getMeshAxes();
  if (auto c = dyn_cast<mesh::ReduceScatterOp>(op))
    return c.getMeshAxes();
  if (auto c = dyn_cast<mesh::AllGatherOp>(op))
    return c.getMeshAxes();
  if (auto c = dyn_cast<mesh::AllSliceOp>(op))
    return c.getMeshAxes();
  if (auto c = dyn_cast<mesh::AllToAllOp>(op))
    return c.getMeshAxes();
  return std::nullopt;
}

const char *dt::collectiveKind(Operation *op) {
  if (isa<mesh::AllReduceOp>(op))
    return "all-reduce";
  if (isa<mesh::ReduceScatterOp>(op))
    return "reduce-scatter";
  if (isa<mesh::AllGatherOp>(op))
    return "all-gather";
  if (isa<mesh::AllToAllOp>(op))
    return "all-to-all";
  if (isa<mesh::AllSliceOp>(op))
    return "shard";
  return nullptr;
}

int64_t dt::localDimSize(int64_t size, const DimSharding &dim,
                         const MeshInfo &mesh) {
  if (!dim.isSplit())
    return size;
  int64_t capacity = size / dim.blocks;
  for (AxisId a : dim.axes)
    capacity = (capacity + mesh.size(a) - 1) / mesh.size(a);
  return dim.blocks * capacity;
}

SmallVector<int64_t, 4> Sharding::localShape(ArrayRef<int64_t> global,
                                             const MeshInfo &mesh) const {
  SmallVector<int64_t, 4> local;
  for (auto [size, dim] : llvm::zip(global, dims))
    local.push_back(localDimSize(size, dim, mesh));
  return local;
}

bool Sharding::isPadded(ArrayRef<int64_t> global, const MeshInfo &mesh) const {
  for (auto [size, dim] : llvm::zip(global, dims)) {
    if (!dim.isSplit())
      continue;
    int64_t capacity = size / dim.blocks;
    for (AxisId a : dim.axes) {
      if (capacity % mesh.size(a) != 0)
        return true;
      capacity /= mesh.size(a);
    }
  }
  return false;
}

LogicalResult
Sharding::verify(ArrayRef<int64_t> shape, const MeshInfo &mesh,
                 function_ref<InFlightDiagnostic()> emitError) const {
  if (static_cast<int64_t>(shape.size()) != rank())
    return emitError() << "a layout of " << rank()
                       << " dimensions for a tensor of rank " << shape.size();
  llvm::SmallSet<AxisId, 4> seen;
  auto use = [&](AxisId a) -> LogicalResult {
    if (a < 0 || static_cast<size_t>(a) >= mesh.rank())
      return emitError() << "mesh axis " << a << " is not in the mesh";
    if (!seen.insert(a).second)
      return emitError() << "mesh axis '" << mesh.name(a)
                         << "' is used twice in one layout";
    return success();
  };
  for (auto [size, dim] : llvm::zip(shape, dims)) {
    for (AxisId a : dim.axes)
      if (failed(use(a)))
        return failure();
    if (dim.isSplit() && (dim.blocks < 1 || size % dim.blocks != 0))
      return emitError() << dim.blocks << " blocks do not divide a dimension of "
                         << size;
  }
  for (AxisId a : partial)
    if (failed(use(a)))
      return failure();
  return success();
}

ShardingAttr Sharding::toAttr(MLIRContext *ctx, const MeshInfo &mesh) const {
  Builder b(ctx);
  auto names = [&](ArrayRef<AxisId> axes) {
    SmallVector<Attribute> list;
    for (AxisId a : axes)
      list.push_back(b.getStringAttr(mesh.name(a)));
    return b.getArrayAttr(list);
  };
  SmallVector<Attribute> dimAttrs;
  SmallVector<int64_t> blocks;
  for (const DimSharding &d : dims) {
    dimAttrs.push_back(names(d.axes));
    blocks.push_back(d.isSplit() ? d.blocks : 1);
  }
  return ShardingAttr::get(ctx, b.getArrayAttr(dimAttrs),
                           b.getDenseI64ArrayAttr(blocks), names(partial));
}

FailureOr<Sharding>
Sharding::fromAttr(ShardingAttr attr, const MeshInfo &mesh,
                   function_ref<InFlightDiagnostic()> emitError) {
  auto axes = [&](ArrayAttr names) -> FailureOr<AxisList> {
    AxisList list;
    for (Attribute n : names) {
      StringRef name = cast<StringAttr>(n).getValue();
      std::optional<AxisId> a = mesh.find(name);
      if (!a)
        return emitError() << "the layout names axis '" << name
                           << "', which the mesh does not have",
               failure();
      list.push_back(*a);
    }
    return list;
  };
  Sharding s;
  for (auto [names, blocks] :
       llvm::zip(attr.getDims(), attr.getBlocks().asArrayRef())) {
    FailureOr<AxisList> list = axes(cast<ArrayAttr>(names));
    if (failed(list))
      return failure();
    s.dims.push_back({*list, list->empty() ? 1 : blocks});
  }
  FailureOr<AxisList> partial = axes(attr.getPartial());
  if (failed(partial))
    return failure();
  s.partial = *partial;
  llvm::sort(s.partial);
  return s;
}

//===----------------------------------------------------------------------===//
// #dt.shard syntax
//===----------------------------------------------------------------------===//

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayAttr dims, DenseI64ArrayAttr blocks,
                                   ArrayAttr partial) {
  if (static_cast<int64_t>(dims.size()) != blocks.size())
    return emitError() << "#dt.shard needs one block count per dimension";
  llvm::SmallSet<StringRef, 4> seen;
  auto check = [&](Attribute list) -> LogicalResult {
    auto names = llvm::dyn_cast<ArrayAttr>(list);
    if (!names)
      return emitError() << "#dt.shard: a list of axis names was expected";
    for (Attribute n : names) {
      auto name = llvm::dyn_cast<StringAttr>(n);
      if (!name)
        return emitError() << "#dt.shard: axis names are strings";
      if (!seen.insert(name.getValue()).second)
        return emitError() << "#dt.shard uses axis '" << name.getValue()
                           << "' twice";
    }
    return success();
  };
  for (Attribute d : dims)
    if (failed(check(d)))
      return failure();
  for (int64_t b : blocks.asArrayRef())
    if (b < 1)
      return emitError() << "#dt.shard: block counts are positive";
  return check(partial);
}

/// `name` or `(name, name, ...)`.
static ParseResult parseAxes(AsmParser &p, SmallVectorImpl<Attribute> &out) {
  auto one = [&]() -> ParseResult {
    std::string name;
    if (p.parseKeywordOrString(&name))
      return failure();
    out.push_back(p.getBuilder().getStringAttr(name));
    return success();
  };
  if (succeeded(p.parseOptionalLParen()))
    return failure(p.parseCommaSeparatedList(one) || p.parseRParen());
  return one();
}

Attribute ShardingAttr::parse(AsmParser &p, Type) {
  Builder &b = p.getBuilder();
  SmallVector<Attribute> dims, partial;
  SmallVector<int64_t> blocks;
  auto dim = [&]() -> ParseResult {
    SmallVector<Attribute> axes;
    int64_t count = 1;
    if (succeeded(p.parseOptionalKeyword("_"))) {
      dims.push_back(b.getArrayAttr({}));
      blocks.push_back(1);
      return success();
    }
    OptionalParseResult number = p.parseOptionalInteger(count);
    if (number.has_value() && (failed(*number) || p.parseKeyword("x")))
      return failure();
    if (parseAxes(p, axes))
      return failure();
    dims.push_back(b.getArrayAttr(axes));
    blocks.push_back(count);
    return success();
  };
  if (p.parseLess() ||
      p.parseCommaSeparatedList(AsmParser::Delimiter::Square, dim))
    return {};
  if (succeeded(p.parseOptionalComma()))
    if (p.parseKeyword("partial") || p.parseEqual() || parseAxes(p, partial))
      return {};
  if (p.parseGreater())
    return {};
  return getChecked([&] { return p.emitError(p.getNameLoc()); },
                    p.getContext(), b.getArrayAttr(dims),
                    b.getDenseI64ArrayAttr(blocks), b.getArrayAttr(partial));
}

void ShardingAttr::print(AsmPrinter &p) const {
  auto axes = [&](ArrayAttr names, bool parens) {
    if (parens || names.size() != 1)
      p << "(";
    llvm::interleaveComma(names, p, [&](Attribute n) {
      p.printKeywordOrString(llvm::cast<StringAttr>(n).getValue());
    });
    if (parens || names.size() != 1)
      p << ")";
  };
  p << "<[";
  for (auto [i, d] : llvm::enumerate(getDims())) {
    auto names = llvm::cast<ArrayAttr>(d);
    if (i)
      p << ", ";
    if (names.empty()) {
      p << "_";
      continue;
    }
    if (int64_t blocks = getBlocks()[i]; blocks != 1)
      p << blocks << " x ";
    axes(names, false);
  }
  p << "]";
  if (!getPartial().empty()) {
    p << ", partial = ";
    axes(getPartial(), true);
  }
  p << ">";
}

#define GET_ATTRDEF_CLASSES
#include "dt/Dialect/DT/IR/DTAttributes.cpp.inc"

void DTDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dt/Dialect/DT/IR/DTAttributes.cpp.inc"
      >();
}
