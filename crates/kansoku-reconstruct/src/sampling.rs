//! Sampling an exact trace the way a counter overflowing every P instructions would, to
//! test reconstruction apart from the hardware; and the seed's worked example as data.

use std::path::{Path, PathBuf};

use kansoku_core::{Event, Header, RecordingKind, RecordingReader, RecordingWriter, Sample};

use crate::error::{FileError, ReconstructError};
use crate::info::{Info, Names, Observation};

/// What [`sample_recording`] wrote: `kansoku sample`'s report.
#[derive(Debug, serde::Serialize)]
pub struct SampleReport {
    /// The sampled recording written.
    pub output: PathBuf,
    /// Instructions between counter overflows.
    pub period: u64,
    /// Up to how many instructions after the overflow a sample is reported (0: none).
    pub skid: u64,
    /// Instructions of the exact trace read.
    pub instructions: u64,
    /// Samples written.
    pub samples: u64,
    /// Marker hits written.
    pub markers: u64,
    /// Where the exact trace was cut off, if it was (everything before it was sampled).
    pub truncated_at: Option<u64>,
}

/// Samples the exact trace `exact` into the recording `output`, as [`Sampler`] does: the
/// recording's header says it was simulated, from which file, at which period and skid,
/// and carries the trace's marker on.
pub fn sample_recording(exact: &Path, output: &Path, period: u64, skid: u64, seed: u64) -> Result<SampleReport, FileError> {
    let mut reader = RecordingReader::open(exact)?;
    if reader.header().kind != RecordingKind::ExactTrace {
        return Err(FileError::NotExact { path: exact.to_path_buf() });
    }
    let src = reader.header().clone();
    let mut header = Header::new(RecordingKind::Samples, src.program.clone(), src.args.clone())
        .with_parameter("clock", "instructions")
        .with_parameter("period", period)
        .with_parameter("skid", skid)
        .with_parameter("simulated_from", exact.to_string_lossy().to_string());
    for key in ["marker_function", "marker"] {
        if let Some(m) = src.parameters.get(key) {
            header = header.with_parameter(key, m.clone());
        }
    }
    let mut sampler = Sampler::new(period, skid, seed)?;
    let mut writer = RecordingWriter::create(output, &header)?;
    let mut failure = None;
    while let Some(event) = reader.next_event()? {
        sampler.feed(&event, &mut |e| {
            if failure.is_none() {
                failure = writer.write(&e).err();
            }
        });
        if let Some(e) = failure.take() {
            return Err(e.into());
        }
    }
    writer.finish()?;
    let (samples, markers, instructions) = (sampler.samples, sampler.markers, sampler.instructions());
    Ok(SampleReport { output: output.to_path_buf(), period, skid, instructions, samples, markers, truncated_at: reader.truncated_at() })
}

/// Turns the events of an exact trace into those of a sampled recording. The counter
/// overflows after every `period` instructions (the first sample is instruction P−1,
/// counting from 0); with `skid` > 0 the reported instruction is up to `skid` later
/// (uniform, from a seeded generator), as an interrupt arriving late would report it,
/// with the instruction count read at that moment. Times are instruction indices
/// (1 ns per instruction): an exact trace has no timing of its own.
pub struct Sampler {
    period: u64,
    skid: u64,
    rng: u64,
    count: u64,
    next_overflow: u64,
    pending: std::collections::VecDeque<u64>,
    /// Samples taken so far.
    pub samples: u64,
    /// Marker hits passed on so far.
    pub markers: u64,
}

impl Sampler {
    /// A sampler every `period` instructions, each sample reported `skid` instructions
    /// late at most (drawn from `seed`); refuses period 0 and a skid not below the period.
    pub fn new(period: u64, skid: u64, seed: u64) -> Result<Sampler, ReconstructError> {
        if period == 0 {
            return Err(ReconstructError::ZeroPeriod);
        }
        // A sample must be reported before the next counter overflow: skid is a few
        // instructions on real hardware, and the pending samples stay in order only so.
        if skid >= period {
            return Err(ReconstructError::SkidTooLarge { skid, period });
        }
        Ok(Sampler {
            period,
            skid,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            count: 0,
            next_overflow: period - 1,
            pending: Default::default(),
            samples: 0,
            markers: 0,
        })
    }

    fn random(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Feeds one event of the exact trace; `out` receives the sampled recording's events.
    pub fn feed(&mut self, event: &Event, out: &mut dyn FnMut(Event)) {
        match event {
            Event::Instruction { addr } => {
                let index = self.count;
                if index == self.next_overflow {
                    let delay = if self.skid > 0 { self.random() % (self.skid + 1) } else { 0 };
                    self.pending.push_back(index + delay);
                    self.next_overflow += self.period;
                }
                while self.pending.front() == Some(&index) {
                    self.pending.pop_front();
                    self.samples += 1;
                    out(Event::Sample(Sample { time_ns: index, ip: *addr, instructions: Some(index) }));
                }
                self.count += 1;
            }
            Event::Marker { .. } => {
                self.markers += 1;
                out(Event::Marker { time_ns: self.count, instructions: Some(self.count) });
            }
            Event::Module(_) | Event::Thread { .. } | Event::Signal { .. } | Event::Exit(_) => out(event.clone()),
            Event::Block { .. } | Event::Sample(_) | Event::Access { .. } | Event::Unknown { .. } => {}
        }
    }

    /// Instructions seen so far.
    pub fn instructions(&self) -> u64 {
        self.count
    }
}

/// The seed's worked example: func_M = func_A (10 instructions), func_B (10) three times,
/// func_C (10), no branches, 50 instructions per call, sampled every `period`
/// instructions over `iterations` calls with a marker at each call. Returns the names,
/// the observations and the true trace of one call.
pub fn seed_example(period: u64, iterations: u64) -> (Names, Vec<Observation>, Vec<Info>) {
    let mut names = Names::new();
    let a = names.intern("func_A");
    let b = names.intern("func_B");
    let c = names.intern("func_C");
    let body = |f: u32| (0..10).map(move |o| Info::new(f, o, 0x1000 * (f as u64 + 1) + 4 * o as u64));
    let truth: Vec<Info> = body(a).chain(body(b)).chain(body(b)).chain(body(b)).chain(body(c)).collect();
    let mut obs = Vec::new();
    let t = truth.len() as u64;
    for it in 0..iterations {
        obs.push(Observation::Marker { time_ns: it * t, instructions: Some(it * t) });
        for (k, info) in truth.iter().enumerate() {
            let index = it * t + k as u64;
            if index % period == period - 1 {
                obs.push(Observation::Sample { info: *info, time_ns: index, instructions: Some(index) });
            }
        }
    }
    // The marker of the call after the last, so the last call counts as complete.
    obs.push(Observation::Marker { time_ns: iterations * t, instructions: Some(iterations * t) });
    (names, obs, truth)
}
