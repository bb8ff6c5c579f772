//! How a marker spec names its function (issue 42): `F`, `F@LIB` (`adler32@libz`) or
//! `F@plt` (a PLT stub's own name). Resolving a spec against a program is the probe's
//! (`kansoku_probe::marker`); reading it back from a recording's header is everyone's.

/// Splits `F@LIB` into `F` and the library; `F@plt` is a PLT stub's own name, no library.
pub fn split_marker(spec: &str) -> (&str, Option<&str>) {
    match spec.rsplit_once('@') {
        Some((_, "plt")) => (spec, None),
        Some((f, lib)) if !f.is_empty() && !lib.is_empty() => (f, Some(lib)),
        _ => (spec, None),
    }
}

/// The name a marker spec's function carries in symbolised samples, without opening any
/// file: `adler32@libz` → `adler32`, `adler32@plt` stays. Recordings name their marker
/// function exactly (header `marker_function`); this is for recordings made before that.
pub fn marker_function_name(spec: &str) -> &str {
    split_marker(spec).0
}
