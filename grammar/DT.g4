// DT.g4 - the grammar of the .dt language.
//
// This grammar accepts everything of the language contract (shared/spec/LANGUAGE.md). It is
// deliberately permissive where a precise check gives a better message later: dtypes,
// argument types, annotation names and block keys are plain names here, checked by Sema.
// Newlines are not significant: every statement, member and key starts with a name followed
// by '=' or ':', which ends the expression before it. The operand of '* n', of 'if' and of
// '= init' on members is a postfix expression so that a following '@column' is an
// annotation, never a matrix product (write `* (depth + 1)` for arithmetic there).
//
// Extensions to the contract (proposed for the language reference):
//  - `source NAME(args) { field: dtype[dims] ... }` declares a data source. The standard
//    library declares the three readers the runtime implements (idx, tokens, synthetic); a
//    field dim is an argument, an integer, or a name for a size known only when the files
//    are read, which Sema unifies with the model input the field is passed to.
//  - `;` may end a member, statement or key, e.g. to put several on one line.
//  - `a.0` means `a[0]` in paths (`model.blocks.0.attn`).
//  - comparison and boolean operators do not exist; `if` takes a boolean argument or literal.
grammar DT;

file_ : importDecl* decl* EOF ;

importDecl : 'import' (module=name | path=STRING 'as' alias=name) ;

decl : modelDecl | sourceDecl | trainDecl | parallelDecl | deployDecl ;

// --- models -----------------------------------------------------------------------------------

modelDecl : 'model' name '(' argDeclList? ')' '{' modelItem* '}' ;

argDeclList : argDecl (',' argDecl)* ','? ;
argDecl : name ':' name ('=' expr)? ;

// Members are left-factored so that an error after the member's name reports
// what may follow it (':' or '=').
modelItem
  : name memberBody
  | 'forward' '(' forwardParamList? ')' '->' tensorType (',' tensorType)* '{' stmt* close='}'
  ;

memberBody
  : ':' 'param' '[' dimList? ']' ('=' init=postfixExpr)? ('if' cond=postfixExpr)?
    annotation* ';'?                                                      # paramBody
  | '=' call=postfixExpr ('*' count=postfixExpr)? annotation* ';'?        # submoduleBody
  ;

annotation : '@' name ;

forwardParamList : forwardParam (',' forwardParam)* ','? ;
forwardParam : name ':' tensorType ;

tensorType : name ('[' dimList? ']')? ;
dimList : dim (',' dim)* ','? ;
dim : '...' | expr ;

stmt
  : name '=' expr ';'?                  # assignStmt
  | 'return' expr (',' expr)* ';'?      # returnStmt
  ;

// --- data sources (an extension: the readers the runtime implements, declared in stdlib) -----

sourceDecl : 'source' name '(' argDeclList? ')' '{' sourceField* '}' ;
sourceField : name ':' tensorType ';'? ;

// --- train, parallel, deploy ------------------------------------------------------------------

trainDecl : 'train' name? '{' keyValue* '}' ;

parallelDecl : 'parallel' '{' parallelItem* '}' ;
parallelItem
  : 'shard' path=postfixExpr '=' expr ';'?   # shardItem
  | keyValue                            # parallelKey
  ;

deployDecl : 'deploy' name '{' keyValue* '}' ;

keyValue : name '=' expr ';'? ;

// --- expressions ------------------------------------------------------------------------------

expr
  : postfixExpr                          # postfix
  | '-' expr                             # negExpr
  | expr op=('*' | '/' | '@') expr       # mulExpr
  | expr op=('+' | '-') expr             # addExpr
  ;

postfixExpr
  : primary                                         # primaryExpr
  | postfixExpr '.' name                            # memberExpr
  | postfixExpr '.' INT                             # memberIndexExpr
  | postfixExpr '(' callArgList? ')'                # callExpr
  // `a[i]` or a slice `a[i:j]`, factored so that errors inside name ':' or ']'.
  | postfixExpr '[' lo=expr? (colon=':' hi=expr?)? ']'   # indexExpr
  ;

callArgList : callArg (',' callArg)* ','? ;
callArg : (name '=')? expr ;

primary
  : INT                                                  # intLit
  | FLOAT                                                # floatLit
  | STRING                                               # stringLit
  | ('true' | 'false')                                   # boolLit
  | name                                                 # nameRef
  | '(' (parenItem (',' parenItem)* trail=','?)? ')'     # parenExpr
  | '[' (expr (',' expr)* ','?)? ']'                     # listExpr
  | '{' (recordItem (',' recordItem)* ','?)? '}'         # recordExpr
  ;

parenItem : (name '=')? expr ;
recordItem : (name | STRING) ':' expr ;

// Keywords are reserved only where the grammar expects them.
name
  : ID | 'model' | 'param' | 'train' | 'parallel' | 'deploy' | 'import' | 'as' | 'forward'
  | 'source' | 'shard'
  ;

// --- lexical ----------------------------------------------------------------------------------

ID : [A-Za-z_] [A-Za-z0-9_]* ;
FLOAT : DIGITS '.' DIGITS EXPONENT? | DIGITS EXPONENT ;
INT : DIGITS ;
fragment DIGITS : [0-9] ('_'* [0-9])* ;
fragment EXPONENT : [eE] [+-]? DIGITS ;

STRING : '"' ( ~["\\\r\n] | '\\' ~[\r\n] )* '"' ;

LINE_COMMENT : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS : [ \t\r\n\f]+ -> skip ;

// Malformed input becomes tokens too, so that the front end reports it with its own wording
// and location instead of ANTLR's "token recognition error".
UNTERMINATED_STRING : '"' ( ~["\\\r\n] | '\\' ~[\r\n] )* ;
UNTERMINATED_COMMENT : '/*' ( ~'*' | '*'+ ~[*/] )* '*'* EOF ;
ERROR_CHAR : . ;
