//! Property: for random straight-line and branching functions with random trace calls (random
//! declarations: idempotent, disabled, movement limits; barriers; loops; calls of helpers that
//! trace or not), the decoded streams of the original and the optimised module are identical.

use kansoku_tracepoints::{check, optimize, OptimizeOptions, RunOptions};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Expr {
    Const(i32),
    Local(u8),
    Param,
    Bin(&'static str, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone)]
enum Stmt {
    Trace(u32, Vec<Expr>),
    /// The same call twice in a row (adjacent repeats, removable when idempotent).
    TraceTwice(u32, Vec<Expr>),
    Set(u8, Expr),
    Barrier,
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    Loop(u8, Vec<Stmt>),
    CallTracing(Expr),
    CallPure(u8, Expr),
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (-3i32..300).prop_map(Expr::Const),
        (0u8..3).prop_map(Expr::Local),
        Just(Expr::Param),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        (
            prop::sample::select(vec!["i32.add", "i32.sub", "i32.mul", "i32.shl", "i32.xor", "i32.and", "i32.or", "i32.shr_u"]),
            inner.clone(),
            inner,
        )
            .prop_map(|(op, a, b)| Expr::Bin(op, Box::new(a), Box::new(b)))
    })
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let simple = prop_oneof![
        4 => (1u32..7, prop::collection::vec(expr(), 0..4)).prop_map(|(id, a)| Stmt::Trace(id, a)),
        1 => (1u32..7, prop::collection::vec(expr(), 0..3)).prop_map(|(id, a)| Stmt::TraceTwice(id, a)),
        2 => (0u8..3, expr()).prop_map(|(l, e)| Stmt::Set(l, e)),
        1 => Just(Stmt::Barrier),
        1 => expr().prop_map(Stmt::CallTracing),
        1 => (0u8..3, expr()).prop_map(|(l, e)| Stmt::CallPure(l, e)),
    ];
    simple.prop_recursive(2, 24, 6, |inner| {
        prop_oneof![
            (expr(), prop::collection::vec(inner.clone(), 0..5), prop::collection::vec(inner.clone(), 0..5))
                .prop_map(|(c, t, e)| Stmt::If(c, t, e)),
            (1u8..4, prop::collection::vec(inner, 1..5)).prop_map(|(n, b)| Stmt::Loop(n, b)),
        ]
    })
}

fn wat_expr(e: &Expr) -> String {
    match e {
        Expr::Const(c) => format!("(i32.const {c})"),
        Expr::Local(l) => format!("(local.get $l{l})"),
        Expr::Param => "(local.get $x)".into(),
        Expr::Bin(op, a, b) => format!("({op} {} {})", wat_expr(a), wat_expr(b)),
    }
}

fn wat_stmts(s: &[Stmt], depth: &mut u32, out: &mut String) {
    for st in s {
        match st {
            Stmt::Trace(id, args) => {
                out.push_str(&format!("(call $t{} (i32.const {id})", args.len()));
                for a in args {
                    out.push(' ');
                    out.push_str(&wat_expr(a));
                }
                out.push_str(")\n");
            }
            Stmt::TraceTwice(id, args) => {
                let one = [Stmt::Trace(*id, args.clone())];
                wat_stmts(&one, depth, out);
                wat_stmts(&one, depth, out);
            }
            Stmt::Set(l, e) => out.push_str(&format!("(local.set $l{l} {})\n", wat_expr(e))),
            Stmt::Barrier => out.push_str("(call $bar)\n"),
            Stmt::If(c, t, e) => {
                out.push_str(&format!("(if {} (then\n", wat_expr(c)));
                wat_stmts(t, depth, out);
                out.push_str(") (else\n");
                wat_stmts(e, depth, out);
                out.push_str("))\n");
            }
            Stmt::Loop(n, body) => {
                // a counted loop with its own counter local
                let c = *depth;
                *depth += 1;
                out.push_str(&format!("(local.set $c{c} (i32.const {n}))\n(loop $L{c}\n"));
                wat_stmts(body, depth, out);
                out.push_str(&format!(
                    "(local.set $c{c} (i32.sub (local.get $c{c}) (i32.const 1)))\n(br_if $L{c} (local.get $c{c})))\n"
                ));
            }
            Stmt::CallTracing(e) => out.push_str(&format!("(call $helper {})\n", wat_expr(e))),
            Stmt::CallPure(l, e) => out.push_str(&format!("(local.set $l{l} (call $pure {}))\n", wat_expr(e))),
        }
    }
}

fn decl_line(id: u32, flags: u8, mv: i32) -> String {
    let f = match flags {
        0..=2 => "",
        3 => "idempotent",
        4 => "disabled",
        _ => "idempotent,disabled",
    };
    format!("id={id};name=p{id};args=;flags={f};move={mv}\\n")
}

fn module(stmts: &[Stmt], decls: &[(u8, i32)]) -> String {
    let mut body = String::new();
    let mut loops = 0;
    wat_stmts(stmts, &mut loops, &mut body);
    let counters: String = (0..loops).map(|c| format!("(local $c{c} i32)")).collect();
    let decl: String = decls.iter().enumerate().map(|(i, (f, m))| decl_line(i as u32 + 1, *f, *m)).collect();
    format!(
        r#"(module
  (import "kansoku" "trace0" (func $t0 (param i32)))
  (import "kansoku" "trace1" (func $t1 (param i32 i32)))
  (import "kansoku" "trace2" (func $t2 (param i32 i32 i32)))
  (import "kansoku" "trace3" (func $t3 (param i32 i32 i32 i32)))
  (import "kansoku" "barrier" (func $bar))
  (@custom "kansoku.decl" "{decl}")
  (func $helper (param i32) (call $t2 (i32.const 6) (local.get 0) (i32.mul (local.get 0) (i32.const 3))))
  (func $pure (param i32) (result i32) (i32.xor (local.get 0) (i32.const 0x1234)))
  (func (export "run") (param $x i32) (result i32) (local $l0 i32) (local $l1 i32) (local $l2 i32) {counters}
    (local.set $l1 (i32.const 7))
{body}
    (i32.add (local.get $l0) (i32.xor (local.get $l1) (local.get $l2)))))
"#
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn decoded_streams_are_identical(
        stmts in prop::collection::vec(stmt(), 1..14),
        decls in prop::collection::vec((0u8..7, prop::sample::select(vec![-1, -1, 0, 2, 5, 12])), 6),
        budget in prop::option::of(0u32..4),
        x in -50i32..50,
    ) {
        let src = module(&stmts, &decls);
        let wasm = wat::parse_str(&src).unwrap();
        let o = optimize(&wasm, &OptimizeOptions { max_new_ids: budget, ..Default::default() }).unwrap();
        if let Some(b) = budget {
            prop_assert!(o.report.new_ids_used <= b);
        }
        for arg in [x, x.wrapping_mul(-7) + 1] {
            // Cranelift unoptimising: compiling two modules is most of a case's cost, and
            // its optimisations keep a module's meaning, so the streams compared are the same.
            let run = RunOptions { args: vec![arg.to_string()], optimise_code: false, ..Default::default() };
            let r = check(&wasm, &o.wasm, &run, 0).unwrap();
            prop_assert!(r.identical, "x={}: {:?}\n{}", arg, r.first_difference, src);
            prop_assert!(r.same_results);
            prop_assert!(r.optimised.records <= r.original.records);
        }
    }
}

/// The generator must actually exercise the optimiser: over a fixed sample of programs, merges,
/// derived arguments, removals and movement limits all occur.
#[test]
fn generator_exercises_every_pass() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = (
        prop::collection::vec(stmt(), 1..14),
        prop::collection::vec((0u8..7, prop::sample::select(vec![-1, -1, 0, 2, 5, 12])), 6),
    );
    let (mut merged, mut derived, mut idem, mut disabled, mut barriers) = (0, 0, 0, 0, 0);
    for _ in 0..100 {
        let (stmts, decls) = strat.new_tree(&mut runner).unwrap().current();
        let wasm = wat::parse_str(module(&stmts, &decls)).unwrap();
        let o = optimize(&wasm, &OptimizeOptions::default()).unwrap();
        merged += o.report.groups_merged;
        derived += o.report.args_derived;
        idem += o.report.removed_idempotent;
        disabled += o.report.removed_disabled;
        barriers += o.report.barriers_removed;
    }
    assert!(merged > 50 && derived > 10 && idem > 0 && disabled > 10 && barriers > 10,
        "merged {merged} derived {derived} idempotent {idem} disabled {disabled} barriers {barriers}");
}
