//! Inputs that panicked before (issue 15, items 4 and 5): now clear errors.

use kansoku_reconstruct::sampling::Sampler;
use kansoku_reconstruct::{Granularity, ReconstructError, Scores, Weighting};

#[test]
fn scores_too_large_to_add_are_refused_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.toml");
    std::fs::write(&path, "[likelihood]\nfunction_match = 1000000000000000000\n").unwrap();
    let e = Scores::from_file(&path, Granularity::Function, Weighting::Count).err().unwrap().to_string();
    assert!(e.contains("huge.toml") && e.contains("function_match = 1000000000000000000") && e.contains("outside"), "{e}");
    std::fs::write(&path, "[similarity]\noffset = { \"1\" = -9000000000000000000 }\n").unwrap();
    let e = Scores::from_file(&path, Granularity::Function, Weighting::Count).err().unwrap().to_string();
    assert!(e.contains("offset.1"), "{e}");
    std::fs::write(&path, "[likelihood]\nfunction_match = 1073741824\n").unwrap();
    assert!(Scores::from_file(&path, Granularity::Function, Weighting::Count).is_ok());
}

#[test]
fn a_skid_as_long_as_the_period_is_refused() {
    assert!(matches!(Sampler::new(31, u64::MAX, 1), Err(ReconstructError::SkidTooLarge { .. })));
    assert!(matches!(Sampler::new(31, 31, 1), Err(ReconstructError::SkidTooLarge { .. })));
    assert!(Sampler::new(31, 30, 1).is_ok());
}
