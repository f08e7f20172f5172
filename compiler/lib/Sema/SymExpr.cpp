//===- SymExpr.cpp - Symbolic integers for dimensions ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Polynomial arithmetic in normal form with overflow checks on every
// coefficient operation (the fuzzer runs with UBSan, and a wrapped dimension
// would be a wrong answer, not just a crash).
//
//===----------------------------------------------------------------------===//

#include "SymExpr.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace dt::sema;

SymExpr::SymExpr(int64_t value) {
  if (value != 0)
    terms.push_back({{}, value});
}

SymExpr SymExpr::atom(unsigned id) {
  SymExpr e;
  e.terms.push_back({{id}, 1});
  return e;
}

bool SymExpr::isConstant() const {
  return terms.empty() || (terms.size() == 1 && terms[0].atoms.empty());
}

std::optional<int64_t> SymExpr::getConstant() const {
  if (terms.empty())
    return 0;
  if (terms.size() == 1 && terms[0].atoms.empty())
    return terms[0].coeff;
  return std::nullopt;
}

std::optional<unsigned> SymExpr::getAtom() const {
  if (terms.size() == 1 && terms[0].coeff == 1 && terms[0].atoms.size() == 1)
    return terms[0].atoms[0];
  return std::nullopt;
}

bool SymExpr::normalize() {
  llvm::sort(terms, [](const Term &a, const Term &b) {
    return std::lexicographical_compare(a.atoms.begin(), a.atoms.end(),
                                        b.atoms.begin(), b.atoms.end());
  });
  llvm::SmallVector<Term, 1> merged;
  for (Term &term : terms) {
    if (!merged.empty() && merged.back().atoms == term.atoms) {
      int64_t sum;
      if (llvm::AddOverflow(merged.back().coeff, term.coeff, sum))
        return false;
      merged.back().coeff = sum;
      continue;
    }
    merged.push_back(std::move(term));
  }
  llvm::erase_if(merged, [](const Term &t) { return t.coeff == 0; });
  terms = std::move(merged);
  return terms.size() <= kMaxTerms;
}

std::optional<SymExpr> SymExpr::add(const SymExpr &other) const {
  SymExpr result = *this;
  result.terms.append(other.terms.begin(), other.terms.end());
  if (!result.normalize())
    return std::nullopt;
  return result;
}

std::optional<SymExpr> SymExpr::neg() const {
  SymExpr result = *this;
  for (Term &term : result.terms) {
    if (term.coeff == INT64_MIN)
      return std::nullopt;
    term.coeff = -term.coeff;
  }
  return result;
}

std::optional<SymExpr> SymExpr::sub(const SymExpr &other) const {
  std::optional<SymExpr> negated = other.neg();
  if (!negated)
    return std::nullopt;
  return add(*negated);
}

std::optional<SymExpr> SymExpr::mul(const SymExpr &other) const {
  // Products of sums grow combinatorially; no dimension needs that many terms.
  if (terms.size() * other.terms.size() > kMaxTerms)
    return std::nullopt;
  SymExpr result;
  for (const Term &a : terms) {
    for (const Term &b : other.terms) {
      Term product;
      if (llvm::MulOverflow(a.coeff, b.coeff, product.coeff))
        return std::nullopt;
      product.atoms = a.atoms;
      product.atoms.append(b.atoms.begin(), b.atoms.end());
      llvm::sort(product.atoms);
      // Bound the size of monomials: no dimension needs x^64.
      if (product.atoms.size() > 64)
        return std::nullopt;
      result.terms.push_back(std::move(product));
    }
  }
  if (!result.normalize())
    return std::nullopt;
  return result;
}

int SymExpr::sign() const {
  bool allPositive = true, allNegative = true;
  for (const Term &term : terms) {
    allPositive &= term.coeff > 0;
    allNegative &= term.coeff < 0;
  }
  if (terms.empty())
    return 0;
  return allPositive ? 1 : allNegative ? -1 : 0;
}

std::optional<SymExpr> SymExpr::divideExactly(int64_t divisor) const {
  if (divisor == 0)
    return std::nullopt;
  SymExpr result = *this;
  for (Term &term : result.terms) {
    // INT64_MIN / -1 overflows.
    if (term.coeff % divisor != 0 || (term.coeff == INT64_MIN && divisor == -1))
      return std::nullopt;
    term.coeff /= divisor;
  }
  return result;
}

std::optional<SymExpr> SymExpr::divideExactly(const Term &divisor) const {
  if (divisor.coeff == 0)
    return std::nullopt;
  SymExpr result;
  for (const Term &term : terms) {
    if (term.coeff % divisor.coeff != 0 ||
        (term.coeff == INT64_MIN && divisor.coeff == -1))
      return std::nullopt;
    // Remove each atom of the divisor once from the (sorted) term.
    Term quotient;
    quotient.coeff = term.coeff / divisor.coeff;
    quotient.atoms = term.atoms;
    for (unsigned atom : divisor.atoms) {
      auto it = llvm::find(quotient.atoms, atom);
      if (it == quotient.atoms.end())
        return std::nullopt;
      quotient.atoms.erase(it);
    }
    result.terms.push_back(std::move(quotient));
  }
  if (!result.normalize())
    return std::nullopt;
  return result;
}

//===----------------------------------------------------------------------===//
// SymContext
//===----------------------------------------------------------------------===//

SymExpr SymContext::symbol(llvm::StringRef name) {
  atoms.push_back({AtomKind::Symbol, name.str()});
  return SymExpr::atom(atoms.size() - 1);
}

SymExpr SymContext::runtimeSize(llvm::StringRef name) {
  atoms.push_back({AtomKind::RuntimeSize, name.str()});
  return SymExpr::atom(atoms.size() - 1);
}

SymContext::Quotient SymContext::divide(const SymExpr &num,
                                        const SymExpr &den) {
  SymExpr n = resolve(num), d = resolve(den);
  if (std::optional<int64_t> c = d.getConstant()) {
    if (*c == 0)
      return {Quotient::Kind::DivByZero, {}, 0};
    if (std::optional<SymExpr> exact = n.divideExactly(*c))
      return {Quotient::Kind::Exact, *exact, 0};
    if (std::optional<int64_t> nc = n.getConstant())
      return {Quotient::Kind::NotIntegral,
              {},
              static_cast<double>(*nc) / static_cast<double>(*c)};
  } else if (d.getTerms().size() == 1) {
    // Cancel the divisor's atoms first; what is left is a constant division
    // (12*B / (5*B) is 12 / 5, not an integer).
    SymExpr::Term atoms = d.getTerms()[0];
    int64_t coeff = atoms.coeff;
    atoms.coeff = 1;
    if (std::optional<SymExpr> reduced = n.divideExactly(atoms))
      return divide(*reduced, SymExpr(coeff));
  }
  // Undecided: an opaque atom, the same atom for the same quotient (keyed by
  // structure: two symbols may print alike).
  auto key = [](const SymExpr &e) {
    std::string text;
    for (const SymExpr::Term &term : e.getTerms()) {
      text += std::to_string(term.coeff);
      for (unsigned atom : term.atoms)
        text += "*#" + std::to_string(atom);
      text += "+";
    }
    return text;
  };
  auto [it, inserted] =
      quotients.try_emplace(key(n) + "/" + key(d), atoms.size());
  if (inserted) {
    auto wrap = [&](const SymExpr &e) {
      bool single =
          e.getTerms().size() == 1 &&
          (e.getTerms()[0].atoms.size() + (e.getTerms()[0].coeff != 1)) <= 1;
      return single || e.isConstant() ? str(e) : "(" + str(e) + ")";
    };
    atoms.push_back({AtomKind::Quotient, wrap(n) + "/" + wrap(d)});
  }
  return {Quotient::Kind::Atom, SymExpr::atom(it->second), 0};
}

std::optional<SymExpr> SymContext::getBinding(unsigned atom) const {
  auto it = bindings.find(atom);
  if (it == bindings.end())
    return std::nullopt;
  return it->second;
}

SymExpr SymContext::resolve(const SymExpr &e) const {
  if (bindings.empty())
    return e;
  SymExpr result;
  for (const SymExpr::Term &term : e.getTerms()) {
    SymExpr product(term.coeff);
    for (unsigned atom : term.atoms) {
      std::optional<SymExpr> bound = getBinding(atom);
      std::optional<SymExpr> next =
          product.mul(bound ? *bound : SymExpr::atom(atom));
      // Bindings are small constants in practice; keep the unresolved form if
      // a substitution overflows.
      if (!next)
        return e;
      product = *next;
    }
    std::optional<SymExpr> sum = result.add(product);
    if (!sum)
      return e;
    result = *sum;
  }
  return result;
}

SymCmp SymContext::compare(const SymExpr &a, const SymExpr &b, bool unify) {
  SymExpr ra = resolve(a), rb = resolve(b);
  if (ra == rb)
    return SymCmp::Equal;
  if (unify) {
    for (auto [from, to] : {std::pair(&ra, &rb), std::pair(&rb, &ra)}) {
      std::optional<unsigned> atom = from->getAtom();
      if (atom && atoms[*atom].kind == AtomKind::RuntimeSize) {
        bindings[*atom] = *to;
        return SymCmp::Equal;
      }
    }
  }
  std::optional<SymExpr> diff = ra.sub(rb);
  if (!diff)
    return SymCmp::Unknown;
  if (diff->isConstant())
    return SymCmp::Unequal; // Non-zero, since ra != rb in normal form.
  return diff->sign() != 0 ? SymCmp::Unequal : SymCmp::Unknown;
}

std::string SymContext::str(const SymExpr &e) const {
  if (e.getTerms().empty())
    return "0";
  std::string result;
  llvm::raw_string_ostream os(result);
  bool first = true;
  for (const SymExpr::Term &term : e.getTerms()) {
    int64_t coeff = term.coeff;
    if (!first) {
      os << (coeff < 0 ? " - " : " + ");
      // Printing |INT64_MIN| needs unsigned arithmetic.
      uint64_t magnitude = coeff < 0 ? 0 - static_cast<uint64_t>(coeff)
                                     : static_cast<uint64_t>(coeff);
      if (magnitude != 1 || term.atoms.empty())
        os << magnitude << (term.atoms.empty() ? "" : "*");
    } else if (term.atoms.empty()) {
      os << coeff;
    } else if (coeff == -1) {
      os << '-';
    } else if (coeff != 1) {
      os << coeff << '*';
    }
    first = false;
    for (size_t i = 0; i < term.atoms.size(); ++i) {
      if (i)
        os << '*';
      os << atoms[term.atoms[i]].name;
    }
  }
  return result;
}
