//! `kansoku report`'s page of any directory: files whose names and contents come from the
//! input (0xff between files, the first 0x00 between a name and its content), read whole
//! or cut. Whatever they hold, the page is written and only its own script is in it.
#![no_main]
use kansoku_report::{write_html, Found, Gathered, Manifest, Page};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Manifest::from_json("fuzz", data);
    let files = data
        .split(|&b| b == 0xff)
        .enumerate()
        .map(|(i, part)| {
            let (name, content) = match part.iter().position(|&b| b == 0) {
                Some(at) => (&part[..at], &part[at + 1..]),
                None => (part, &[][..]),
            };
            // every other file as if cut: a prefix of a larger one
            let complete = i % 2 == 0;
            Found { path: String::from_utf8_lossy(name).into_owned(), size: content.len() as u64 + u64::from(!complete), data: content.to_vec(), complete, error: None }
        })
        .collect();
    let g = Gathered { files, ..Gathered::default() };
    let mut page = Vec::new();
    write_html(&Page { directory: "fuzz".into(), gathered: &g }, &mut page).unwrap();
    let page = String::from_utf8(page).expect("the page is UTF-8");
    assert_eq!(page.matches("<script").count(), 1, "only the page's own script");
});
