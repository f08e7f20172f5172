//===- DTDialect.h - the dt dialect ------------------------------*- C++
//-*-===//
//
// Declares the dt dialect class. Include DTOps.h for the operations.
//
//===----------------------------------------------------------------------------===//

#ifndef DT_DIALECT_DT_IR_DTDIALECT_H
#define DT_DIALECT_DT_IR_DTDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dt/Dialect/DT/IR/DTOpsDialect.h.inc"

#endif // DT_DIALECT_DT_IR_DTDIALECT_H
