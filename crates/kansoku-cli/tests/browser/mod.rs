//! Headless Chromium (Debian `chromium`) for the tests that open kansoku's report page:
//! the page's own picture check read from the DOM, and a screenshot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Debian names the browser `chromium`; other systems `chromium-browser`.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name))).find(|p| p.is_file())
}

/// Runs headless Chromium on `page` with `extra` arguments, killed after 120 s (`timeout`):
/// as root it needs `--no-sandbox`, and a profile of its own so parallel runs do not meet.
fn headless(browser: &Path, page: &Path, extra: &[&str]) -> Output {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .expect("chromium runs");
    assert!(o.status.success(), "chromium {extra:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

/// The page's own check after loading: `(pictures drawn, pictures broken)`, read from the
/// DOM Chromium dumps once the load event has run (virtual time lets it finish first).
pub fn pictures_drawn(browser: &Path, page: &Path) -> (u64, u64, String) {
    let o = headless(browser, page, &["--virtual-time-budget=10000", "--dump-dom"]);
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let start = dom.find("id=\"picture-check\"").unwrap_or_else(|| panic!("no picture check in the DOM:\n{}", &dom[..dom.len().min(3000)]));
    let tag = &dom[dom[..start].rfind('<').unwrap()..start + dom[start..].find('>').unwrap()];
    let attr = |name: &str| -> u64 {
        let at = tag.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("the page's script did not run: no {name} in {tag}")) + name.len() + 2;
        tag[at..at + tag[at..].find('"').unwrap()].parse().unwrap()
    };
    (attr("data-loaded"), attr("data-broken"), dom)
}

/// A screenshot of the page's top; `(width, height, bytes)` of the PNG.
pub fn screenshot(browser: &Path, page: &Path, png: &Path) -> (u32, u32, u64) {
    headless(browser, page, &["--window-size=1280,2400", &format!("--screenshot={}", png.display())]);
    let data = std::fs::read(png).expect("chromium wrote the screenshot");
    assert_eq!(&data[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let be = |at: usize| u32::from_be_bytes(data[at..at + 4].try_into().unwrap());
    (be(16), be(20), data.len() as u64)
}

/// The SVG files under `dir`, recursively.
pub fn svgs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { svgs(&p) } else { usize::from(p.extension().is_some_and(|e| e == "svg")) })
        .sum()
}
