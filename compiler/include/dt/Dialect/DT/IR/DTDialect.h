//===- DTDialect.h - the dt dialect -----------------------------*- C++ -*-===//
//
// Declares the dt dialect class and its attributes. Include DTOps.h for the
// operations.
//
//===----------------------------------------------------------------------===//

#ifndef DT_DIALECT_DT_IR_DTDIALECT_H
#define DT_DIALECT_DT_IR_DTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "dt/Dialect/DT/IR/DTOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dt/Dialect/DT/IR/DTAttributes.h.inc"

#endif // DT_DIALECT_DT_IR_DTDIALECT_H
