//! What a file of a results directory is: its kind (from its name and first bytes), the
//! room it belongs to, what it means and which command writes such files.

/// The page's sections, in the order of docs/ARCHITECTURE.md's rooms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Room {
    Summary,
    Foundation,
    Seed000,
    Seed001,
    Seed002,
    Seed003,
    Seed004,
    Programs,
    Other,
}

impl Room {
    pub const ALL: [Room; 9] = [Room::Summary, Room::Foundation, Room::Seed000, Room::Seed001, Room::Seed002, Room::Seed003, Room::Seed004, Room::Programs, Room::Other];

    pub fn title(self) -> &'static str {
        match self {
            Room::Summary => "Summary",
            Room::Foundation => "Exact traces (foundation)",
            Room::Seed000 => "Seed 000 — instruction traces from samples",
            Room::Seed001 => "Seed 001 — software monitor",
            Room::Seed002 => "Seed 002 — trace-call optimiser",
            Room::Seed003 => "Seed 003 — path profiling",
            Room::Seed004 => "Seed 004 — cache-miss formulas",
            Room::Programs => "Programs",
            Room::Other => "Other files",
        }
    }

    /// The section's anchor in the page.
    pub fn anchor(self) -> &'static str {
        match self {
            Room::Summary => "summary",
            Room::Foundation => "foundation",
            Room::Seed000 => "seed000",
            Room::Seed001 => "seed001",
            Room::Seed002 => "seed002",
            Room::Seed003 => "seed003",
            Room::Seed004 => "seed004",
            Room::Programs => "programs",
            Room::Other => "other",
        }
    }
}

/// The kinds of file kansoku writes, and the generic ones for anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    DemoSummary,
    ExactTrace,
    SampledRecording,
    ReconstructedTrace,
    ReconstructionTimeline,
    Kiviat,
    MonitorTimeSeries,
    MonitorReport,
    MonitorObservations,
    EventHistogram,
    EventTimings,
    Waveform,
    WaveAutocorrelation,
    WaveReport,
    WasmModule,
    WasmTrace,
    TranslationTable,
    TracepointCheck,
    TracepointText,
    CfgPicture,
    PathTable,
    PathReport,
    CallgrindExport,
    PprofExport,
    CollapsedStacks,
    CacheKernel,
    CacheFormulas,
    CacheSetFormulas,
    CacheSimulation,
    Program,
    CSource,
    Picture,
    JsonFile,
    CsvFile,
    TextFile,
    BinaryFile,
}

/// How the page shows a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Picture,
    Csv,
    Json,
    Text,
    Binary,
}

impl Kind {
    /// The kind of `path` (relative, `/`-separated) whose file begins with `head`.
    pub fn of(path: &str, head: &[u8]) -> Kind {
        let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
        let text = String::from_utf8_lossy(&head[..head.len().min(4096)]);
        let binary = head.iter().take(4096).any(|&b| b == 0);
        if path.starts_with("bin/") {
            return if name.ends_with(".c") { Kind::CSource } else if head.starts_with(b"\x7fELF") { Kind::Program } else { Kind::of_name(&name, &text, binary) };
        }
        if path == "summary.txt" {
            return Kind::DemoSummary;
        }
        Kind::of_name(&name, &text, binary)
    }

    fn of_name(name: &str, text: &str, binary: bool) -> Kind {
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        match ext {
            "svg" => Kind::of_svg(name, text),
            "json" => Kind::of_json(name, text),
            "csv" if name.starts_with("paths") || text.starts_with("rank,count,") => Kind::PathTable,
            "csv" => Kind::CsvFile,
            // the recording's JSON header says what it holds
            "ksk" if text.contains("\"kind\":\"samples\"") => Kind::SampledRecording,
            "ksk" if text.contains("\"kind\":\"exact_trace\"") || name.contains("exact") => Kind::ExactTrace,
            "ksk" if name.contains("-p") || name.contains("record") => Kind::SampledRecording,
            "ksk" => Kind::ExactTrace,
            "trace" => Kind::ReconstructedTrace,
            "wasm" => Kind::WasmModule,
            "ktrace" => Kind::WasmTrace,
            "k" => Kind::CacheKernel,
            "cg" | "callgrind" => Kind::CallgrindExport,
            "collapsed" | "folded" => Kind::CollapsedStacks,
            "c" | "h" => Kind::CSource,
            _ if name.ends_with(".pb.gz") || name.ends_with(".pprof") => Kind::PprofExport,
            _ if name.starts_with("callgrind.out") => Kind::CallgrindExport,
            _ if name.starts_with("tp-") && !binary => Kind::TracepointText,
            _ if binary => Kind::BinaryFile,
            _ => Kind::TextFile,
        }
    }

    /// Pictures by their own title (kansoku-plot writes one) or Graphviz's mark, then by name.
    fn of_svg(name: &str, text: &str) -> Kind {
        let title = svg_title(text).unwrap_or_default();
        if text.contains("Generated by graphviz") {
            Kind::CfgPicture
        } else if title.starts_with("Program waveform") || (name.starts_with("wave") && !name.contains("acf")) {
            Kind::Waveform
        } else if title.starts_with("Autocorrelation") || name.ends_with("-acf.svg") {
            Kind::WaveAutocorrelation
        } else if title.starts_with("Eight items") || name == "kiviat.svg" {
            Kind::Kiviat
        } else if title.starts_with("CPU and device busy") || name == "timeseries.svg" {
            Kind::MonitorTimeSeries
        } else if name.ends_with("-histogram.svg") {
            Kind::EventHistogram
        } else if name.contains("timeline") || text.contains("reconstructed") {
            Kind::ReconstructionTimeline
        } else {
            Kind::Picture
        }
    }

    fn of_json(name: &str, text: &str) -> Kind {
        let has = |field: &str| text.contains(&format!("\"{field}\""));
        if name.contains("set-formulas") {
            Kind::CacheSetFormulas
        } else if text.contains("kansoku-cache-formulas") || name.contains("formulas") {
            Kind::CacheFormulas
        } else if name.contains("simulation") || (has("kernel") && has("cache") && has("refs")) {
            Kind::CacheSimulation
        } else if name == "observations.json" {
            Kind::MonitorObservations
        } else if has("eight") {
            Kind::MonitorReport
        } else if has("routines") {
            Kind::EventTimings
        } else if has("code_period") || name.starts_with("wave") {
            Kind::WaveReport
        } else if name.contains("xlat") {
            Kind::TranslationTable
        } else if name.starts_with("tp-check") {
            Kind::TracepointCheck
        } else if has("paths") && has("summary") {
            Kind::PathReport
        } else {
            Kind::JsonFile
        }
    }

    pub fn room(self) -> Room {
        use Kind::*;
        match self {
            DemoSummary => Room::Summary,
            ExactTrace => Room::Foundation,
            SampledRecording | ReconstructedTrace | ReconstructionTimeline => Room::Seed000,
            Kiviat | MonitorTimeSeries | MonitorReport | MonitorObservations | EventHistogram | EventTimings | Waveform | WaveAutocorrelation | WaveReport => Room::Seed001,
            WasmModule | WasmTrace | TranslationTable | TracepointCheck | TracepointText => Room::Seed002,
            CfgPicture | PathTable | PathReport | CallgrindExport | PprofExport | CollapsedStacks => Room::Seed003,
            CacheKernel | CacheFormulas | CacheSetFormulas | CacheSimulation => Room::Seed004,
            Program | CSource => Room::Programs,
            Picture | JsonFile | CsvFile | TextFile | BinaryFile => Room::Other,
        }
    }

    pub fn shape(self) -> Shape {
        use Kind::*;
        match self {
            ReconstructionTimeline | Kiviat | MonitorTimeSeries | EventHistogram | Waveform | WaveAutocorrelation | CfgPicture | Picture => Shape::Picture,
            PathTable | CsvFile => Shape::Csv,
            MonitorReport | MonitorObservations | EventTimings | WaveReport | TranslationTable | TracepointCheck | PathReport | CacheFormulas | CacheSetFormulas | CacheSimulation | JsonFile => Shape::Json,
            DemoSummary | ReconstructedTrace | TracepointText | CallgrindExport | CollapsedStacks | CacheKernel | CSource | TextFile => Shape::Text,
            ExactTrace | SampledRecording | WasmModule | WasmTrace | PprofExport | Program | BinaryFile => Shape::Binary,
        }
    }

    /// The kind's name on the page.
    pub fn label(self) -> &'static str {
        use Kind::*;
        match self {
            DemoSummary => "demo summary",
            ExactTrace => "exact trace",
            SampledRecording => "sampled recording",
            ReconstructedTrace => "reconstructed trace",
            ReconstructionTimeline => "reconstruction timeline",
            Kiviat => "Kiviat graph",
            MonitorTimeSeries => "busy over time",
            MonitorReport => "monitor report",
            MonitorObservations => "monitor observations",
            EventHistogram => "call-time histogram",
            EventTimings => "event timings",
            Waveform => "program waveform",
            WaveAutocorrelation => "waveform autocorrelation",
            WaveReport => "waveform report",
            WasmModule => "wasm module",
            WasmTrace => "wasm trace records",
            TranslationTable => "translation table",
            TracepointCheck => "trace-call check",
            TracepointText => "trace-call optimiser text",
            CfgPicture => "CFG picture",
            PathTable => "path table",
            PathReport => "path report",
            CallgrindExport => "callgrind profile",
            PprofExport => "pprof profile",
            CollapsedStacks => "collapsed stacks",
            CacheKernel => "loop kernel",
            CacheFormulas => "miss formulas",
            CacheSetFormulas => "miss formulas, set method",
            CacheSimulation => "cache simulation",
            Program => "program",
            CSource => "C source",
            Picture => "picture",
            JsonFile => "JSON",
            CsvFile => "CSV",
            TextFile => "text",
            BinaryFile => "binary",
        }
    }

    /// What the file means, for a reader who has not read the seed.
    pub fn caption(self) -> &'static str {
        use Kind::*;
        match self {
            DemoSummary => "The demo's own summary, one block per stage, as it printed it.",
            ExactTrace => "An exact trace: every user-space instruction the program executed (in the marker's window when one was given), kansoku's streamed .ksk recording. It is the ground truth the sampling methods are judged against. Read it with `kansoku show FILE`.",
            SampledRecording => "A sampled recording (.ksk): instruction-pointer samples with marker hits, from `kansoku record` on the real program or `kansoku sample` of an exact trace. `kansoku reconstruct FILE` rebuilds one iteration from it.",
            ReconstructedTrace => "One iteration rebuilt from samples by `kansoku reconstruct`: one instruction per line (address, function:block, function:block:offset). `# uncertain` lines mark a stretch where another order scores as well.",
            ReconstructionTimeline => "The exact iteration above its reconstructions, one instruction per column, coloured by function. The strip marks where a reconstruction differs from the truth; a hatched frame marks where another order scores as well, so the samples do not fix it.",
            Kiviat => "The eight items of seed 001 as spokes of a Kiviat graph: CPU active, CPU only, CPU/I-O overlap, I-O only, I-O busy, CPU wait, user state, kernel state (percent of the measured time). A CPU-bound program leans to the CPU and user spokes; a balanced system draws a star.",
            MonitorTimeSeries => "CPU and each device's busy share per monitoring interval, over the run: when the program computed, waited, or used the disk.",
            MonitorReport => "The monitor's report: the eight items, the shares of the program and its children, and the functions sampled most.",
            MonitorObservations => "Every monitoring interval's raw observation (CPU states, device busy time, task states): what the eight items were computed from.",
            EventHistogram => "Execution time per call of one probed routine (`monitor events`), log scale: the spread of the calls, not only their mean.",
            EventTimings => "Event timing (`monitor events`): calls and time per probed routine, with the probe's own cost per hit measured and subtracted (calibration).",
            Waveform => "The program waveform: code addresses (and, with data, data addresses) against time, with labelled bands for functions and regions. A pattern that repeats is a loop or a phase; its period is marked.",
            WaveAutocorrelation => "Autocorrelation of the waveform's code-address signal against the lag: the first strong peak is the program's dominant period, in instructions or time.",
            WaveReport => "The waveform's analysis: dominant periods of the code and data signals, and the functions and regions recurring at them.",
            WasmModule => "A WebAssembly module with trace calls (seed 002). The optimised one has fewer, merged trace calls and carries its translation table in the custom section kansoku.xlat.",
            WasmTrace => "The trace records a module's trace calls wrote when run by `kansoku tp run`; `kansoku tp decode` turns them back into events.",
            TranslationTable => "The translation table of the trace-call optimiser: how each merged trace call expands back into the original events.",
            TracepointCheck => "`kansoku tp check`: both modules run, their decoded event streams compared (identical or the first difference), with the trace calls and bytes the optimisation saved.",
            TracepointText => "Text written by the trace-call optimiser's commands (a summary or decoded events: timestamp, event id, arguments).",
            CfgPicture => "A function's control-flow graph (Graphviz): basic blocks with their source lines, edges with the counts seen, the hottest paths highlighted.",
            PathTable => "Paths between back edges and calls (seed 003), hottest first: how often each ran, its share of the instructions, its Ball–Larus number, its blocks and source lines.",
            PathReport => "The path profile as JSON: every path with its count, share and blocks, and the run's summary.",
            CallgrindExport => "The path profile in Callgrind's format: open with `callgrind_annotate FILE` or KCachegrind.",
            PprofExport => "The path profile as a gzipped pprof profile.proto: open with `go tool pprof -top FILE`.",
            CollapsedStacks => "Collapsed call stacks with their counts, the input of flame-graph tools.",
            CacheKernel => "An affine loop kernel in kansoku's kernel language, the input of `kansoku cache`.",
            CacheFormulas => "Cache-miss formulas per reference (compulsory and conflict misses) as functions of the kernel's size parameters (`kansoku cache model`), checked exact against the LRU simulator.",
            CacheSetFormulas => "The seed's set-based method: misses per reference as piecewise formulas in every parameter at once.",
            CacheSimulation => "The exact LRU simulation at one point (`kansoku cache simulate`): accesses, compulsory and other misses per reference.",
            Program => "An example program, compiled by the demo from the C source beside it.",
            CSource => "The C source of an example program.",
            Picture => "A picture in the directory of a kind this report does not know.",
            JsonFile => "A JSON file of a kind this report does not know, shown as tables.",
            CsvFile => "A CSV table of a kind this report does not know.",
            TextFile => "A text file of a kind this report does not know.",
            BinaryFile => "A binary file of a kind this report does not know: listed, not shown.",
        }
    }

    /// The command that writes such files, for directories without a manifest.
    pub fn written_by(self) -> Option<&'static str> {
        use Kind::*;
        Some(match self {
            ExactTrace => "kansoku trace exact -o FILE -- PROGRAM",
            SampledRecording => "kansoku record -o FILE -- PROGRAM, or kansoku sample",
            ReconstructedTrace => "kansoku reconstruct REC -o FILE",
            ReconstructionTimeline => "kansoku compare TRACE EXACT --svg FILE",
            Kiviat | MonitorTimeSeries | MonitorObservations => "kansoku monitor --svg DIR -- PROGRAM",
            MonitorReport => "kansoku monitor --json -o FILE (or --svg DIR) -- PROGRAM",
            EventHistogram => "kansoku monitor events --probe F --svg DIR -- PROGRAM",
            EventTimings => "kansoku monitor events --probe F --json -o FILE -- PROGRAM",
            Waveform | WaveAutocorrelation => "kansoku wave --svg FILE -- PROGRAM",
            WaveReport => "kansoku wave --json -o FILE -- PROGRAM",
            WasmModule | TranslationTable => "kansoku tp optimize",
            WasmTrace => "kansoku tp run",
            TracepointCheck => "kansoku tp check",
            CfgPicture => "kansoku paths --cfg F --svg FILE -- PROGRAM",
            PathTable => "kansoku paths -o FILE.csv -- PROGRAM",
            PathReport => "kansoku paths -o FILE.json -- PROGRAM",
            CallgrindExport => "kansoku paths --export callgrind=FILE -- PROGRAM",
            PprofExport => "kansoku paths --export pprof=FILE -- PROGRAM",
            CollapsedStacks => "kansoku paths --export collapsed=FILE -- PROGRAM",
            CacheFormulas => "kansoku cache model KERNEL",
            CacheSimulation => "kansoku cache simulate KERNEL",
            _ => return None,
        })
    }
}

/// The text of an SVG's first `<text>` element: kansoku-plot draws the title first.
fn svg_title(text: &str) -> Option<String> {
    let start = text.find("<text")?;
    let open_end = start + text[start..].find('>')? + 1;
    let close = open_end + text[open_end..].find("</text>")?;
    Some(text[open_end..close].trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_files_get_their_kinds() {
        let svg = |title: &str| format!("<svg xmlns=\"http://www.w3.org/2000/svg\"><rect/><text x=\"1\">{title}</text></svg>");
        assert_eq!(Kind::of("monitor/kiviat.svg", svg("Eight items over 1.0 s").as_bytes()), Kind::Kiviat);
        assert_eq!(Kind::of("w.svg", svg("Program waveform of seed000").as_bytes()), Kind::Waveform);
        assert_eq!(Kind::of("wave-seed000-acf.svg", svg("Autocorrelation of").as_bytes()), Kind::WaveAutocorrelation);
        assert_eq!(Kind::of("walk.svg", b"<?xml?>\n<!-- Generated by graphviz version 2.43.0"), Kind::CfgPicture);
        assert_eq!(Kind::of("seed000-p101-timeline.svg", svg("seed000").as_bytes()), Kind::ReconstructionTimeline);
        assert_eq!(Kind::of("odd.svg", svg("something").as_bytes()), Kind::Picture);
        assert_eq!(Kind::of("paths.csv", b"rank,count,share"), Kind::PathTable);
        assert_eq!(Kind::of("seed-set-formulas.json", b"{"), Kind::CacheSetFormulas);
        assert_eq!(Kind::of("seed000-exact.ksk", b"KANSOKU\0"), Kind::ExactTrace);
        assert_eq!(Kind::of("seed000-p101.ksk", b"KANSOKU\0"), Kind::SampledRecording);
        assert_eq!(Kind::of("t.ksk", b"KANSOKU\0\x02\0\x40{\"kind\":\"samples\""), Kind::SampledRecording);
        assert_eq!(Kind::of("bin/paths", b"\x7fELF\x02"), Kind::Program);
        assert_eq!(Kind::of("summary.txt", b"kansoku demo"), Kind::DemoSummary);
        assert_eq!(Kind::of("x.bin", b"\x00\x01"), Kind::BinaryFile);
    }

    #[test]
    fn every_room_has_a_title_and_anchor() {
        for r in Room::ALL {
            assert!(!r.title().is_empty() && !r.anchor().is_empty());
        }
    }
}
