//! `kansoku report DIR`: one self-contained HTML page of a results directory. The page is
//! assembled by kansoku-report; this command chooses where it goes and says so.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kansoku_report::{gather, write_html, Limits, Page};

#[derive(clap::Args)]
pub struct Args {
    /// The results directory: the demo's, or any directory analyses wrote into with -o.
    pub dir: PathBuf,
    /// Where to write the page (default: DIR/index.html, which a web server shows for DIR).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What was written, for the message.
pub struct Written {
    pub page: PathBuf,
    pub bytes: u64,
    pub files: usize,
    pub notes: usize,
}

pub fn run(args: Args) -> Result<()> {
    let w = write_report(&args.dir, args.output.as_deref())?;
    println!("{}", written_line(&w));
    Ok(())
}

/// The line both `report` and `demo` print.
pub fn written_line(w: &Written) -> String {
    let notes = if w.notes > 0 { format!("; {} things not shown, listed at its end", w.notes) } else { String::new() };
    format!("report: {} files in one page, {} ({} KiB{notes}); open it in a browser", w.files, w.page.display(), w.bytes >> 10)
}

/// Gathers `dir` and writes its page to `output` (default `dir/index.html`). The page is
/// written beside its final name and renamed, so a reader never sees half a page.
pub fn write_report(dir: &Path, output: Option<&Path>) -> Result<Written> {
    let page_path = output.map_or_else(|| dir.join("index.html"), Path::to_path_buf);
    let partial = partial_name(&page_path);
    let g = gather(dir, &[page_path.clone(), partial.clone()], &Limits::default()).with_context(|| format!("reading the results directory {}", dir.display()))?;
    let file = std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut out = BufWriter::new(file);
    let page = Page { directory: dir.display().to_string(), gathered: &g };
    write_html(&page, &mut out).and_then(|()| out.flush()).with_context(|| format!("writing {}", partial.display()))?;
    drop(out);
    std::fs::rename(&partial, &page_path).with_context(|| format!("renaming {} to {}", partial.display(), page_path.display()))?;
    let bytes = std::fs::metadata(&page_path).map(|m| m.len()).unwrap_or(0);
    Ok(Written { page: page_path, bytes, files: g.files.len(), notes: g.notes.len() })
}

fn partial_name(page: &Path) -> PathBuf {
    let mut name = page.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    page.with_file_name(name)
}
