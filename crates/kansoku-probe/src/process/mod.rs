//! Process control: starting a program (`spawn`, the exec gate), one program under ptrace
//! for every tracer (`tracee`), Ctrl-C as a request (`interrupt`), `/proc` readers (`procfs`),
//! a program that stops itself (`stops`: said once per stop, held until SIGCONT).

pub mod interrupt;
pub mod procfs;
pub mod spawn;
pub mod stops;
pub mod tracee;
