//===- SymExpr.h - Symbolic integers for dimensions -------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Dimensions are checked generically, before argument values are known, so a
// dimension is a symbolic integer: a polynomial with int64 coefficients over
// atoms. An atom is a symbol (a model argument such as `width`, a batch
// dimension such as `B`), a run-time size (the IDX image size, unified with
// the model's input later), or an opaque quotient `a / b` that did not divide
// exactly. Polynomials are kept in a normal form (terms sorted, no zero
// coefficients), so "equal" is structural; "unequal" is proven when the
// difference is a non-zero constant or has coefficients of one sign (every
// atom is a size, hence >= 1); anything else is "unknown" and not reported.
// Arithmetic reports int64 overflow (and expressions of absurd size) instead
// of wrapping.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_SYMEXPR_H
#define DT_LIB_SEMA_SYMEXPR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dt::sema {

class SymContext;

/// A polynomial over atoms with int64 coefficients, in normal form.
class SymExpr {
public:
  /// A product of atoms (ids, sorted, repeated for powers) times a coefficient.
  struct Term {
    llvm::SmallVector<unsigned, 2> atoms;
    int64_t coeff = 0;
    bool operator==(const Term &other) const {
      return coeff == other.coeff && atoms == other.atoms;
    }
  };

  SymExpr() = default;
  /// The constant `value`.
  SymExpr(int64_t value);
  /// The atom `id`.
  static SymExpr atom(unsigned id);

  bool isConstant() const;
  /// The value of a constant expression.
  std::optional<int64_t> getConstant() const;
  /// The atom id if the expression is exactly one atom.
  std::optional<unsigned> getAtom() const;
  llvm::ArrayRef<Term> getTerms() const { return terms; }

  bool operator==(const SymExpr &other) const { return terms == other.terms; }
  bool operator!=(const SymExpr &other) const { return !(*this == other); }

  /// The most terms an expression may have.
  static constexpr size_t kMaxTerms = 256;

  /// Arithmetic; nullopt on int64 overflow or more than kMaxTerms terms.
  std::optional<SymExpr> add(const SymExpr &other) const;
  std::optional<SymExpr> sub(const SymExpr &other) const;
  std::optional<SymExpr> mul(const SymExpr &other) const;
  std::optional<SymExpr> neg() const;

  /// Whether every coefficient is positive (so the value is >= 1 when every
  /// atom is), or every one negative.
  int sign() const;

  /// Divides by a constant `divisor` when every coefficient is a multiple;
  /// nullopt otherwise.
  std::optional<SymExpr> divideExactly(int64_t divisor) const;
  /// Divides by the single term `divisor` when it divides every term exactly.
  std::optional<SymExpr> divideExactly(const Term &divisor) const;

private:
  /// Sorts, merges equal monomials and drops zero terms; false on overflow.
  bool normalize();

  llvm::SmallVector<Term, 1> terms;
};

/// The result of comparing two symbolic integers.
enum class SymCmp { Equal, Unequal, Unknown };

/// Owns atoms and the substitutions of run-time sizes.
class SymContext {
public:
  enum class AtomKind { Symbol, RuntimeSize, Quotient };

  /// A fresh symbol printed as `name`.
  SymExpr symbol(llvm::StringRef name);
  /// A fresh run-time size printed as `name`; it unifies with the first
  /// expression it is compared with.
  SymExpr runtimeSize(llvm::StringRef name);

  /// The outcome of a division.
  struct Quotient {
    enum class Kind { Exact, Atom, NotIntegral, DivByZero } kind;
    SymExpr value;     ///< Exact, Atom.
    double approx = 0; ///< NotIntegral: the real quotient.
  };
  /// `num / den`: exact when the division is exact, an opaque atom when it
  /// cannot be decided, NotIntegral for constants that do not divide.
  Quotient divide(const SymExpr &num, const SymExpr &den);

  /// Compares after substituting bound run-time sizes. When `unify` is set
  /// and one side is a single unbound run-time size, binds it to the other
  /// side and answers Equal.
  SymCmp compare(const SymExpr &a, const SymExpr &b, bool unify = true);

  /// Substitutes bound run-time sizes.
  SymExpr resolve(const SymExpr &e) const;
  /// The binding of run-time size `atom`, if bound.
  std::optional<SymExpr> getBinding(unsigned atom) const;

  AtomKind getKind(unsigned atom) const { return atoms[atom].kind; }
  llvm::StringRef getName(unsigned atom) const { return atoms[atom].name; }

  /// Prints `3*width + 1`, `B*T`, `width/heads`.
  std::string str(const SymExpr &e) const;

private:
  struct Atom {
    AtomKind kind;
    std::string name;
  };
  std::vector<Atom> atoms;
  /// Interned quotient atoms by their printed form.
  std::map<std::string, unsigned> quotients;
  llvm::DenseMap<unsigned, SymExpr> bindings;
};

} // namespace dt::sema

#endif // DT_LIB_SEMA_SYMEXPR_H
