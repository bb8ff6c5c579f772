//! The page: one HTML file with its style, pictures and check script inside, and a
//! Content-Security-Policy that allows nothing else (no fetch leaves the page, and only
//! the page's own script, named by a nonce, runs).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};

use crate::kind::{Kind, Room, Shape};
use crate::table::{clip, csv_table, json_tables, Table};
use crate::{base64, Found, Gathered, Manifest};

/// The id of the paragraph the page's script fills with the pictures it could draw
/// (`data-loaded`, `data-broken`), for a reader and for tests in a headless browser.
pub(crate) const PICTURE_CHECK_ID: &str = "picture-check";

/// Text shown of a text file, at most (bytes, lines).
const TEXT_BYTES: usize = 64 << 10;
const TEXT_LINES: usize = 1000;
/// Rows per table and tables per file, at most.
const TABLE_ROWS: usize = 200;
const TABLES: usize = 12;
/// Pictures embedded in all, at most (bytes of SVG); later ones are listed.
const PICTURE_BUDGET: usize = 48 << 20;
/// A file or directory name is shown up to this many characters.
const NAME_CHARS: usize = 200;

/// What the page shows.
pub struct Page<'a> {
    /// The directory as the user named it.
    pub directory: String,
    /// The files, notes and manifest [`crate::gather`] read from it.
    pub gathered: &'a Gathered,
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // control characters other than tab and newline have no business in a page
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Writes the page of `page` to `w`.
pub fn write_html(page: &Page, w: &mut impl Write) -> io::Result<()> {
    let nonce = nonce();
    let mut files: Vec<(usize, &Found, Kind)> = page.gathered.files.iter().enumerate().map(|(i, f)| (i, f, Kind::of(&f.path, &f.data))).collect();
    // within a room, pictures first: the figures are what a reader came for
    files.sort_by_key(|(i, _, k)| (k.shape() != Shape::Picture, *i));
    write_head(w, &page.directory, &nonce)?;
    write_intro(w, page, &files)?;
    write_contents(w, &files, page.gathered.manifest.is_some())?;
    writeln!(w, "<main>")?;
    let mut budget = PICTURE_BUDGET;
    for room in Room::ALL {
        let in_room: Vec<_> = files.iter().filter(|(_, _, k)| k.room() == room).collect();
        let manifest_here = room == Room::Summary && page.gathered.manifest.is_some();
        if in_room.is_empty() && !manifest_here {
            continue;
        }
        writeln!(w, "<section id=\"{}\"><h2>{}</h2>", room.anchor(), escape(room.title()))?;
        if let (true, Some(m)) = (manifest_here, &page.gathered.manifest) {
            write_manifest(w, m)?;
        }
        for (i, f, kind) in in_room {
            write_file(w, *i, f, *kind, page.gathered.manifest.as_ref(), &mut budget)?;
        }
        writeln!(w, "</section>")?;
    }
    writeln!(w, "</main>")?;
    write_notes(w, &page.gathered.notes)?;
    write_script(w, &nonce)?;
    writeln!(w, "</body>\n</html>")
}

/// 128 random bits from the standard library's hasher keys, which the OS seeds.
fn nonce() -> String {
    let part = || {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(std::process::id().into());
        h.finish()
    };
    format!("{:016x}{:016x}", part(), part())
}

const STYLE: &str = "
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 0 1.5em 3em; color: #1d1d1f; }
h1 { font-size: 1.6em; margin: 1em 0 0.2em; } h2 { border-bottom: 2px solid #3a6ea5; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin: 1.6em 0 0.3em; } .meta { color: #666; font-weight: normal; font-size: 0.9em; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.88em; }
pre { background: #f6f7f9; border: 1px solid #e1e4e8; padding: 0.6em; overflow: auto; max-height: 32em; white-space: pre-wrap; overflow-wrap: anywhere; }
.caption { margin: 0.2em 0 0.4em; } .command { color: #333; margin: 0.2em 0 0.6em; } .command code { background: #eef2f7; padding: 0 0.3em; word-break: break-all; }
.cut { color: #9a4d00; font-style: italic; } .broken { outline: 3px solid #c00; }
nav { background: #f6f7f9; border: 1px solid #e1e4e8; padding: 0.4em 1em; } nav h2 { margin-top: 0.4em; } nav ol { margin: 0.2em 0; }
nav ol ol { padding-left: 0.5em; } nav li li { display: inline; font-size: 0.85em; margin-right: 0.9em; }
table { border-collapse: collapse; margin: 0.4em 0 0.8em; font-size: 0.88em; display: block; overflow: auto; max-height: 40em; }
th, td { border: 1px solid #d6dae0; padding: 0.15em 0.5em; text-align: left; vertical-align: top; } th { background: #eef2f7; position: sticky; top: 0; }
td { max-width: 40em; overflow-wrap: anywhere; } td.long { min-width: 20em; } caption { text-align: left; font-weight: 600; padding: 0.2em 0; }
img { max-width: 100%; height: auto; border: 1px solid #e1e4e8; background: white; }
details { margin: 0.3em 0; } footer { margin-top: 3em; color: #555; font-size: 0.9em; }
";

fn write_head(w: &mut impl Write, directory: &str, nonce: &str) -> io::Result<()> {
    writeln!(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">")?;
    writeln!(w, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'\">")?;
    writeln!(w, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")?;
    writeln!(w, "<title>kansoku report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>", escape(&clip(directory, NAME_CHARS)))
}

fn write_intro(w: &mut impl Write, page: &Page, files: &[(usize, &Found, Kind)]) -> io::Result<()> {
    let pictures = files.iter().filter(|(_, _, k)| k.shape() == Shape::Picture).count();
    writeln!(w, "<header><h1>kansoku report of <code>{}</code></h1>", escape(&clip(&page.directory, NAME_CHARS)))?;
    let origin = match &page.gathered.manifest {
        Some(m) => format!("Made by {}: each file below names the command that made it.", escape(&m.made_by)),
        None => "This directory has no manifest (kansoku demo writes one), so the commands that made its files are not known: each file names the command that writes files of its kind.".to_string(),
    };
    writeln!(w, "<p>{} files, {pictures} pictures. {origin}</p>", files.len())?;
    writeln!(w, "<p id=\"{PICTURE_CHECK_ID}\" data-pictures=\"{pictures}\">Pictures: {pictures} embedded (the page's script checks them as it loads).</p></header>")
}

fn write_contents(w: &mut impl Write, files: &[(usize, &Found, Kind)], manifest: bool) -> io::Result<()> {
    writeln!(w, "<nav><h2>Contents</h2><ol>")?;
    for room in Room::ALL {
        let in_room: Vec<_> = files.iter().filter(|(_, _, k)| k.room() == room).collect();
        if in_room.is_empty() && !(room == Room::Summary && manifest) {
            continue;
        }
        writeln!(w, "<li><a href=\"#{}\">{}</a><ol>", room.anchor(), escape(room.title()))?;
        for (i, f, _) in in_room {
            writeln!(w, "<li><a href=\"#f-{i}\"><code>{}</code></a></li>", escape(&clip(&f.path, NAME_CHARS)))?;
        }
        writeln!(w, "</ol></li>")?;
    }
    writeln!(w, "</ol></nav>")
}

fn write_manifest(w: &mut impl Write, m: &Manifest) -> io::Result<()> {
    writeln!(w, "<h3>How this directory was made</h3><table><tr><th>step</th><th>commands (the same work as the step)</th><th>files</th></tr>")?;
    for s in &m.steps {
        let commands: Vec<String> = s.commands.iter().map(|c| format!("<code>{}</code>", escape(&clip(c, 1000)))).collect();
        let files: Vec<String> = s.files.iter().map(|f| format!("<code>{}</code>", escape(&clip(f, NAME_CHARS)))).collect();
        writeln!(w, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", escape(&clip(&s.title, NAME_CHARS)), commands.join("<br>"), files.join(" "))?;
    }
    writeln!(w, "</table>")
}

fn write_file(w: &mut impl Write, i: usize, f: &Found, kind: Kind, manifest: Option<&Manifest>, budget: &mut usize) -> io::Result<()> {
    writeln!(w, "<article id=\"f-{i}\"><h3><code>{}</code> <span class=\"meta\">{} · {}</span></h3>", escape(&clip(&f.path, NAME_CHARS)), size_text(f.size), kind.label())?;
    writeln!(w, "<p class=\"caption\">{}</p>", code_spans(&escape(kind.caption())))?;
    write_command(w, f, kind, manifest)?;
    if let Some(e) = &f.error {
        writeln!(w, "<p class=\"cut\">Not read: {}</p>", escape(e))?;
    } else {
        match kind.shape() {
            Shape::Picture => write_picture(w, f, budget)?,
            Shape::Csv => write_csv(w, f)?,
            Shape::Json => write_json(w, f)?,
            Shape::Text => write_text(w, f)?,
            Shape::Binary => write_binary(w, f, kind)?,
        }
    }
    writeln!(w, "</article>")
}

fn write_command(w: &mut impl Write, f: &Found, kind: Kind, manifest: Option<&Manifest>) -> io::Result<()> {
    let step = manifest.and_then(|m| m.step_for(&f.path));
    match (step, kind.written_by()) {
        (Some(s), _) => {
            let commands: Vec<String> = s.commands_for(&f.path).iter().map(|c| format!("<code>{}</code>", escape(&clip(c, 1000)))).collect();
            writeln!(w, "<p class=\"command\">Made by the step “{}”: {}</p>", escape(&clip(&s.title, NAME_CHARS)), commands.join(" then "))
        }
        (None, Some(usual)) => writeln!(w, "<p class=\"command\">Files of this kind are written by <code>{}</code> (the exact command is not recorded).</p>", escape(usual)),
        (None, None) => Ok(()),
    }
}

/// Our captions mark commands with backticks, as the docs do: shown as code.
fn code_spans(escaped: &str) -> String {
    let mut out = String::new();
    for (i, part) in escaped.split('`').enumerate() {
        match i % 2 {
            1 => out.push_str(&format!("<code>{part}</code>")),
            _ => out.push_str(part),
        }
    }
    out
}

fn size_text(bytes: u64) -> String {
    match bytes {
        b if b < 10 << 10 => format!("{b} bytes"),
        b if b < 10 << 20 => format!("{} KiB", b >> 10),
        b => format!("{} MiB", b >> 20),
    }
}

/// An SVG as a `data:` image: drawn by the browser's image path, where its scripts do not
/// run and its markup cannot reach the page's.
fn write_picture(w: &mut impl Write, f: &Found, budget: &mut usize) -> io::Result<()> {
    if !f.complete {
        return writeln!(w, "<p class=\"cut\">Not shown: the picture has {} bytes, more than were read of it ({}).</p>", f.size, f.data.len());
    }
    if f.data.len() > *budget {
        return writeln!(w, "<p class=\"cut\">Not shown: the page already holds {} MiB of pictures.</p>", PICTURE_BUDGET >> 20);
    }
    *budget -= f.data.len();
    writeln!(w, "<img alt=\"{}\" src=\"data:image/svg+xml;base64,{}\">", escape(&clip(&f.path, NAME_CHARS)), base64::encode(&f.data))
}

fn write_csv(w: &mut impl Write, f: &Found) -> io::Result<()> {
    let text = String::from_utf8_lossy(&f.data);
    let mut table = csv_table(&text, TABLE_ROWS);
    if !f.complete {
        // the last line read may be cut in the middle
        table.rows.pop();
    }
    write_table(w, &table)?;
    if !f.complete {
        writeln!(w, "<p class=\"cut\">Cut: the first {} of {} bytes were read.</p>", f.data.len(), f.size)?;
    }
    Ok(())
}

fn write_json(w: &mut impl Write, f: &Found) -> io::Result<()> {
    if f.complete {
        match serde_json::from_slice::<serde_json::Value>(&f.data) {
            Ok(v) => {
                let tables = json_tables(&v, TABLE_ROWS, TABLES + 1);
                for t in tables.iter().take(TABLES) {
                    write_table(w, t)?;
                }
                if tables.len() > TABLES {
                    writeln!(w, "<p class=\"cut\">More tables in the file than the {TABLES} shown.</p>")?;
                }
            }
            Err(e) => writeln!(w, "<p class=\"cut\">Not valid JSON ({}); shown as text.</p>", escape(&e.to_string()))?,
        }
    } else {
        writeln!(w, "<p class=\"cut\">Too large to read whole ({} bytes): no tables, the beginning as text.</p>", f.size)?;
    }
    writeln!(w, "<details><summary>the file as text</summary>")?;
    write_text(w, f)?;
    writeln!(w, "</details>")
}

/// A binary file is listed; a recording also shows its header, which says what was run.
fn write_binary(w: &mut impl Write, f: &Found, kind: Kind) -> io::Result<()> {
    let header = matches!(kind, Kind::ExactTrace | Kind::SampledRecording).then(|| recording_header(&f.data)).flatten();
    match header {
        Some(v) => {
            writeln!(w, "<p>The recording's header (what was run, how):</p>")?;
            for t in json_tables(&v, TABLE_ROWS, TABLES) {
                write_table(w, &t)?;
            }
            Ok(())
        }
        None => writeln!(w, "<p class=\"cut\">Binary: listed, not shown.</p>"),
    }
}

/// The JSON header of a `.ksk` recording: the first JSON object after the magic, version
/// and length (docs/ARCHITECTURE.md, the recording format).
fn recording_header(data: &[u8]) -> Option<serde_json::Value> {
    if !data.starts_with(b"KANSOKU\0") {
        return None;
    }
    let start = data.iter().take(32).position(|&b| b == b'{')?;
    let v = serde_json::Deserializer::from_slice(&data[start..]).into_iter::<serde_json::Value>().next()?.ok()?;
    v.is_object().then_some(v)
}

fn write_table(w: &mut impl Write, t: &Table) -> io::Result<()> {
    writeln!(w, "<table>")?;
    if !t.caption.is_empty() {
        writeln!(w, "<caption><code>{}</code></caption>", escape(&t.caption))?;
    }
    // a long cell (compact JSON of a list) gets room to be read, not a column of letters
    let row = |cells: &[String], tag: &str| cells.iter().map(|c| format!("<{tag}{}>{}</{tag}>", if c.len() > 40 { " class=\"long\"" } else { "" }, escape(c))).collect::<String>();
    writeln!(w, "<tr>{}</tr>", row(&t.header, "th"))?;
    for r in &t.rows {
        writeln!(w, "<tr>{}</tr>", row(r, "td"))?;
    }
    writeln!(w, "</table>")?;
    if t.rows_left_out > 0 {
        writeln!(w, "<p class=\"cut\">{} more rows not shown.</p>", t.rows_left_out)?;
    }
    Ok(())
}

fn write_text(w: &mut impl Write, f: &Found) -> io::Result<()> {
    let text = String::from_utf8_lossy(&f.data);
    let mut end = text.len().min(TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some((at, _)) = text[..end].match_indices('\n').nth(TEXT_LINES - 1) {
        end = at + 1;
    }
    writeln!(w, "<pre>{}</pre>", escape(&text[..end]))?;
    if end < text.len() || !f.complete {
        writeln!(w, "<p class=\"cut\">Cut: {} of {} bytes shown (at most {} KiB or {TEXT_LINES} lines).</p>", end, f.size, TEXT_BYTES >> 10)?;
    }
    Ok(())
}

fn write_notes(w: &mut impl Write, notes: &[String]) -> io::Result<()> {
    writeln!(w, "<footer>")?;
    if !notes.is_empty() {
        writeln!(w, "<h2>Not shown</h2><ul>")?;
        for n in notes.iter().take(100) {
            writeln!(w, "<li>{}</li>", escape(&clip(n, 400)))?;
        }
        if notes.len() > 100 {
            writeln!(w, "<li>and {} more</li>", notes.len() - 100)?;
        }
        writeln!(w, "</ul>")?;
    }
    writeln!(w, "<p>Written by <code>kansoku report</code>. Everything is inside this file: no picture, style or script is fetched from elsewhere.</p></footer>")
}

/// Marks pictures the browser could not draw and says how many it drew.
fn write_script(w: &mut impl Write, nonce: &str) -> io::Result<()> {
    writeln!(
        w,
        "<script nonce=\"{nonce}\">
addEventListener('load', function () {{
  var images = document.images, broken = 0;
  for (var i = 0; i < images.length; i++) {{
    if (!images[i].complete || images[i].naturalWidth === 0) {{ broken++; images[i].classList.add('broken'); }}
  }}
  var p = document.getElementById('{PICTURE_CHECK_ID}');
  p.setAttribute('data-loaded', images.length - broken);
  p.setAttribute('data-broken', broken);
  p.textContent = 'Pictures: ' + (images.length - broken) + ' of ' + images.length + ' drawn' + (broken ? ', ' + broken + ' could not be drawn (outlined in red)' : '') + '.';
}});
</script>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_of(files: Vec<Found>) -> String {
        let g = Gathered { files, ..Gathered::default() };
        let mut out = Vec::new();
        write_html(&Page { directory: "d<i>r".into(), gathered: &g }, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hostile_names_and_contents_are_escaped() {
        let evil = "<script>alert(1)</script>\".txt";
        let html = page_of(vec![Found { path: evil.into(), size: 30, data: b"</pre><script>x()</script>".to_vec(), complete: true, error: None }]);
        assert!(!html.contains("<script>alert") && !html.contains("<script>x()"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;.txt"));
        assert!(html.contains("d&lt;i&gt;r"));
        assert_eq!(html.matches("<script").count(), 1, "only the page's own script");
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let data = "line\n".repeat(5000).into_bytes();
        let html = page_of(vec![Found { path: "big.txt".into(), size: 1 << 30, data, complete: false, error: None }]);
        assert!(html.contains("Cut: 5000 of 1073741824 bytes shown"), "{}", &html[html.len() - 2000..]);
    }

    #[test]
    fn a_recording_shows_its_header() {
        let mut data = b"KANSOKU\0\x02\0\x50\0\0\0".to_vec();
        data.extend_from_slice(br#"{"kind":"samples","program":"bin/seed000","args":["20000"]}"#);
        data.extend_from_slice(b"\x01\x02binary events");
        let html = page_of(vec![Found { path: "r.ksk".into(), size: 4000, data, complete: false, error: None }]);
        assert!(html.contains("<tr><td>program</td><td>bin/seed000</td></tr>"), "{html}");
    }

    #[test]
    fn pictures_are_data_images_and_cut_pictures_are_not_shown() {
        let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"><text>Eight items</text></svg>".to_vec();
        let html = page_of(vec![
            Found { path: "kiviat.svg".into(), size: svg.len() as u64, data: svg.clone(), complete: true, error: None },
            Found { path: "cut.svg".into(), size: 1 << 30, data: svg, complete: false, error: None },
        ]);
        assert_eq!(html.matches("<img ").count(), 1);
        assert!(html.contains("src=\"data:image/svg+xml;base64,PHN2Zy"));
        assert!(html.contains("Not shown: the picture has 1073741824 bytes"));
        assert!(html.contains("<section id=\"seed001\">"));
    }
}
