use kansoku_cache::*;

fn seed() -> Kernel {
    load_kernel(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/seed.k")).unwrap()
}

fn seed_layout() -> LayoutSpec {
    LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap()
}

#[test]
fn seed_tables_match_figure_7() {
    let k = seed();
    let p2 = k.find_ref("S3:right:1").unwrap();
    assert_eq!(p2, 2, "the seed calls A[k] in S3 position P2");
    let info = kernel_info(&k, CacheConfig::parse("assoc=2,line=32,sets=4").unwrap(), &seed_layout(), None, Some(p2)).unwrap();
    let r0 = &info.references[0];
    assert_eq!((r0.statement.as_str(), r0.side.as_str(), r0.position, r0.array.as_str()), ("S1", "left", 1, "A"));
    assert_eq!(r0.subscripts, vec!["i"]);
    assert_eq!(r0.loop_vars, vec!["i"]);
    let data = info.data.unwrap();
    assert_eq!(data.iter().map(|d| (d.start, d.elem_size, d.elems)).collect::<Vec<_>>(), vec![(0, 8, 100), (800, 8, 100), (1600, 8, 100)]);
    assert_eq!(info.references.len(), 4);
}

#[test]
fn seed_simulator_gives_zero_compulsory_one_conflict() {
    let k = seed();
    let params = parse_params("X=10,Y=10,Z=10").unwrap();
    let st = simulate(&k, &params, &seed_layout(), CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()).unwrap();
    let p2 = st[k.find_ref("S3:right:1").unwrap()];
    assert_eq!(p2, RefStats { accesses: 10, hits: 9, compulsory: 0, other: 1 });
}
