//! Parser for the kernel language, a C subset:
//!
//! ```text
//! param X, Y, Z;                       // size parameters (symbolic)
//! double A[100], B[100], C[100];       // arrays: element type and affine sizes
//! for (i = 0; i < X; i++)              // affine bounds; <, <=; i++, ++i, i += c (c > 0)
//!   A[i] = 0;                          // statements: affine subscripts
//! for (k = 0; k < Z; k++) {
//!   S3: C[k] = A[k];                   // optional label; otherwise S1, S2, ... in order
//! }
//! ```
//!
//! Also accepted: `for (int i = ...)`, scalar declarations (`double alpha;`), compound
//! assignments (`C[i][j] += A[i][k] * B[k][j];` reads `C[i][j]` first), `//` and `/* */`
//! comments, function calls in right-hand sides (`sqrt(x)`), and `#include` lines.
//! Every error names `file:line:column`.

use crate::affine::Affine;
use crate::error::{CacheError, Result};
use crate::kernel::*;
use std::collections::HashSet;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Float(String),
    Punct(&'static str),
    Eof,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    pos: Pos,
    start: usize,
}

const PUNCTS: &[&str] = &[
    "++", "--", "+=", "-=", "*=", "/=", "<=", ">=", "==", "!=", "&&", "||", "<", ">", "=", "+", "-", "*", "/",
    "%", "(", ")", "[", "]", "{", "}", ";", ",", ":", "?", "!",
];

fn elem_size(ty: &str) -> Option<u64> {
    Some(match ty {
        "double" | "long" | "int64_t" | "uint64_t" | "size_t" => 8,
        "float" | "int" | "int32_t" | "uint32_t" | "unsigned" => 4,
        "short" | "int16_t" | "uint16_t" => 2,
        "char" | "int8_t" | "uint8_t" => 1,
        _ => return None,
    })
}

struct Lexer<'a> {
    file: &'a str,
}

impl Lexer<'_> {
    fn err(&self, pos: Pos, msg: impl Into<String>) -> CacheError {
        CacheError::Kernel { file: self.file.to_string(), line: pos.line, col: pos.col, msg: msg.into() }
    }

    fn lex(&self, src: &str) -> Result<Vec<Token>> {
        let b = src.as_bytes();
        let mut i = 0;
        let (mut line, mut col) = (1u32, 1u32);
        let mut out = Vec::new();
        let adv = |i: &mut usize, line: &mut u32, col: &mut u32, n: usize| {
            for _ in 0..n {
                if b[*i] == b'\n' {
                    *line += 1;
                    *col = 1;
                } else {
                    *col += 1;
                }
                *i += 1;
            }
        };
        while i < b.len() {
            let c = b[i];
            let pos = Pos { line, col };
            if c.is_ascii_whitespace() {
                adv(&mut i, &mut line, &mut col, 1);
            } else if c == b'/' && b.get(i + 1) == Some(&b'/') || c == b'#' && col == 1 {
                while i < b.len() && b[i] != b'\n' {
                    adv(&mut i, &mut line, &mut col, 1);
                }
            } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
                adv(&mut i, &mut line, &mut col, 2);
                loop {
                    if i + 1 >= b.len() {
                        return Err(self.err(pos, "unterminated /* comment"));
                    }
                    if b[i] == b'*' && b[i + 1] == b'/' {
                        adv(&mut i, &mut line, &mut col, 2);
                        break;
                    }
                    adv(&mut i, &mut line, &mut col, 1);
                }
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let s = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    adv(&mut i, &mut line, &mut col, 1);
                }
                out.push(Token { tok: Tok::Ident(src[s..i].to_string()), pos, start: s });
            } else if c.is_ascii_digit() || c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                let s = i;
                let mut float = false;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    if b[i] == b'.' || b[i] == b'e' || b[i] == b'E' {
                        float = true;
                    }
                    adv(&mut i, &mut line, &mut col, 1);
                }
                let text = &src[s..i];
                if float {
                    out.push(Token { tok: Tok::Float(text.to_string()), pos, start: s });
                } else {
                    let v: i64 = text.parse().ok().filter(|v: &i64| *v <= 1 << 40).ok_or_else(|| self.err(pos, format!("bad integer literal '{text}' (integers up to 2^40)")))?;
                    out.push(Token { tok: Tok::Int(v), pos, start: s });
                }
            } else {
                let p = PUNCTS
                    .iter()
                    .find(|p| src[i..].starts_with(**p))
                    .ok_or_else(|| self.err(pos, format!("unexpected character '{}'", c as char)))?;
                adv(&mut i, &mut line, &mut col, p.len());
                out.push(Token { tok: Tok::Punct(p), pos, start: i - p.len() });
            }
        }
        out.push(Token { tok: Tok::Eof, pos: Pos { line, col }, start: src.len() });
        Ok(out)
    }
}

/// Expression tree of right-hand sides (only the array references matter to the cache).
#[derive(Clone, Debug)]
enum Expr {
    Num,
    Var(String, Pos),
    Index(String, Vec<Expr>, Pos),
    Call(Vec<Expr>),
    Neg(Box<Expr>, Pos),
    Bin(&'static str, Box<Expr>, Box<Expr>, Pos),
}

struct Parser<'a> {
    file: &'a str,
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    k: Kernel,
    scalars: HashSet<String>,
    loop_stack: Vec<usize>,
    /// Downward loops being parsed: the variable, and the first value `U` it takes. Such
    /// a loop runs upward from 0 in the kernel, and its variable `i` of the source stands
    /// for `U - i` in every affine form inside it.
    mirrored: Vec<(String, Affine)>,
    /// Nesting of parentheses, signs, calls and subscripts around the current expression.
    nesting: usize,
    /// Operators in the current statement or loop header.
    operators: usize,
    /// Conditions of the `if`s enclosing the current point, each `g >= 0`.
    guards: Vec<Affine>,
}

/// Limits that keep every later pass (reference collection, affine forms, the simulator,
/// dropping the tree) within the stack, whatever the input: far beyond any real kernel
/// (PolyBench nests at most 4 loops and writes expressions of a few dozen operators).
const MAX_LOOP_DEPTH: usize = 32;
const MAX_NESTING: usize = 200;
const MAX_OPERATORS: usize = 5000;
/// Conditions of the `if`s around one statement (each nested `if` adds at least one).
const MAX_GUARDS: usize = 64;

/// Parses kernel source text; `file` is used in error messages.
pub fn parse_kernel(file: &str, src: &str) -> Result<Kernel> {
    let toks = Lexer { file }.lex(src)?;
    let k = Kernel {
        file: file.to_string(),
        source: src.to_string(),
        params: vec![],
        arrays: vec![],
        loops: vec![],
        statements: vec![],
        refs: vec![],
        body: vec![],
    };
    let mut p = Parser { file, src, toks, i: 0, k, scalars: HashSet::new(), loop_stack: vec![], mirrored: vec![], nesting: 0, operators: 0, guards: vec![] };
    let mut body = Vec::new();
    while p.peek() != &Tok::Eof {
        body.extend(p.item()?);
    }
    p.k.body = body;
    if p.k.statements.is_empty() {
        return Err(p.err_at(p.toks[p.i].pos, "the kernel has no statements"));
    }
    Ok(p.k)
}

impl Parser<'_> {
    fn err_at(&self, pos: Pos, msg: impl Into<String>) -> CacheError {
        CacheError::Kernel { file: self.file.to_string(), line: pos.line, col: pos.col, msg: msg.into() }
    }
    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }
    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.i + n).min(self.toks.len() - 1)].tok
    }
    fn pos(&self) -> Pos {
        self.toks[self.i].pos
    }
    fn next(&mut self) -> Token {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }
    fn describe(t: &Tok) -> String {
        match t {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Int(v) => format!("'{v}'"),
            Tok::Float(s) => format!("'{s}'"),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::Eof => "end of file".into(),
        }
    }
    fn expect(&mut self, p: &'static str) -> Result<Token> {
        if self.peek() == &Tok::Punct(p) {
            Ok(self.next())
        } else {
            Err(self.err_at(self.pos(), format!("expected '{p}', found {}", Self::describe(self.peek()))))
        }
    }
    fn eat(&mut self, p: &'static str) -> bool {
        if self.peek() == &Tok::Punct(p) {
            self.next();
            true
        } else {
            false
        }
    }
    fn ident(&mut self, what: &str) -> Result<(String, Pos)> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let pos = self.pos();
                self.next();
                Ok((s, pos))
            }
            t => Err(self.err_at(self.pos(), format!("expected {what}, found {}", Self::describe(&t)))),
        }
    }

    fn item(&mut self) -> Result<Vec<Node>> {
        match self.peek().clone() {
            Tok::Ident(s) if s == "param" => {
                self.next();
                loop {
                    let (name, pos) = self.ident("a parameter name")?;
                    self.check_fresh(&name, pos)?;
                    self.k.params.push(name);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect(";")?;
                Ok(vec![])
            }
            Tok::Ident(s) if elem_size(&s).is_some() || s == "const" || s == "unsigned" => {
                self.declaration()?;
                Ok(vec![])
            }
            _ => self.stmt(),
        }
    }

    fn check_fresh(&self, name: &str, pos: Pos) -> Result<()> {
        if self.k.params.iter().any(|p| p == name) || self.k.array_index(name).is_some() || self.scalars.contains(name) {
            return Err(self.err_at(pos, format!("'{name}' is declared twice")));
        }
        Ok(())
    }

    fn type_name(&mut self) -> Result<(String, u64)> {
        while matches!(self.peek(), Tok::Ident(s) if s == "const" || s == "static" || s == "volatile") {
            self.next();
        }
        let (mut ty, pos) = self.ident("a type")?;
        if ty == "unsigned" {
            if let Tok::Ident(s) = self.peek().clone() {
                if elem_size(&s).is_some() {
                    self.next();
                    ty = format!("unsigned {s}");
                    return Ok((ty, elem_size(&s).unwrap()));
                }
            }
        }
        let size = elem_size(&ty).ok_or_else(|| self.err_at(pos, format!("unknown element type '{ty}' (use double, float, int, long, short, char, int64_t, ...)")))?;
        Ok((ty, size))
    }

    fn declaration(&mut self) -> Result<()> {
        let (ty, size) = self.type_name()?;
        loop {
            let (name, pos) = self.ident("a variable or array name")?;
            self.check_fresh(&name, pos)?;
            if self.peek() == &Tok::Punct("[") {
                let mut dims = Vec::new();
                while self.eat("[") {
                    let e = self.expr()?;
                    let a = self.affine(&e, "array size", false)?;
                    dims.push(a);
                    self.expect("]")?;
                }
                self.k.arrays.push(Array { name, elem_type: ty.clone(), elem_size: size, dims, pos });
            } else {
                if self.eat("=") {
                    self.expr()?;
                }
                self.scalars.insert(name);
            }
            if !self.eat(",") {
                break;
            }
        }
        self.expect(";")?;
        Ok(())
    }

    /// One statement: a loop, an assignment, or an `if` (whose statements it returns).
    fn stmt(&mut self) -> Result<Vec<Node>> {
        self.operators = 0;
        match self.peek().clone() {
            Tok::Punct("{") => Err(self.err_at(self.pos(), "a block must follow a for loop or an if")),
            Tok::Ident(s) if s == "for" => Ok(vec![self.for_loop()?]),
            Tok::Ident(s) if s == "if" => self.if_stmt(),
            Tok::Ident(s) if s == "else" => Err(self.err_at(self.pos(), "'else' without an 'if'")),
            _ => Ok(vec![self.assignment()?]),
        }
    }

    /// `if (c1 && c2 ...) body [else body]` with affine comparisons of loop variables and
    /// parameters: the conditions restrict the domain of every statement inside (PolyBench's
    /// nussinov). The iteration domains stay polyhedra: `else` is taken only after a single
    /// inequality, whose negation is one inequality too; `!=`, `||` and conditions on data
    /// are refused.
    fn if_stmt(&mut self) -> Result<Vec<Node>> {
        self.next();
        self.expect("(")?;
        let mut conds = Vec::new();
        let mut equality = false;
        loop {
            let lhs = self.additive()?;
            let pos = self.pos();
            let op = match self.next().tok {
                Tok::Punct(p @ ("<" | "<=" | ">" | ">=" | "==")) => p,
                t => return Err(self.err_at(pos, format!("expected a comparison (<, <=, >, >=, ==) in the condition, found {}", Self::describe(&t)))),
            };
            let rhs = self.additive()?;
            let (a, b) = (self.affine(&lhs, "the condition", true)?, self.affine(&rhs, "the condition", true)?);
            match op {
                "<" => conds.push(b.sub(&a).add(&Affine::constant(-1))),
                "<=" => conds.push(b.sub(&a)),
                ">" => conds.push(a.sub(&b).add(&Affine::constant(-1))),
                ">=" => conds.push(a.sub(&b)),
                _ => {
                    equality = true;
                    conds.push(a.sub(&b));
                    conds.push(b.sub(&a));
                }
            }
            if !self.eat("&&") {
                break;
            }
        }
        if matches!(self.peek(), Tok::Punct("||")) {
            return Err(self.err_at(self.pos(), "'||' in a condition: the statements' domains would not be polyhedra (write two ifs)"));
        }
        let close = self.expect(")")?;
        if self.guards.len() + conds.len() > MAX_GUARDS {
            return Err(self.err_at(close.pos, format!("more than {MAX_GUARDS} conditions of nested ifs around one statement")));
        }
        let outer = self.guards.len();
        self.guards.extend(conds.iter().cloned());
        let mut body = self.block_or_stmt()?;
        self.guards.truncate(outer);
        if matches!(self.peek(), Tok::Ident(s) if s == "else") {
            let pos = self.pos();
            if conds.len() != 1 || equality {
                return Err(self.err_at(pos, "'else' after a condition of more than one inequality: its domain would not be a polyhedron (write the complementary ifs)"));
            }
            self.next();
            // not (g >= 0)  <=>  -g - 1 >= 0
            self.guards.push(conds[0].scale(-1).add(&Affine::constant(-1)));
            body.extend(self.block_or_stmt()?);
            self.guards.truncate(outer);
        }
        Ok(body)
    }

    fn block_or_stmt(&mut self) -> Result<Vec<Node>> {
        if self.eat("{") {
            let mut body = Vec::new();
            while !self.eat("}") {
                if self.peek() == &Tok::Eof {
                    return Err(self.err_at(self.pos(), "missing '}'"));
                }
                if matches!(self.peek(), Tok::Ident(s) if elem_size(s).is_some()) {
                    return Err(self.err_at(self.pos(), "declarations must come before the loops"));
                }
                body.extend(self.stmt()?);
            }
            Ok(body)
        } else {
            self.stmt()
        }
    }

    fn for_loop(&mut self) -> Result<Node> {
        let for_pos = self.pos();
        self.next();
        self.expect("(")?;
        if matches!(self.peek(), Tok::Ident(s) if elem_size(s).is_some()) {
            self.next();
        }
        let (var, vpos) = self.ident("the loop variable")?;
        if self.k.params.contains(&var) || self.k.array_index(&var).is_some() {
            return Err(self.err_at(vpos, format!("loop variable '{var}' clashes with a parameter or array")));
        }
        if self.loop_stack.iter().any(|&l| self.k.loops[l].var == var) {
            return Err(self.err_at(vpos, format!("loop variable '{var}' is already used by an enclosing loop")));
        }
        self.expect("=")?;
        let lb_e = self.expr()?;
        let lower = self.affine(&lb_e, "loop lower bound", true)?;
        self.expect(";")?;
        let (v2, p2) = self.ident("the loop variable in the condition")?;
        if v2 != var {
            return Err(self.err_at(p2, format!("the condition must test '{var}', found '{v2}'")));
        }
        let op_pos = self.pos();
        let op = match self.next().tok {
            Tok::Punct(p @ ("<" | "<=" | ">" | ">=")) => p,
            t => return Err(self.err_at(op_pos, format!("expected '<', '<=', '>' or '>=', found {}", Self::describe(&t)))),
        };
        if matches!(op, ">" | ">=") {
            return self.downward_loop(for_pos, var, lower, op);
        }
        let ub_e = self.expr()?;
        let mut upper = self.affine(&ub_e, "loop upper bound", true)?;
        if op == "<=" {
            upper = upper.add(&Affine::constant(1));
        }
        self.expect(";")?;
        let step_pos = self.pos();
        let step = if self.eat("++") {
            let (v3, p3) = self.ident("the loop variable")?;
            if v3 != var {
                return Err(self.err_at(p3, format!("the increment must update '{var}'")));
            }
            1
        } else {
            let (v3, p3) = self.ident("the loop variable")?;
            if v3 != var {
                return Err(self.err_at(p3, format!("the increment must update '{var}'")));
            }
            if self.eat("++") {
                1
            } else if self.eat("+=") {
                match self.next().tok {
                    Tok::Int(c) if c > 0 => c,
                    _ => return Err(self.err_at(step_pos, "the step must be a positive integer constant")),
                }
            } else if self.eat("=") {
                let (v4, _) = self.ident("the loop variable")?;
                self.expect("+")?;
                match (v4 == var, self.next().tok) {
                    (true, Tok::Int(c)) if c > 0 => c,
                    _ => return Err(self.err_at(step_pos, "the step must be 'i = i + c' with a positive constant c")),
                }
            } else {
                return Err(self.err_at(step_pos, "only increasing loops with a constant step are supported (i++, i += c)"));
            }
        };
        self.expect(")")?;
        self.loop_body(for_pos, Loop { var, lower, upper, step, depth: 0, pos: for_pos })
    }

    /// `for (i = U; i >= L; i--)`: the kernel runs `i'` from 0 to `U - L` and reads every
    /// `i` inside as `U - i'` (same iterations, same order), so the simulator and the set
    /// method see an increasing loop. Step 1 only.
    fn downward_loop(&mut self, for_pos: Pos, var: String, first: Affine, op: &str) -> Result<Node> {
        let lb_e = self.expr()?;
        let last = self.affine(&lb_e, "loop lower bound", true)?;
        self.expect(";")?;
        let step_pos = self.pos();
        let prefix = self.eat("--");
        let (v3, p3) = self.ident("the loop variable")?;
        if v3 != var {
            return Err(self.err_at(p3, format!("the decrement must update '{var}'")));
        }
        let by_one = prefix
            || self.eat("--")
            || (self.eat("-=") && matches!(self.next().tok, Tok::Int(1)))
            || (self.eat("=") && matches!(self.next().tok, Tok::Ident(ref v) if *v == var) && self.eat("-") && matches!(self.next().tok, Tok::Int(1)));
        if !by_one {
            return Err(self.err_at(step_pos, "a downward loop must step by one (i--, i -= 1)"));
        }
        self.expect(")")?;
        let count = first.sub(&last).add(&Affine::constant(if op == ">=" { 1 } else { 0 }));
        self.mirrored.push((var.clone(), first));
        let node = self.loop_body(for_pos, Loop { var, lower: Affine::constant(0), upper: count, step: 1, depth: 0, pos: for_pos });
        self.mirrored.pop();
        node
    }

    fn loop_body(&mut self, for_pos: Pos, mut l: Loop) -> Result<Node> {
        let id = self.k.loops.len();
        let depth = self.loop_stack.len();
        if depth >= MAX_LOOP_DEPTH {
            return Err(self.err_at(for_pos, format!("loops nested deeper than {MAX_LOOP_DEPTH} are not supported")));
        }
        l.depth = depth;
        self.k.loops.push(l);
        self.loop_stack.push(id);
        let body = self.block_or_stmt()?;
        self.loop_stack.pop();
        Ok(Node::Loop { id, body })
    }

    fn assignment(&mut self) -> Result<Node> {
        let start_tok = self.i;
        let mut label = None;
        if let (Tok::Ident(l), Tok::Punct(":")) = (self.peek().clone(), self.peek_at(1).clone()) {
            label = Some(l);
            self.next();
            self.next();
        }
        let text_start = self.toks[self.i].start;
        let spos = self.pos();
        let lhs = self.postfix()?;
        let op_pos = self.pos();
        let op = match self.next().tok {
            Tok::Punct(p @ ("=" | "+=" | "-=" | "*=" | "/=")) => p,
            t => return Err(self.err_at(op_pos, format!("expected an assignment, found {}", Self::describe(&t)))),
        };
        let mut rhs = self.expr()?;
        // `a = b = e;` with scalars in the middle (deriche): e is read once
        while self.peek() == &Tok::Punct("=") && matches!(&rhs, Expr::Var(n, _) if self.scalars.contains(n)) {
            self.next();
            rhs = self.expr()?;
        }
        let end = self.expect(";")?;
        let text = self.src[text_start..end.start + 1].to_string();
        let _ = start_tok;
        let stmt_id = self.k.statements.len();
        let label = label.unwrap_or_else(|| format!("S{}", stmt_id + 1));
        if self.k.statements.iter().any(|s| s.label == label) {
            return Err(self.err_at(spos, format!("statement label '{label}' is used twice")));
        }
        // Collect references: reads (compound: the LHS first), then the write.
        let mut reads = Vec::new();
        if op != "=" {
            if let Expr::Index(..) = lhs {
                reads.push(lhs.clone());
            }
        }
        collect_refs(&rhs, &mut reads);
        self.k.statements.push(Statement { label, text, refs: vec![], pos: spos, guards: self.guards.clone() });
        // Check the left-hand side first so that errors come in source order.
        if let Expr::Index(..) = &lhs {
            self.make_ref(&lhs, stmt_id, Side::Left, 1, true)?;
        }
        for (n, e) in reads.iter().enumerate() {
            self.add_ref(e, stmt_id, Side::Right, n + 1, false)?;
        }
        match &lhs {
            Expr::Index(..) => self.add_ref(&lhs, stmt_id, Side::Left, 1, true)?,
            Expr::Var(name, pos) => {
                if !self.scalars.contains(name) {
                    return Err(self.err_at(*pos, format!("assignment to undeclared variable '{name}' (declare it, e.g. 'double {name};')")));
                }
            }
            _ => return Err(self.err_at(spos, "the left-hand side must be an array element or a scalar")),
        }
        Ok(Node::Stmt(stmt_id))
    }

    fn add_ref(&mut self, e: &Expr, stmt: usize, side: Side, position: usize, is_write: bool) -> Result<()> {
        let r = self.make_ref(e, stmt, side, position, is_write)?;
        self.k.statements[stmt].refs.push(r.id);
        self.k.refs.push(r);
        Ok(())
    }

    fn make_ref(&self, e: &Expr, stmt: usize, side: Side, position: usize, is_write: bool) -> Result<Reference> {
        let Expr::Index(name, subs, pos) = e else { unreachable!() };
        let array = self.k.array_index(name).ok_or_else(|| self.err_at(*pos, format!("undeclared array '{name}'")))?;
        let dims = self.k.arrays[array].dims.len();
        if subs.len() != dims {
            return Err(self.err_at(*pos, format!("array '{name}' has {dims} dimension(s) but is indexed with {}", subs.len())));
        }
        let mut subscripts = Vec::new();
        for s in subs {
            subscripts.push(self.affine(s, "subscript", true)?);
        }
        let id = self.k.refs.len();
        Ok(Reference { id, stmt, side, position, array, subscripts, loops: self.loop_stack.clone(), is_write, pos: *pos })
    }

    /// Converts an expression to an affine form over parameters (and enclosing loop
    /// variables when `loops` is true), or explains why it is not affine.
    fn affine(&self, e: &Expr, what: &str, loops: bool) -> Result<Affine> {
        let a = self.affine_unchecked(e, what, loops)?;
        const LIMIT: i64 = 1 << 40;
        if a.constant.abs() > LIMIT || a.coeffs.values().any(|c| c.abs() > LIMIT) {
            return Err(self.err_at(self.expr_pos(e), format!("{what}: constants above 2^40 are not supported")));
        }
        Ok(a)
    }

    fn affine_unchecked(&self, e: &Expr, what: &str, loops: bool) -> Result<Affine> {
        match e {
            Expr::Num => Err(self.err_at(self.expr_pos(e), format!("{what}: only integer constants are allowed"))),
            Expr::Var(name, pos) => {
                if let Some(lit) = name.strip_prefix('#') {
                    return Ok(Affine::constant(lit.parse().unwrap()));
                }
                if self.k.params.contains(name) {
                    return Ok(Affine::var(name));
                }
                if loops && self.loop_stack.iter().any(|&l| &self.k.loops[l].var == name) {
                    if let Some((_, first)) = self.mirrored.iter().rev().find(|(v, _)| v == name) {
                        return Ok(first.sub(&Affine::var(name)));
                    }
                    return Ok(Affine::var(name));
                }
                let kind = if self.k.array_index(name).is_some() {
                    "an array"
                } else if self.scalars.contains(name) {
                    "a scalar variable (not a parameter)"
                } else if self.k.loops.iter().any(|l| &l.var == name) {
                    "a loop variable of a loop that does not enclose this point"
                } else {
                    "undeclared (declare it with 'param')"
                };
                Err(self.err_at(*pos, format!("{what} is not affine: '{name}' is {kind}")))
            }
            Expr::Index(name, _, pos) => Err(self.err_at(*pos, format!("{what} is not affine: it reads the array element '{name}[...]'"))),
            Expr::Call(_) => Err(self.err_at(self.expr_pos(e), format!("{what} is not affine: function call"))),
            Expr::Neg(a, _) => Ok(self.affine(a, what, loops)?.scale(-1)),
            Expr::Bin(op, a, b, pos) => {
                let (x, y) = (self.affine(a, what, loops)?, self.affine(b, what, loops)?);
                if *op == "*" && (x.is_constant() || y.is_constant()) {
                    let (k, other) = if x.is_constant() { (x.constant, &y) } else { (y.constant, &x) };
                    let too_big = |c: i64| (k as i128 * c as i128).abs() > 1i128 << 40;
                    if too_big(other.constant) || other.coeffs.values().any(|&c| too_big(c)) {
                        return Err(self.err_at(*pos, format!("{what}: constants above 2^40 are not supported")));
                    }
                }
                match *op {
                    "+" => Ok(x.add(&y)),
                    "-" => Ok(x.sub(&y)),
                    "*" if x.is_constant() => Ok(y.scale(x.constant)),
                    "*" if y.is_constant() => Ok(x.scale(y.constant)),
                    "*" => Err(self.err_at(*pos, format!("{what} is not affine: product of two variables ({x}) * ({y})"))),
                    "/" if x.is_constant() && y.is_constant() && y.constant != 0 && x.constant % y.constant == 0 => {
                        Ok(Affine::constant(x.constant / y.constant))
                    }
                    op => Err(self.err_at(*pos, format!("{what} is not affine: operator '{op}' on ({x}) and ({y})"))),
                }
            }
        }
    }

    fn expr_pos(&self, e: &Expr) -> Pos {
        match e {
            Expr::Var(_, p) | Expr::Index(_, _, p) | Expr::Neg(_, p) | Expr::Bin(_, _, _, p) => *p,
            _ => self.pos(),
        }
    }

    /// `c ? a : b` reads the references of `c`, `a` and `b`, in that order: what a
    /// branch-free select compiles to, and independent of the data (the set method needs
    /// every access's domain as a polyhedron). Comparisons likewise read both sides.
    fn expr(&mut self) -> Result<Expr> {
        let condition = self.comparison()?;
        let pos = self.pos();
        if !self.eat("?") {
            return Ok(condition);
        }
        self.count_operator(pos)?;
        let yes = self.nested(pos, Self::expr)?;
        self.expect(":")?;
        let no = self.nested(pos, Self::expr)?;
        Ok(Expr::Call(vec![condition, yes, no]))
    }

    fn comparison(&mut self) -> Result<Expr> {
        let lhs = self.additive()?;
        let pos = self.pos();
        let op = match self.peek() {
            Tok::Punct(p @ ("<" | "<=" | ">" | ">=" | "==" | "!=")) => *p,
            _ => return Ok(lhs),
        };
        self.count_operator(pos)?;
        self.next();
        let rhs = self.additive()?;
        Ok(Expr::Bin(op, Box::new(lhs), Box::new(rhs), pos))
    }

    fn additive(&mut self) -> Result<Expr> {
        let mut lhs = self.term()?;
        loop {
            let pos = self.pos();
            let op = match self.peek() {
                Tok::Punct(p @ ("+" | "-")) => *p,
                _ => return Ok(lhs),
            };
            self.count_operator(pos)?;
            self.next();
            let rhs = self.term()?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), pos);
        }
    }
    fn term(&mut self) -> Result<Expr> {
        let mut lhs = self.unary()?;
        loop {
            let pos = self.pos();
            let op = match self.peek() {
                Tok::Punct(p @ ("*" | "/" | "%")) => *p,
                _ => return Ok(lhs),
            };
            self.count_operator(pos)?;
            self.next();
            let rhs = self.unary()?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), pos);
        }
    }
    fn unary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        if self.eat("-") {
            let operand = self.nested(pos, Self::unary)?;
            return Ok(Expr::Neg(Box::new(operand), pos));
        }
        if self.eat("+") {
            return self.nested(pos, Self::unary);
        }
        self.postfix()
    }

    /// Parses one nested part with `inner`, refusing nesting beyond [`MAX_NESTING`] at
    /// `pos` (a recursive descent has no other bound on its stack).
    fn nested(&mut self, pos: Pos, inner: fn(&mut Self) -> Result<Expr>) -> Result<Expr> {
        if self.nesting >= MAX_NESTING {
            return Err(self.err_at(pos, format!("expression nested deeper than {MAX_NESTING} levels")));
        }
        self.nesting += 1;
        let e = inner(self);
        self.nesting -= 1;
        e
    }

    fn count_operator(&mut self, pos: Pos) -> Result<()> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return Err(self.err_at(pos, format!("more than {MAX_OPERATORS} operators in one statement")));
        }
        Ok(())
    }
    fn postfix(&mut self) -> Result<Expr> {
        let pos = self.pos();
        match self.next().tok {
            Tok::Int(v) => Ok(Expr::Var(format!("#{v}"), pos)),
            Tok::Float(_) => Ok(Expr::Num),
            Tok::Punct("(") if matches!((self.peek(), self.peek_at(1)), (Tok::Ident(t), Tok::Punct(")")) if elem_size(t).is_some()) => {
                // a cast to an element type changes no access
                self.next();
                self.next();
                self.nested(pos, Self::unary)
            }
            Tok::Punct("(") => {
                let e = self.nested(pos, Self::expr)?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Ident(name) => {
                if self.eat("(") {
                    let mut args = Vec::new();
                    if !self.eat(")") {
                        loop {
                            args.push(self.nested(pos, Self::expr)?);
                            if self.eat(")") {
                                break;
                            }
                            self.expect(",")?;
                        }
                    }
                    return Ok(Expr::Call(args));
                }
                let mut subs = Vec::new();
                while self.eat("[") {
                    subs.push(self.nested(pos, Self::expr)?);
                    self.expect("]")?;
                }
                if subs.is_empty() {
                    Ok(Expr::Var(name, pos))
                } else {
                    Ok(Expr::Index(name, subs, pos))
                }
            }
            t => Err(self.err_at(pos, format!("expected an expression, found {}", Self::describe(&t)))),
        }
    }
}

/// Array references of an expression in evaluation order (left to right).
fn collect_refs(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Num | Expr::Var(..) => {}
        Expr::Index(_, subs, _) => {
            // Subscript reads (non-affine) are rejected later; list the element itself.
            let _ = subs;
            out.push(e.clone());
        }
        Expr::Call(args) => args.iter().for_each(|a| collect_refs(a, out)),
        Expr::Neg(a, _) => collect_refs(a, out),
        Expr::Bin(_, a, b, _) => {
            collect_refs(a, out);
            collect_refs(b, out);
        }
    }
}
