//! Reports as text: the aligned tables every room words its results in, so that a
//! library's report reads the same wherever it is printed.

/// A text table with left-aligned columns, or right-aligned where the header says so
/// (headers starting with '>' are right-aligned; the '>' is not printed).
pub struct Table {
    headers: Vec<(String, bool)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (a leading `>` right-aligns the column).
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| (h.trim_start_matches('>').to_string(), h.starts_with('>'))).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row: one cell per column.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text: columns two spaces apart, each as wide as its widest cell, one
    /// line per row, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|(h, _)| h.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                let pad = w.saturating_sub(c.chars().count());
                let last = i + 1 == cells.len();
                if self.headers[i].1 {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if !last {
                        s.push_str(&" ".repeat(pad));
                    }
                }
                if !last {
                    s.push_str("  ");
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(self.headers.iter().map(|(h, _)| h.as_str()).collect());
        for r in &self.rows {
            out.push_str(&line(r.iter().map(String::as_str).collect()));
        }
        out
    }
}

/// Human-readable name of a signal number.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({sig})")
}

/// How a program ended, in words: `exited with status 3`, `killed by SIGSEGV (11)`.
pub fn exit_text(exit: crate::ExitStatus) -> String {
    match exit {
        crate::ExitStatus::Exited(c) => format!("exited with status {c}"),
        crate::ExitStatus::Killed(s) => format!("killed by {}", signal_name(s)),
        crate::ExitStatus::Detached => "detached (observation stopped before the program ended)".into(),
    }
}

/// An address as reports write it: `0x401136`.
pub fn hex(addr: u64) -> String {
    format!("0x{addr:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&["name", ">size"]);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["long".into(), "2".into()]);
        assert_eq!(t.render(), "name  size\na       10\nlong     2\n");
    }
}
