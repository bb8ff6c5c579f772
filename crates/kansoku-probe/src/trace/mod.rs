//! Exact traces: every instruction on ptrace (`exact`) or on kansoku's Valgrind tool
//! (`exact_valgrind`, the tool itself and Lackey in `valgrind`), and every block source of the
//! path analysis (`blocks`).

pub mod blocks;
pub mod exact;
pub mod exact_valgrind;
pub mod valgrind;
