//! A sampling run's report (`kansoku monitor`): the figures of [`Summary`] with how the run
//! ended and what a reader must know to trust them, as JSON and as the seed's tables.

use serde::Serialize;

use kansoku_core::text::Table;

use crate::sampling::Summary;

/// What `kansoku monitor --json` prints and saves.
#[derive(Serialize)]
pub struct MonitorReport {
    /// The interval between observations, in milliseconds.
    pub interval_ms: u64,
    /// The observed process, if one was (else the whole system).
    pub target: Option<i32>,
    /// Why the measurement ended.
    pub ended: String,
    /// What a reader must know to trust the figures (samples lost, none taken, …).
    pub warnings: Vec<String>,
    /// The figures: the seed's eight items, programs, functions, devices, the series.
    pub summary: Summary,
}

impl MonitorReport {
    /// The report as `kansoku monitor` prints it: the seed's table 2 (the eight items), its
    /// table 3 (programs), the target's functions, its table 4 (devices), thread states.
    pub fn text(&self) -> String {
        let r = self;
        let s = &r.summary;
        let mut out = format!(
            "measured {:.2} s in {} observations every {} ms ({})\n",
            s.measured_s, s.observations, r.interval_ms, r.ended
        );
        for w in &r.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        let mut t = Table::new(&["item (seed table 2)", "percent"]);
        for (i, (label, v)) in s.eight.labelled().iter().enumerate() {
            t.row(vec![format!("{} {label}", ["①", "②", "③", "④", "⑤", "⑥", "⑦", "⑧"][i]), format!("{v:.1}")]);
        }
        out.push_str(&t.render());
        out.push_str(&format!("(vmstat terms: us {:.1}  sy {:.1}  id {:.1}  wa {:.1}  st {:.1})\n", s.eight.user_state, s.eight.kernel_state, s.idle, s.iowait, s.steal));
        if !s.programs.is_empty() {
            let mut t = Table::new(&["program (seed table 3)", "CPU %", "ticks"]);
            for p in &s.programs {
                t.row(vec![p.name.clone(), format!("{:.1}", p.percent), p.count.to_string()]);
            }
            out.push('\n');
            out.push_str(&t.render());
        }
        if !s.functions.is_empty() {
            let mut t = Table::new(&["function of the target", "% of samples", "samples"]);
            for f in s.functions.iter().take(10) {
                t.row(vec![f.name.clone(), format!("{:.1}", f.percent), f.count.to_string()]);
            }
            out.push('\n');
            out.push_str(&t.render());
        }
        let active: Vec<_> = s.devices.iter().filter(|d| d.ios > 0 || d.busy_percent > 0.0).collect();
        if !active.is_empty() {
            let mut t = Table::new(&["device", "busy %", "share of I/Os % (table 4)", "I/Os", "sectors"]);
            for d in active {
                t.row(vec![d.name.clone(), format!("{:.1}", d.busy_percent), format!("{:.1}", d.io_share_percent), d.ios.to_string(), d.sectors.to_string()]);
            }
            out.push('\n');
            out.push_str(&t.render());
        }
        if !s.thread_states.is_empty() {
            let states: Vec<String> = s.thread_states.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            out.push_str(&format!("\ntarget thread states seen (state:count): {}\n", states.join(" ")));
        }
        out
    }
}
