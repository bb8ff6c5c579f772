use kansoku_cache::model::*;
use kansoku_cache::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let k = load_kernel(std::path::Path::new(&args[1])).unwrap();
    let mut fam = Family::all_varying(&k);
    if args.len() > 2 && !args[2].is_empty() {
        let fixed = parse_params(&args[2]).unwrap();
        fam.varying.retain(|p| !fixed.contains_key(p));
        fam.fixed = fixed;
    }
    let layout = if k.file.contains("seed") { LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap() } else { LayoutSpec::Consecutive { start: 0, align: 32 } };
    let caches: Vec<CacheConfig> = ["assoc=1,line=32,sets=4", "assoc=2,line=32,sets=4", "assoc=4,line=32,sets=4", "assoc=8,line=32,sets=4"].iter().map(|s| CacheConfig::parse(s).unwrap()).collect();
    let t = std::time::Instant::now();
    let m = build_model(&k, &ModelOptions::new(fam, layout, caches)).unwrap();
    println!("built in {:?}, sampled {:?}", t.elapsed(), m[0].sampled_sizes);
    for f in &m {
        for r in &f.refs {
            print!("{}:{}/{}/{} ", r.reference, r.compulsory.period(), r.conflict.period(), r.conflict.last_from());
        }
        println!();
    }
    println!("{}", m[1]);
}
