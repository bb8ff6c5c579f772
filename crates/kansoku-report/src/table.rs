//! Tables from CSV and JSON files: the page shows what the file says, in rows.
//!
//! JSON is shown generically, so a new report field appears without a change here: an
//! object's scalars (nested objects flattened to `a.b` keys) make one key/value table,
//! each array of objects a table of its own, one column per key.

use serde_json::Value;

/// A table as the page draws it: text cells, and how many rows were left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Where in the file the table comes from (`refs`, `summary.programs`), empty for the whole.
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub rows_left_out: usize,
}

/// Cells longer than this are cut (with `…`): a cell is a glance, the raw file is below.
const CELL_CHARS: usize = 120;
/// Columns of an array-of-objects table, at most.
const COLUMNS: usize = 24;
/// Nested objects deeper than this are shown as compact JSON in one cell.
const DEPTH: usize = 4;

/// Cuts `text` to `max` characters, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Columns of a CSV table, at most: a line of a million commas is not a million cells.
const CSV_COLUMNS: usize = 40;

/// A CSV file (RFC 4180 quoting) as one table; its first line is the header.
pub fn csv_table(text: &str, max_rows: usize) -> Table {
    let mut records = csv_records(text);
    let header = if records.is_empty() { Vec::new() } else { records.remove(0) };
    let rows_left_out = records.len().saturating_sub(max_rows);
    records.truncate(max_rows);
    let widest = records.iter().chain([&header]).map(Vec::len).max().unwrap_or(0);
    let caption = if widest > CSV_COLUMNS { format!("the first {CSV_COLUMNS} of {widest} columns") } else { String::new() };
    let clip_row = |r: Vec<String>| r.iter().take(CSV_COLUMNS).map(|c| clip(c, CELL_CHARS)).collect();
    Table { caption, header: clip_row(header), rows: records.into_iter().map(clip_row).collect(), rows_left_out }
}

/// Splits CSV into records: `"` quotes a field, `""` inside it is one quote.
fn csv_records(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    records
}

/// A JSON document as tables (at most `max_tables`, each at most `max_rows` rows).
pub fn json_tables(value: &Value, max_rows: usize, max_tables: usize) -> Vec<Table> {
    let mut tables = Vec::new();
    walk(value, "", max_rows, &mut tables);
    tables.truncate(max_tables);
    tables
}

fn walk(value: &Value, path: &str, max_rows: usize, tables: &mut Vec<Table>) {
    match value {
        Value::Object(_) => {
            let mut fields = Table { caption: path.to_string(), header: vec!["field".into(), "value".into()], rows: Vec::new(), rows_left_out: 0 };
            let mut nested = Vec::new();
            flatten(value, "", 0, &mut fields.rows, &mut nested);
            let rows_left_out = fields.rows.len().saturating_sub(max_rows);
            fields.rows.truncate(max_rows);
            fields.rows_left_out = rows_left_out;
            if !fields.rows.is_empty() {
                tables.push(fields);
            }
            for (key, array) in nested {
                walk(array, &join(path, &key), max_rows, tables);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => tables.push(objects_table(items, path, max_rows)),
        other => tables.push(Table { caption: path.to_string(), header: vec!["value".into()], rows: vec![vec![cell(other)]], rows_left_out: 0 }),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Scalars of an object as `a.b` rows; arrays of objects are kept aside for tables of
/// their own (`nested`, with their dotted key).
fn flatten<'v>(value: &'v Value, prefix: &str, depth: usize, rows: &mut Vec<Vec<String>>, nested: &mut Vec<(String, &'v Value)>) {
    let Value::Object(map) = value else { return };
    for (key, v) in map {
        let key = join(prefix, key);
        match v {
            Value::Object(_) if depth < DEPTH => flatten(v, &key, depth + 1, rows, nested),
            Value::Array(items) if items.iter().any(Value::is_object) => nested.push((key, v)),
            _ => rows.push(vec![clip(&key, CELL_CHARS), cell(v)]),
        }
    }
}

/// An array of objects: one row each, one column per key seen in the first rows; an
/// object inside a row spreads over `key.field` columns (one level), so a row of
/// observations reads as numbers, not as JSON.
fn objects_table(items: &[Value], path: &str, max_rows: usize) -> Table {
    let mut header: Vec<String> = Vec::new();
    for item in items.iter().take(50) {
        for (key, _) in row_cells(item) {
            if header.len() < COLUMNS && !header.contains(&key) {
                header.push(key);
            }
        }
    }
    let rows = items
        .iter()
        .take(max_rows)
        .map(|item| match item {
            Value::Object(_) => {
                let cells = row_cells(item);
                header.iter().map(|k| cells.iter().find(|(c, _)| c == k).map(|(_, v)| cell(v)).unwrap_or_default()).collect()
            }
            other => vec![cell(other)],
        })
        .collect();
    Table { caption: path.to_string(), header: header.iter().map(|h| clip(h, CELL_CHARS)).collect(), rows, rows_left_out: items.len().saturating_sub(max_rows) }
}

/// A row's cells by column name: its fields, an object's fields one level down.
fn row_cells(item: &Value) -> Vec<(String, &Value)> {
    let Value::Object(map) = item else { return Vec::new() };
    let mut cells = Vec::new();
    for (key, v) in map {
        match v {
            Value::Object(inner) if !inner.is_empty() => cells.extend(inner.iter().map(|(k, x)| (format!("{key}.{k}"), x))),
            _ => cells.push((key.clone(), v)),
        }
    }
    cells
}

/// One value as a cell: strings bare, integers as written, fractions rounded to what a
/// reader compares (the file as text keeps every digit), the rest as compact JSON.
fn cell(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Number(n) if n.is_f64() => n.as_f64().map_or_else(|| n.to_string(), fraction),
        other => other.to_string(),
    };
    clip(&text, CELL_CHARS)
}

/// Four decimals from 1 on (two from 100 on), four significant digits below.
fn fraction(x: f64) -> String {
    let a = x.abs();
    let decimals = if a >= 100.0 {
        2
    } else if a >= 1.0 || a == 0.0 {
        4
    } else {
        (3 - a.log10().floor() as i32).clamp(4, 12) as usize
    };
    let text = format!("{x:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_row_cap() {
        let t = csv_table("rank,path,lines\n1,\"walk: BB0 BB1\",\"a.c:1,2\"\n2,\"say \"\"hi\"\"\",x\n3,y,z\n", 2);
        assert_eq!(t.header, ["rank", "path", "lines"]);
        assert_eq!(t.rows[0], ["1", "walk: BB0 BB1", "a.c:1,2"]);
        assert_eq!(t.rows[1][1], "say \"hi\"");
        assert_eq!((t.rows.len(), t.rows_left_out), (2, 1));
    }

    #[test]
    fn csv_columns_are_capped() {
        let t = csv_table(&format!("{}\n", ",".repeat(999)), 10);
        assert_eq!((t.header.len(), t.caption.as_str()), (40, "the first 40 of 1000 columns"));
    }

    #[test]
    fn json_objects_flatten_and_arrays_of_objects_become_tables() {
        let v: Value = serde_json::from_str(r#"{"interval_ms": 50, "summary": {"eight": {"cpu_active": 98.0}, "programs": [{"name": "target", "percent": 45.0}, {"name": "x", "count": 3, "cpu": {"idle": 1}}]}}"#).unwrap();
        let t = json_tables(&v, 100, 10);
        assert_eq!(t[0].rows, [vec!["interval_ms".to_string(), "50".into()], vec!["summary.eight.cpu_active".into(), "98".into()]]);
        assert_eq!(t[1].caption, "summary.programs");
        assert_eq!(t[1].header, ["name", "percent", "count", "cpu.idle"]);
        assert_eq!(t[1].rows[1], ["x", "", "3", "1"]);
    }

    #[test]
    fn fractions_are_rounded_for_reading() {
        assert_eq!(fraction(97.53694581280789), "97.5369");
        assert_eq!(fraction(343.14159), "343.14");
        assert_eq!(fraction(12.313786197246603), "12.3138");
        assert_eq!(fraction(0.000576), "0.000576");
        assert_eq!(fraction(0.431248123), "0.4312");
        assert_eq!(fraction(98.0), "98");
        assert_eq!(fraction(0.0), "0");
        assert_eq!(fraction(-2.5), "-2.5");
    }

    #[test]
    fn long_cells_are_clipped() {
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("åäö", 3), "åäö");
    }
}
