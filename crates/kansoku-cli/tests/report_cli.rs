//! `kansoku report DIR` (issue 16) on a directory of real analysis runs, opened in
//! headless Chromium (Debian `chromium`): a screenshot, and every picture drawn, none
//! broken. Hostile names and huge files are escaped and cut.

mod harness;
use harness::*;

mod browser;

use std::path::Path;
use std::process::Output;

use browser::{chromium, pictures_drawn, screenshot, svgs};
use kansoku_examples::{build, test_build_dir};

fn ok(args: &[&str]) -> Output {
    let o = kansoku(args);
    assert!(o.status.success(), "kansoku {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
    o
}

#[test]
fn report_of_real_analysis_runs_opens_in_chromium_with_every_picture_drawn() {
    let bin = test_build_dir();
    let (paths, seed000, workload) = (build("paths", &bin).unwrap(), build("seed000", &bin).unwrap(), build("workload", &bin).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("results");
    std::fs::create_dir(&d).unwrap();
    // seed 003: the path table and the CFG picture (Graphviz)
    ok(&["paths", "--source", "step", "-o", s(&d.join("paths.csv")), "--cfg", "walk", "--svg", s(&d.join("paths-walk.svg")), "--", s(&paths), "5", "2"]);
    // seed 001: the waveform, its autocorrelation and the JSON report
    ok(&["wave", "--exact", "--marker", "func_M", "--max-instructions", "20000", "--json", "-o", s(&d.join("wave.json")), "--svg", s(&d.join("wave-seed000.svg")), "--", s(&seed000), "100000"]);
    // seed 001: the monitor's Kiviat graph, time series and JSON
    ok(&["monitor", "--interval", "50", "--json", "-o", s(&d.join("monitor.json")), "--svg", s(&d.join("monitor")), "--", s(&workload), "cpu", "1", "1"]);
    let pictures = svgs(&d);
    assert_eq!(pictures, 5, "paths-walk, wave, wave-acf, kiviat, timeseries");

    let o = ok(&["report", s(&d)]);
    let page = d.join("index.html");
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains(s(&page)), "says where: {said}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<img ").count(), pictures, "every picture embedded");
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "nothing fetched from elsewhere");
    for (anchor, kind) in [("seed001", "Kiviat graph"), ("seed001", "program waveform"), ("seed001", "waveform autocorrelation"), ("seed003", "CFG picture"), ("seed003", "path table")] {
        assert!(html.contains(&format!("<section id=\"{anchor}\">")) && html.contains(&format!("· {kind}</span>")), "{anchor} {kind}");
    }
    assert!(html.contains("<th>rank</th>") && html.contains("walk: BB0"), "the path table as a table");
    assert!(html.contains("written by <code>kansoku wave --svg FILE -- PROGRAM</code>"), "no manifest: the usual command");
    // a second run does not list the first page
    ok(&["report", s(&d)]);
    assert!(!std::fs::read_to_string(&page).unwrap().contains("<code>index.html</code>"));

    let Some(browser) = chromium() else {
        skip(Missing::Installed { package: "chromium" }, "the browser half: chromium is not installed");
        return;
    };
    let (drawn, broken, _) = pictures_drawn(&browser, &page);
    assert_eq!((drawn, broken), (pictures as u64, 0), "every picture drawn by Chromium, none broken");
    let png = tmp.path().join("report.png");
    let (width, height, bytes) = screenshot(&browser, &page, &png);
    assert_eq!((width, height), (1280, 2400));
    // a blank or unstyled page compresses to a few KiB; pictures and tables do not
    assert!(bytes > 60_000, "screenshot of {bytes} bytes: is the page empty?");
    if let Some(keep) = std::env::var_os("KANSOKU_REPORT_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}

#[test]
fn hostile_names_and_huge_files_are_escaped_and_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let name = "<script>document.title='pwned'<.txt";
    std::fs::write(d.join(name), "</pre><script>document.title='pwned'</script>").unwrap();
    std::fs::write(d.join("<img src=x onerror=alert(1)>.csv"), "a,b\n<b>bold</b>,\"</table>\"\n").unwrap();
    std::fs::write(d.join("hostile.json"), r#"{"x": "</script><script>document.title='pwned'</script>", "rows": [{"a": "<i>"}]}"#).unwrap();
    // an SVG with a script draws as a picture: through <img> its script never runs
    let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"120\" height=\"40\"><script>parent.document.title='pwned'</script><rect width=\"120\" height=\"40\" fill=\"teal\"/></svg>";
    std::fs::write(d.join("hostile.svg"), svg).unwrap();
    let line = "a line of a huge log, repeated until the file is twenty megabytes long\n";
    std::fs::write(d.join("huge.txt"), line.repeat((20 << 20) / line.len())).unwrap();
    let big_svg = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\">{}</svg>", "<rect width=\"1\" height=\"1\"/>".repeat(400_000));
    std::fs::write(d.join("huge.svg"), &big_svg).unwrap();

    let page = d.join("page.html");
    ok(&["report", s(d), "-o", s(&page)]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() < 1 << 20, "the page is {} bytes: huge files are cut", html.len());
    assert_eq!(html.matches("<script").count(), 1, "only the page's own script");
    assert!(html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;.txt"), "the name escaped");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;.csv") && html.contains("<td>&lt;b&gt;bold&lt;/b&gt;</td>"));
    assert!(html.contains("Cut: 65536 of 20971"), "the huge text says what was cut");
    assert!(html.contains(&format!("Not shown: the picture has {} bytes", big_svg.len())), "the huge picture says why it is missing");
    assert_eq!(html.matches("<img ").count(), 1);

    let Some(browser) = chromium() else {
        skip(Missing::Installed { package: "chromium" }, "the browser half: chromium is not installed");
        return;
    };
    let (drawn, broken, dom) = pictures_drawn(&browser, &page);
    assert_eq!((drawn, broken), (1, 0));
    assert!(!dom.contains("pwned</title>") && dom.contains("<title>kansoku report: "), "no hostile script ran");
}

#[test]
fn report_of_a_missing_directory_names_it() {
    let o = kansoku(&["report", "/nonexistent/kansoku-results"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/kansoku-results"), "{err}");
}

#[test]
fn only_what_lies_inside_the_directory_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("results");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    // a secret beside the directory, reached by a link, by a chain of links and by a
    // link inside a subdirectory that climbs out
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-0451\n").unwrap();
    let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, d.join(name)).unwrap();
    link(&secret, "id_rsa");
    link(Path::new("../secret.txt"), "relative.txt");
    link(&d.join("hop1"), "chain.txt");
    link(&d.join("hop2"), "hop1");
    link(&d.join("sub/../../secret.txt"), "hop2");
    link(Path::new("/dev/zero"), "zero.bin");
    link(Path::new("/etc"), "etc");
    // links that stay inside are followed
    std::fs::write(d.join("sub/inside.txt"), "INSIDE-TEXT-77\n").unwrap();
    link(Path::new("sub/inside.txt"), "inside-link.txt");
    let fifo = d.join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // a 10 GB sparse file costs its capped prefix
    let sparse = std::fs::File::create(d.join("huge.log")).unwrap();
    sparse.set_len(10 << 30).unwrap();
    drop(sparse);

    let page = tmp.path().join("page.html");
    ok(&["report", s(&d), "-o", s(&page)]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("TOP-SECRET-0451"), "a file outside the directory is in the page");
    assert!(html.contains("INSIDE-TEXT-77"), "a link inside the directory is followed");
    for (name, why) in [
        ("id_rsa", "a link leading outside the directory, not followed"),
        ("relative.txt", "a link leading outside the directory, not followed"),
        ("chain.txt", "a link leading outside the directory, not followed"),
        ("zero.bin", "a link leading outside the directory, not followed"),
        ("etc", "a link leading outside the directory, not followed"),
        ("pipe", "not a regular file (a device, FIFO or socket), not read"),
    ] {
        assert!(html.contains(&format!("{name}: {why}")), "{name} is listed as skipped: {why}");
    }
    assert!(html.contains("huge.log") && html.len() < 2 << 20, "the sparse file is cut ({} bytes of page)", html.len());
}
