//! `cache eval` on any formulas file: both formats, evaluated at a few points.
#![no_main]
use kansoku_cache::model::KernelFormulas;
use kansoku_cache::sets::SetFormulas;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = serde_json::from_slice::<KernelFormulas>(data) {
        for n in [0, 1, 7, 1000, i64::MAX] {
            let _ = f.eval_n(n);
        }
    }
    if let Ok(f) = serde_json::from_slice::<SetFormulas>(data) {
        // Every level of a hierarchy's file, as `cache eval` evaluates them.
        for level in f.levels() {
            for v in [1, 7, 1000] {
                let values = level.params.iter().map(|p| (p.clone(), v)).collect();
                let _ = level.eval(&values);
            }
        }
    }
});
