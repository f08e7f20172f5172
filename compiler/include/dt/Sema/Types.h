//===- Types.h - Values Sema hands to later stages --------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The plain value types of the checked job: element types, concrete tensor
// types and evaluated constants (argument values, hyper-parameters, deploy
// keys). Later stages read these and never see AST nodes or symbolic shapes.
//
//===----------------------------------------------------------------------===//

#ifndef DT_SEMA_TYPES_H
#define DT_SEMA_TYPES_H

#include "dt/AST/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace dt {

/// A source position as later stages want it (MLIR's FileLineColLoc).
using Location = FileLineCol;

/// Element types of tensors.
enum class DType { F32, BF16, F16, I32, I64 };

/// `f32`, `bf16`, ...
llvm::StringRef toString(DType dtype);
/// Parses a dtype name; nullopt for anything else.
std::optional<DType> parseDType(llvm::StringRef name);
/// Whether `dtype` is a floating-point type.
bool isFloat(DType dtype);

/// A tensor type with every dimension known: what MLIRGen builds.
struct TensorType {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> shape;

  unsigned getRank() const { return shape.size(); }
  /// The number of elements (1 for a scalar).
  int64_t getNumElements() const;
  bool operator==(const TensorType &other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  bool operator!=(const TensorType &other) const { return !(*this == other); }
};

/// Prints `f32[128, 784]` (`f32[]` for a scalar).
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const TensorType &type);

/// An evaluated compile-time value as written in the program: integers,
/// numbers, booleans, strings, bare names (`bf16`, `dp`), tuples (possibly
/// with named items, as a mesh), lists and records.
class Constant {
public:
  enum class Kind { Int, Float, Bool, String, Symbol, Tuple, List, Record };

  Constant() = default;
  static Constant getInt(int64_t value);
  static Constant getFloat(double value);
  static Constant getBool(bool value);
  static Constant getString(llvm::StringRef value);
  static Constant getSymbol(llvm::StringRef name);
  /// `keys` is empty or one key (possibly empty) per item.
  static Constant getTuple(std::vector<Constant> items,
                           std::vector<std::string> keys = {});
  static Constant getList(std::vector<Constant> items);
  static Constant getRecord(std::vector<std::string> keys,
                            std::vector<Constant> items);

  Kind getKind() const { return kind; }
  bool isInt() const { return kind == Kind::Int; }
  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }

  int64_t getInt() const { return intValue; }
  /// The numeric value; integers convert.
  double getNumber() const;
  bool getBool() const { return boolValue; }
  /// The text of a String or Symbol.
  llvm::StringRef getString() const { return text; }
  llvm::ArrayRef<Constant> getItems() const { return items; }
  /// Keys of a Record, or of a Tuple with named items.
  llvm::ArrayRef<std::string> getKeys() const { return keys; }
  /// The item of a Record (or named Tuple) with `key`, or null.
  const Constant *lookup(llvm::StringRef key) const;

  void print(llvm::raw_ostream &os) const;
  std::string str() const;

private:
  Kind kind = Kind::Int;
  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  std::string text;
  std::vector<Constant> items;
  std::vector<std::string> keys;
};

/// A named, evaluated argument (`lr = 0.001`), in declaration order.
struct NamedConstant {
  std::string name;
  Constant value;
};

/// The value of `name` in `args`, or null.
const Constant *lookup(llvm::ArrayRef<NamedConstant> args,
                       llvm::StringRef name);

} // namespace dt

#endif // DT_SEMA_TYPES_H
