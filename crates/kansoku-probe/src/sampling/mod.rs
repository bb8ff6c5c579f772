//! perf_event sampling: sessions, rings, uprobes, user registers (`perf`), and a program's
//! samples and marker hits into a recording (`sampler`).

pub mod perf;
pub mod sampler;
