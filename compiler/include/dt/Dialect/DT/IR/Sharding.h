//===- Sharding.h - Layouts of tensors over the device mesh -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The thin layer between dt's sharding passes and the IR. The mesh is MLIR's
// `mesh.mesh @mesh(shape = 4x2)`, its axes named by `dt.axes = ["dp", "tp"]`;
// a tensor's layout is the `#dt.shard` attribute, which names those axes.
// Passes work on the plain values below (axes as indices into the mesh), so
// that the dialect the IR uses can change (MLIR 20 moves shardings into ops,
// later releases rename `mesh` to `shard`) without touching the algorithms.
//
// Layout semantics, exactly (the runtime's initialisation and checkpoints
// follow the same rules, docs/abi.md):
//   - a dimension of size n with `blocks` g is g blocks of n / g entries; each
//     block is split the same way and a rank's shard of the dimension is its
//     piece of every block, block after block;
//   - a block is split by the dimension's axes one after another, outermost
//     first: axis a of size k cuts what the previous axes left (m entries) into
//     k pieces of ceil(m / k), the last ones shorter or empty; every rank
//     stores the full ceil(m / k) entries, zero past the end (padding).
//
//===----------------------------------------------------------------------===//

#ifndef DT_DIALECT_DT_IR_SHARDING_H
#define DT_DIALECT_DT_IR_SHARDING_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace dt {

class ShardingAttr;

/// A mesh axis: its index in the mesh, outermost first.
using AxisId = int16_t;
using AxisList = llvm::SmallVector<AxisId, 2>;

/// The device mesh of a program.
class MeshInfo {
public:
  /// The symbol of the one mesh of a program, and the attribute on it that
  /// names its axes.
  static constexpr llvm::StringLiteral kSymbol = "mesh";
  static constexpr llvm::StringLiteral kAxesAttr = "dt.axes";

  /// The mesh of one rank (no axes).
  MeshInfo() = default;
  MeshInfo(llvm::ArrayRef<std::string> names, llvm::ArrayRef<int64_t> sizes);

  /// The mesh of `module`: `mesh.mesh @mesh` with its `dt.axes`, or one rank
  /// when the module has none. Reports a malformed mesh at its location.
  static mlir::FailureOr<MeshInfo> get(mlir::ModuleOp module);
  /// Creates `mesh.mesh @mesh` with named axes at the start of `module`.
  static void create(mlir::ModuleOp module, llvm::ArrayRef<std::string> names,
                     llvm::ArrayRef<int64_t> sizes);

  size_t rank() const { return names.size(); }
  llvm::StringRef name(AxisId axis) const { return names[axis]; }
  int64_t size(AxisId axis) const { return sizes[axis]; }
  /// The number of ranks a group over `axes` has.
  int64_t size(llvm::ArrayRef<AxisId> axes) const;
  int64_t worldSize() const;
  std::optional<AxisId> find(llvm::StringRef name) const;
  /// "(dp)" or "(dp, tp)".
  std::string describe(llvm::ArrayRef<AxisId> axes) const;

private:
  llvm::SmallVector<std::string, 4> names;
  llvm::SmallVector<int64_t, 4> sizes;
};

/// How one dimension is laid out (see the file comment).
struct DimSharding {
  AxisList axes;
  int64_t blocks = 1;

  bool isSplit() const { return !axes.empty(); }
  bool operator==(const DimSharding &o) const {
    return axes == o.axes && (axes.empty() || blocks == o.blocks);
  }
  bool operator!=(const DimSharding &o) const { return !(*this == o); }
};

/// How a tensor is laid out over the mesh: its dimensions' splits and the axes
/// over which every rank holds a summand rather than the value.
class Sharding {
public:
  llvm::SmallVector<DimSharding, 4> dims;
  /// Sorted, each axis once.
  AxisList partial;

  Sharding() = default;
  /// Whole on every rank.
  static Sharding replicated(int64_t rank);

  int64_t rank() const { return dims.size(); }
  bool isPartial() const { return !partial.empty(); }
  /// No split and no partial sum.
  bool isReplicated() const;
  /// Every axis the dimensions split over.
  AxisList splitAxes() const;
  /// Whether `axis` splits a dimension or is partial.
  bool uses(AxisId axis) const;
  /// This layout without its partial sum.
  Sharding withoutPartial() const;

  /// The shape every rank holds of a tensor of `global` shape.
  llvm::SmallVector<int64_t, 4> localShape(llvm::ArrayRef<int64_t> global,
                                           const MeshInfo &mesh) const;
  /// Whether some dimension is padded on some rank.
  bool isPadded(llvm::ArrayRef<int64_t> global, const MeshInfo &mesh) const;

  /// Checks the layout against a tensor of `shape` on `mesh`: one entry per
  /// dimension, axes of the mesh used once, blocks that divide their
  /// dimension.
  mlir::LogicalResult
  verify(llvm::ArrayRef<int64_t> shape, const MeshInfo &mesh,
         llvm::function_ref<mlir::InFlightDiagnostic()> emitError) const;

  ShardingAttr toAttr(mlir::MLIRContext *ctx, const MeshInfo &mesh) const;
  /// Reads `attr`; fails with an error when it names an axis `mesh` lacks.
  static mlir::FailureOr<Sharding>
  fromAttr(ShardingAttr attr, const MeshInfo &mesh,
           llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

  bool operator==(const Sharding &o) const {
    return dims == o.dims && partial == o.partial;
  }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
};

/// The entries a rank holds of one dimension of `size` laid out by `dim`: its
/// coordinates on the dimension's axes decide which; see the file comment.
struct DimPiece {
  /// Entries stored per block (the local size is blocks * capacity).
  int64_t capacity = 0;
  /// Where this rank's entries start in each block, and how many are real.
  int64_t start = 0, count = 0;
};
DimPiece dimPiece(int64_t size, const DimSharding &dim, const MeshInfo &mesh,
                  llvm::ArrayRef<int64_t> coordinates);

/// The mesh axes of a collective of the mesh dialect (all_reduce,
/// reduce_scatter, all_gather, all_slice, all_to_all), or nullopt for any
/// other op.
std::optional<llvm::ArrayRef<int16_t>> collectiveAxes(mlir::Operation *op);

/// On a mesh collective: it runs asynchronously, from its place to the
/// dt.wait that is its result's only user (dt-overlap-collectives).
inline constexpr llvm::StringLiteral kAsyncAttr = "dt.async";

/// The runtime's code of a collective's element type (dtrt::DType: f32 0,
/// i32 1, i64 2, bf16 3, f16 4), the `dtype` argument of its entry points
/// and GPU plan records; nullopt for a type the runtime cannot move.
inline std::optional<int32_t> collectiveDTypeCode(mlir::Type t) {
  if (t.isF32())
    return 0;
  if (t.isInteger(32))
    return 1;
  if (t.isInteger(64))
    return 2;
  if (t.isBF16())
    return 3;
  if (t.isF16())
    return 4;
  return std::nullopt;
}

/// The name the manifest and reports give a collective ("all-reduce",
/// "reduce-scatter", "all-gather", "all-to-all", "shard"), or null for any
/// other op.
const char *collectiveKind(mlir::Operation *op);

/// The local size of a dimension of `size` laid out by `dim`.
int64_t localDimSize(int64_t size, const DimSharding &dim,
                     const MeshInfo &mesh);

} // namespace dt

#endif // DT_DIALECT_DT_IR_SHARDING_H
