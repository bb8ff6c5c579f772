//! Fuzz-style property tests of the kernel parser (outside input): it never panics, and
//! every error names a position inside the text (line >= 1, column >= 1).

use kansoku_cache::*;
use proptest::prelude::*;

fn check(src: &str) -> Result<(), TestCaseError> {
    match parse_kernel("f.k", src) {
        Ok(k) => {
            // A parsed kernel must also instantiate or fail cleanly for small parameters.
            let params: ParamValues = k.params.iter().map(|p| (p.clone(), 3)).collect();
            if let Ok(p) = Program::new(&k, &params, &LayoutSpec::default()) {
                let w = p.work(10_000_000);
                if w.complete {
                    let mut n = 0u64;
                    p.for_each_access(|_, _| n += 1);
                    prop_assert_eq!(n, w.accesses);
                }
            }
        }
        Err(CacheError::Kernel { line, col, .. }) => {
            prop_assert!(line >= 1 && col >= 1);
            prop_assert!(line as usize <= src.lines().count().max(1) + 1);
        }
        Err(e) => prop_assert!(false, "unexpected error kind: {e}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn random_token_soup_never_panics(src in "(param|double|for|int|[A-Z]|[a-k]|[0-9]{1,3}|[-+*/%<>=;:,(){}\\[\\] \n]|\\+\\+|<=|\\+=){0,60}") {
        check(&src)?;
    }

    #[test]
    fn mutated_kernels_never_panic(which in 0usize..9, edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(vec!['[', ']', '(', ')', ';', 'i', 'N', '*', '+', '1', '{', '}', '=', ' ', '\n'])), 1..4)) {
        let mut s: Vec<char> = BUNDLED_KERNELS[which].1.chars().collect();
        for (idx, op, ch) in edits {
            if s.is_empty() { break; }
            let i = idx.index(s.len());
            match op {
                0 => { s.remove(i); }
                1 => s.insert(i, ch),
                _ => s[i] = ch,
            }
        }
        let src: String = s.into_iter().collect();
        check(&src)?;
    }
}
