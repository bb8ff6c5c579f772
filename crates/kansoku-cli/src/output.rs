//! Printing: aligned text tables for people, JSON for programs, progress on a TTY only.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

pub use kansoku_core::text::Table;

/// Prints a [`Table`] where the report goes.
pub trait Print {
    /// Writes the rendered table with [`emit`].
    fn print(&self);
}

impl Print for Table {
    fn print(&self) {
        emit(&self.render());
    }
}

/// Prints a value as pretty JSON where the report goes (see [`report_to`]).
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    emit(&text);
    Ok(())
}

/// Where a command's report goes. A command that runs a program reports on stderr (or to
/// `-o FILE`), as perf stat, valgrind, strace and time do, so that the program's stdout
/// and stderr stay its own; a command that only reads files reports on stdout.
pub enum ReportTo {
    Stdout,
    Stderr,
    File(std::path::PathBuf),
}

struct Report {
    sink: Box<dyn Write + Send>,
    path: Option<std::path::PathBuf>,
    error: Option<std::io::Error>,
}

static REPORT: std::sync::Mutex<Option<Report>> = std::sync::Mutex::new(None);

/// Sends the rest of this command's report to `to`. Called once, before the program
/// starts, so that a file that cannot be created fails before anything runs.
pub fn report_to(to: ReportTo) -> anyhow::Result<()> {
    let (sink, path): (Box<dyn Write + Send>, _) = match to {
        ReportTo::Stdout => (Box::new(std::io::stdout()), None),
        ReportTo::Stderr => (Box::new(std::io::stderr()), None),
        ReportTo::File(p) => {
            let f = std::fs::File::create(&p).map_err(|e| anyhow::anyhow!("cannot create the report file {}: {e}", p.display()))?;
            (Box::new(std::io::BufWriter::new(f)), Some(p))
        }
    };
    *REPORT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Report { sink, path, error: None });
    Ok(())
}

/// The report target of a command that may run a program: `-o FILE` if given, else
/// stderr while a program runs under observation, else stdout.
pub fn report_target(file: Option<&std::path::Path>, runs_program: bool) -> ReportTo {
    match file {
        Some(p) => ReportTo::File(p.to_path_buf()),
        None if runs_program => ReportTo::Stderr,
        None => ReportTo::Stdout,
    }
}

/// Writes report text. The first write error is kept and returned by [`finish_report`],
/// so a full disk is an error at the end rather than a panic in the middle.
pub fn emit(text: &str) {
    let mut guard = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    let report = guard.get_or_insert_with(|| Report { sink: Box::new(std::io::stdout()), path: None, error: None });
    if report.error.is_none() {
        if let Err(e) = report.sink.write_all(text.as_bytes()) {
            report.error = Some(e);
        }
    }
}

/// Flushes the report and says whether all of it was written.
pub fn finish_report() -> anyhow::Result<()> {
    let mut guard = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(report) = guard.as_mut() else { return Ok(()) };
    let flushed = report.sink.flush();
    let error = report.error.take().map_or(flushed, Err);
    match (error, &report.path) {
        (Ok(()), _) => Ok(()),
        (Err(e), Some(p)) => Err(anyhow::anyhow!("writing the report to {}: {e}", p.display())),
        // A closed stdout (`| head`) ends quietly, as SIGPIPE would have.
        (Err(e), None) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        (Err(e), None) => Err(anyhow::anyhow!("writing the report: {e}")),
    }
}

/// `println!` for the report: see [`report_to`].
macro_rules! reportln {
    () => { $crate::output::emit("\n") };
    ($($arg:tt)*) => { $crate::output::emit(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` for the report: see [`report_to`].
macro_rules! report {
    ($($arg:tt)*) => { $crate::output::emit(&format!($($arg)*)) };
}
pub(crate) use {report, reportln};

/// A spinner counting `unit` on stderr when it is a terminal; hidden otherwise.
pub fn spinner(message: &str, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    let template = format!("{{spinner}} {message}: {{pos}} {unit} ({{per_sec}}, {{elapsed}})");
    bar.set_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_spinner()));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    *SPINNER.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
    bar
}

/// The last spinner shown: a line said meanwhile goes above it.
static SPINNER: std::sync::Mutex<Option<ProgressBar>> = std::sync::Mutex::new(None);

/// Writes `line` on stderr, above the spinner if one spins (a closed or full stderr loses
/// the line, it does not end kansoku). Callable from any thread.
pub fn say(line: &str) {
    let bar = SPINNER.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let write = || {
        let _ = writeln!(std::io::stderr(), "{line}");
    };
    match bar {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// Every time the observed `program` stops itself (SIGSTOP, SIGTSTP...), says so on stderr
/// in the words every command uses; `what` is what resumes on SIGCONT.
pub fn say_stops(program: &str, what: &'static str) {
    let program = program.to_string();
    kansoku_probe::stops::on_stop(move |signal| say(&kansoku_probe::stops::said(&program, signal, what)));
}

/// A bar of known length on a terminal (hidden when stderr is piped): `message`, the bar,
/// done/total and the time left.
pub fn bar(message: &str, len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    let template = format!("{{spinner}} {message}: [{{bar:30}}] {{human_pos}}/{{human_len}} ({{elapsed}}, {{eta}} left)");
    bar.set_style(ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

pub use kansoku_core::text::hex;

pub use kansoku_core::text::signal_name;

/// Reads a text file the user named (formulas, traces): regular files only, and text that
/// is not UTF-8 is located (`line:col`), so the error can name the file and the position.
pub fn read_text(path: &std::path::Path) -> anyhow::Result<String> {
    kansoku_core::input::read_text(path, kansoku_core::input::MAX_TEXT_BYTES).map_err(|e| match e {
        kansoku_core::input::TextError::Utf8 { .. } => anyhow::anyhow!("{}:{e}", path.display()),
        kansoku_core::input::TextError::Io(e) => anyhow::Error::from(e),
    })
}

/// The observed program's exit code, once a command has seen it end (see [`exit_as`]).
static PROGRAM_EXIT: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// kansoku exits as the observed program did, as `time` and `perf stat` do: its exit code,
/// or 128 + N when signal N killed it. A program kansoku detached from ran on alone.
pub fn exit_as(status: kansoku_core::ExitStatus) {
    let code = match status {
        kansoku_core::ExitStatus::Exited(c) => c & 0xff,
        kansoku_core::ExitStatus::Killed(s) => 128 + s,
        kansoku_core::ExitStatus::Detached => return,
    };
    let _ = PROGRAM_EXIT.set(code);
}

/// The code [`exit_as`] chose, if a command observed a program end.
pub fn program_exit_code() -> Option<i32> {
    PROGRAM_EXIT.get().copied()
}
