//! Live monitors: the system and a process from `/proc` with the function sampler
//! (`sysstat`), and the program waveform's code and data addresses (`wave`).

pub mod sysstat;
pub mod wave;
