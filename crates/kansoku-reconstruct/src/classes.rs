//! Iterations that differ (issue 42). The seed rebuilds one iteration from the samples of
//! many, which is right only when they all execute the same instructions. Real loops do
//! not: a first call through the PLT runs the dynamic linker's binding, blocks of other
//! lengths take other trips through the loop. When the marker hits carry instruction
//! counts, the iterations fall into *classes* by their length in instructions (equal
//! length is what `phase` needs, and iterations of one length are, in the loops measured,
//! the same instructions); each class is rebuilt on its own, from its own samples, so a
//! handful of odd iterations neither switch `phase` off for the rest nor mix into their trace.

use serde::Serialize;

use crate::split::Splitting;

/// The iterations of one length.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IterationClass {
    /// Instructions from a marker hit to the next.
    pub length: u64,
    /// Complete iterations of this length, and their share of all complete iterations.
    pub iterations: usize,
    /// Their share of all complete iterations (0–1).
    pub share: f64,
    /// Samples that fell in them.
    pub samples: usize,
    /// The first of them (0 = the first complete iteration of the recording).
    pub first_iteration: usize,
}

impl IterationClass {
    /// Whether its samples can give every instruction one: at least one per position.
    /// Fewer cannot cover the iteration, whatever the solver.
    pub fn enough_samples(&self) -> bool {
        self.samples as u64 >= self.length
    }
}

/// The classes of complete iterations by length, most iterations first (ties: more
/// samples, then shorter); `None` when some iteration's length is unknown (no counts at
/// marker hits, or not `--split marker`).
pub(crate) fn by_length(splitting: &Splitting) -> Option<Vec<IterationClass>> {
    if splitting.iterations() == 0 || splitting.sequences.iter().any(|s| s.length.is_none()) || splitting.quiet.iter().any(|q| q.length.is_none()) {
        return None;
    }
    let mut by: std::collections::BTreeMap<u64, IterationClass> = std::collections::BTreeMap::new();
    let mut add = |length: u64, first: usize, iterations: usize, samples: usize| {
        let c = by.entry(length).or_insert(IterationClass { length, iterations: 0, share: 0.0, samples: 0, first_iteration: first });
        c.first_iteration = c.first_iteration.min(first);
        c.iterations += iterations;
        c.samples += samples;
    };
    for s in &splitting.sequences {
        add(s.length.expect("checked above"), s.iteration, 1, s.samples.len());
    }
    for q in &splitting.quiet {
        add(q.length.expect("checked above"), q.first_iteration, q.iterations, 0);
    }
    let total = splitting.iterations() as f64;
    let mut out: Vec<IterationClass> = by.into_values().map(|c| IterationClass { share: c.iterations as f64 / total, ..c }).collect();
    out.sort_by(|a, b| b.iterations.cmp(&a.iterations).then(b.samples.cmp(&a.samples)).then(a.length.cmp(&b.length)));
    Some(out)
}

/// The splitting restricted to the iterations of `length`: one length, so `phase` applies.
pub fn restrict(splitting: &Splitting, length: u64) -> Splitting {
    let sequences: Vec<_> = splitting.sequences.iter().filter(|s| s.length == Some(length)).cloned().collect();
    let kept: usize = sequences.iter().map(|s| s.samples.len()).sum();
    let all: usize = splitting.sequences.iter().map(|s| s.samples.len()).sum();
    Splitting {
        sequences,
        quiet: splitting.quiet.iter().filter(|q| q.length == Some(length)).copied().collect(),
        iteration_length: Some(length),
        distinct_lengths: 1,
        // samples of the other classes are not this class's
        dropped: splitting.dropped + (all - kept),
        samples: splitting.samples,
        markers: splitting.markers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::Info;
    use crate::split::PartialSequence;

    fn seq(iteration: usize, length: u64, samples: usize) -> PartialSequence {
        PartialSequence { iteration, samples: vec![Info::new(0, 0, 0); samples], positions: vec![Some(0); samples], times: vec![0; samples], length: Some(length) }
    }

    #[test]
    fn an_odd_first_iteration_is_a_class_of_its_own() {
        let mut sequences = vec![seq(0, 1557, 50)];
        sequences.extend((1..100).map(|i| seq(i, 315, 10)));
        let s = Splitting { sequences, quiet: Vec::new(), iteration_length: Some(315), distinct_lengths: 2, dropped: 0, samples: 1040, markers: 101 };
        let c = by_length(&s).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].length, c[0].iterations, c[0].samples, c[0].first_iteration), (315, 99, 990, 1));
        assert_eq!((c[1].length, c[1].iterations, c[1].first_iteration), (1557, 1, 0));
        assert!((c[0].share - 0.99).abs() < 1e-9 && c[0].enough_samples() && !c[1].enough_samples());
        let r = restrict(&s, 315);
        assert_eq!((r.sequences.len(), r.distinct_lengths, r.iteration_length, r.dropped), (99, 1, Some(315), 50));
        assert!(r.sequences.iter().all(|q| q.length == Some(315)));
    }

    #[test]
    fn unknown_lengths_make_no_classes() {
        let mut q = seq(0, 5, 1);
        q.length = None;
        let s = Splitting { sequences: vec![q], ..Default::default() };
        assert_eq!(by_length(&s), None);
    }
}
