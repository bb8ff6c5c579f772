//! One module per subcommand; each has `Args` (clap) and `run(args) -> anyhow::Result<()>`.

pub mod cache;
pub mod demo;
pub mod inspect;
pub mod monitor;
pub mod paths;
pub mod reconstruct;
pub mod reconstruct_demo;
pub mod record;
pub mod report;
pub mod sample;
pub mod show;
pub mod tp;
pub mod trace;
pub mod wave;
