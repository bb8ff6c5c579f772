//! Callgrind's profile data format, as `callgrind_annotate` and KCachegrind read it
//! (Valgrind manual, "Callgrind Format Specification"):
//!
//! ```text
//! # callgrind format
//! version: 1
//! creator: kansoku 0.1.0
//! cmd: ./prog
//! positions: instr line
//! events: Ir
//! summary: 1234
//!
//! ob=(1) /path/prog
//! fl=(1) /src/prog.c
//! fn=(1) main
//! 0x1139 5 1
//! cfn=(2) work
//! calls=3 0x1120 2
//! 0x1150 7 900
//! ```
//!
//! Each cost line is an instruction address, its source line (0 when unknown) and how often
//! it ran (`Ir`). A `calls=` line (count, callee entry) is followed by the calling
//! instruction's position and the calls' inclusive cost. Names are compressed the way
//! Callgrind writes them: `(id) name` the first time, `(id)` after.

use std::collections::HashMap;
use std::io::Write;

use kansoku_paths::CostProfile;

use crate::{ExportError, Interner};

/// Name compression for one of the format's name spaces (objects, files, functions).
#[derive(Default)]
struct Names(Interner);

impl Names {
    /// `(id) name` on first use, `(id)` afterwards (ids from 1).
    fn spec(&mut self, name: &str) -> String {
        match self.0.intern(name) {
            (i, true) => format!("({}) {name}", i + 1),
            (i, false) => format!("({})", i + 1),
        }
    }
}

const UNKNOWN_FILE: &str = "???";

/// Writes `profile` in callgrind format; `command` is what ran (the `cmd:` line).
///
/// Functions come in the profile's order, their instructions by address. A function's
/// `fl=` is the file of its first instruction with a source line; instructions from other
/// files (inlined code) are preceded by `fi=`. Only calls with an inclusive cost in scope
/// are written.
pub fn write_callgrind(profile: &CostProfile, command: &str, mut out: impl Write) -> Result<(), ExportError> {
    if profile.total_instructions == 0 {
        return Err(ExportError::Empty("callgrind"));
    }
    let io = |source| ExportError::Write { format: "callgrind", source };
    let mut objects = Names::default();
    let mut files = Names::default();
    let mut fns = Names::default();
    let mut calls_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, c) in profile.calls.iter().enumerate() {
        calls_of.entry(c.caller).or_default().push(i);
    }
    let header = format!(
        "# callgrind format\nversion: 1\ncreator: kansoku {}\ncmd: {}\npositions: instr line\nevents: Ir\nsummary: {}\n",
        env!("CARGO_PKG_VERSION"),
        command.replace('\n', " "),
        profile.total_instructions
    );
    out.write_all(header.as_bytes()).map_err(io)?;
    let file_of = |f: usize| -> &str {
        profile.functions[f].instructions.iter().find_map(|i| i.file.as_deref()).unwrap_or(UNKNOWN_FILE)
    };
    for (f, function) in profile.functions.iter().enumerate() {
        let calls = calls_of.get(&f).map(Vec::as_slice).unwrap_or(&[]);
        if function.instructions.is_empty() && calls.is_empty() {
            continue;
        }
        let fl = file_of(f);
        let mut text = String::new();
        text.push('\n');
        text.push_str(&format!("ob={}\n", objects.spec(function.module.as_deref().unwrap_or(UNKNOWN_FILE))));
        text.push_str(&format!("fl={}\nfn={}\n", files.spec(fl), fns.spec(&function.name)));
        let mut current_file = fl;
        for ins in &function.instructions {
            let file = ins.file.as_deref().unwrap_or(current_file);
            if file != current_file {
                text.push_str(&format!("fi={}\n", files.spec(file)));
                current_file = file;
            }
            text.push_str(&format!("0x{:x} {} {}\n", ins.address, ins.line.unwrap_or(0), ins.executions));
        }
        for &c in calls {
            let call = &profile.calls[c];
            let site_file = call.site_file.as_deref().unwrap_or(current_file);
            if site_file != current_file {
                text.push_str(&format!("fi={}\n", files.spec(site_file)));
                current_file = site_file;
            }
            let callee = &profile.functions[call.callee];
            text.push_str(&format!("cob={}\n", objects.spec(callee.module.as_deref().unwrap_or(UNKNOWN_FILE))));
            text.push_str(&format!("cfi={}\ncfn={}\n", files.spec(file_of(call.callee)), fns.spec(&callee.name)));
            text.push_str(&format!(
                "calls={} 0x{:x} {}\n0x{:x} {} {}\n",
                call.calls,
                call.callee_entry,
                call.callee_line.unwrap_or(0),
                call.site,
                call.site_line.unwrap_or(0),
                call.inclusive
            ));
        }
        out.write_all(text.as_bytes()).map_err(io)?;
    }
    writeln!(out, "\ntotals: {}", profile.total_instructions).map_err(io)?;
    out.flush().map_err(io)
}
