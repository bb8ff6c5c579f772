//! The translation table (`kansoku.xlat`): for each new id, the original events it stands for.
//!
//! Binary format (LEB128 `u` = unsigned, `s` = signed):
//! ```text
//! "KXL1" | u64 LE hash of the original module | u entry count | entries in increasing new id
//! entry:  u new_id | u nargs | u prefix_len | [u prefix_ref_id if prefix_len > 0]
//!         | u suffix event count | events... | offsets: one s per event (prefix included)
//! event:  u original id | u nargs | sources...
//! source: 0 u position | 1 s constant | 2 op source source   (op: 0 add 1 sub 2 mul 3 shl 4 and 5 or 6 xor)
//! ```
//! An entry whose first events equal another (earlier) entry's first events stores only a
//! reference to it and the length of the shared prefix (the seed's table compression).
//! Offsets are the estimated instruction distance of each original event from the merged call
//! (negative: it ran before), used to rebuild timestamps.

use crate::error::{Result, TpError};
use serde::Serialize;
use std::collections::BTreeMap;

/// A pure i32 operation the host can redo (wrapping, as in wasm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BinOp {
    /// `i32.add`.
    Add,
    /// `i32.sub`.
    Sub,
    /// `i32.mul`.
    Mul,
    /// `i32.shl` (shift count modulo 32).
    Shl,
    /// `i32.and`.
    And,
    /// `i32.or`.
    Or,
    /// `i32.xor`.
    Xor,
}

impl BinOp {
    /// The operation on two values, wrapping as wasm does.
    pub fn apply(self, a: i32, b: i32) -> i32 {
        match self {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Shl => a.wrapping_shl(b as u32 & 31),
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
        }
    }
    fn code(self) -> u8 {
        self as u8
    }
    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => BinOp::Add,
            1 => BinOp::Sub,
            2 => BinOp::Mul,
            3 => BinOp::Shl,
            4 => BinOp::And,
            5 => BinOp::Or,
            6 => BinOp::Xor,
            _ => return None,
        })
    }
    /// The operator as C writes it, for the table's text.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Shl => "<<",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
        }
    }
}

/// Where an original argument's value comes from, given the merged record's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgSource {
    /// Argument number `n` of the merged record.
    Pos(u32),
    /// A constant the host knows.
    Const(i32),
    /// An expression over other sources.
    Expr(BinOp, Box<ArgSource>, Box<ArgSource>),
}

impl ArgSource {
    /// The original argument's value from a merged record's arguments; `None` when the
    /// record has too few.
    pub fn eval(&self, args: &[i32]) -> Option<i32> {
        Some(match self {
            ArgSource::Pos(p) => *args.get(*p as usize)?,
            ArgSource::Const(c) => *c,
            ArgSource::Expr(op, a, b) => op.apply(a.eval(args)?, b.eval(args)?),
        })
    }

    /// The source as text: `$0`, `7`, `($0 + $1)`.
    pub fn display(&self) -> String {
        match self {
            ArgSource::Pos(p) => format!("${p}"),
            ArgSource::Const(c) => c.to_string(),
            ArgSource::Expr(op, a, b) => format!("({} {} {})", a.display(), op.symbol(), b.display()),
        }
    }
}

/// One original event inside a merged one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct XlatEvent {
    /// The original trace id.
    pub id: u32,
    /// Where each of its original arguments comes from.
    pub args: Vec<ArgSource>,
}

/// The table entry of one new id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct XlatEntry {
    /// The merged call's id.
    pub new_id: u32,
    /// Number of arguments the merged record carries.
    pub nargs: u32,
    /// The original events it stands for, in program order.
    pub events: Vec<XlatEvent>,
    /// Estimated instruction offset of each event from the merged call (same length as events).
    pub offsets: Vec<i32>,
}

/// The whole translation table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct XlatTable {
    /// FNV-1a hash of the module the optimiser read.
    pub original_hash: u64,
    /// Each merged id's entry.
    pub entries: BTreeMap<u32, XlatEntry>,
}

/// Sizes of the encoded table, with and without prefix sharing.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct XlatSizes {
    /// Bytes of the encoded table (with prefix sharing, as written).
    pub bytes: usize,
    /// Bytes it would take without prefix sharing.
    pub bytes_without_prefix_sharing: usize,
    /// Entries encoded as a shared prefix plus their own tail.
    pub entries_sharing_a_prefix: usize,
}

fn put_u(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn put_s(out: &mut Vec<u8>, v: i64) {
    put_u(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_source(out: &mut Vec<u8>, s: &ArgSource) {
    match s {
        ArgSource::Pos(p) => {
            out.push(0);
            put_u(out, *p as u64);
        }
        ArgSource::Const(c) => {
            out.push(1);
            put_s(out, *c as i64);
        }
        ArgSource::Expr(op, a, b) => {
            out.push(2);
            out.push(op.code());
            put_source(out, a);
            put_source(out, b);
        }
    }
}

fn put_event(out: &mut Vec<u8>, e: &XlatEvent) {
    put_u(out, e.id as u64);
    put_u(out, e.args.len() as u64);
    for a in &e.args {
        put_source(out, a);
    }
}

impl XlatTable {
    /// Encodes the table, sharing prefixes between entries when `share_prefixes`.
    pub(crate) fn encode_with(&self, share_prefixes: bool) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        out.extend_from_slice(b"KXL1");
        out.extend_from_slice(&self.original_hash.to_le_bytes());
        put_u(&mut out, self.entries.len() as u64);
        let mut done: Vec<&XlatEntry> = Vec::new();
        let mut shared = 0;
        for e in self.entries.values() {
            let mut best: Option<(u32, usize)> = None;
            if share_prefixes {
                for d in &done {
                    let l = d.events.iter().zip(&e.events).take_while(|(a, b)| a == b).count();
                    if l > 0 && best.is_none_or(|(_, bl)| l > bl) {
                        best = Some((d.new_id, l));
                    }
                }
            }
            put_u(&mut out, e.new_id as u64);
            put_u(&mut out, e.nargs as u64);
            let skip = match best {
                Some((rid, l)) => {
                    shared += 1;
                    put_u(&mut out, l as u64);
                    put_u(&mut out, rid as u64);
                    l
                }
                None => {
                    put_u(&mut out, 0);
                    0
                }
            };
            put_u(&mut out, (e.events.len() - skip) as u64);
            for ev in &e.events[skip..] {
                put_event(&mut out, ev);
            }
            for o in &e.offsets {
                put_s(&mut out, *o as i64);
            }
            done.push(e);
        }
        (out, shared)
    }

    /// Encodes with prefix sharing.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(true).0
    }

    /// The encoded table's sizes, with and without prefix sharing.
    pub fn sizes(&self) -> XlatSizes {
        let (a, shared) = self.encode_with(true);
        let (b, _) = self.encode_with(false);
        XlatSizes { bytes: a.len(), bytes_without_prefix_sharing: b.len(), entries_sharing_a_prefix: shared }
    }

    /// Decodes a `kansoku.xlat` section.
    /// Errors name the byte offset in the section where decoding stopped.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader { b: bytes, pos: 0 };
        Self::decode_from(&mut r).map_err(|e| match e {
            TpError::BadXlat(what) => TpError::BadXlat(format!("at byte {}: {what}", r.pos)),
            other => other,
        })
    }

    fn decode_from(r: &mut Reader<'_>) -> Result<Self> {
        let bytes = r.b;
        let mut expanded = 0usize;
        if r.take(4)? != b"KXL1" {
            return Err(TpError::BadXlat("missing magic KXL1".into()));
        }
        let original_hash = u64::from_le_bytes(r.take(8)?.try_into().unwrap());
        let n = r.u()?;
        let mut entries: BTreeMap<u32, XlatEntry> = BTreeMap::new();
        for _ in 0..n {
            let new_id = r.u32()?;
            let nargs = r.u32()?;
            let prefix_len = r.u()? as usize;
            let mut events = Vec::new();
            if prefix_len > 0 {
                let rid = r.u32()?;
                let re = entries
                    .get(&rid)
                    .ok_or_else(|| TpError::BadXlat(format!("entry {new_id} refers to unknown earlier entry {rid}")))?;
                if prefix_len > re.events.len() {
                    return Err(TpError::BadXlat(format!("entry {new_id}: prefix longer than entry {rid}")));
                }
                // Shared prefixes are copied out: a chain of entries each sharing the whole
                // previous one grows quadratically, so the copies are bounded.
                expanded += re.events[..prefix_len].iter().map(XlatEvent::nodes).sum::<usize>();
                if expanded > MAX_EXPANDED_NODES {
                    return Err(TpError::BadXlat(format!(
                        "entry {new_id}: shared prefixes expand to more than {MAX_EXPANDED_NODES} events and argument terms (a table bomb, not a table the optimiser writes)"
                    )));
                }
                events.extend_from_slice(&re.events[..prefix_len]);
            }
            let ns = r.u()?;
            for _ in 0..ns {
                events.push(r.event()?);
            }
            let offsets = (0..events.len()).map(|_| r.s().map(|v| v as i32)).collect::<Result<Vec<_>>>()?;
            for ev in &events {
                for a in &ev.args {
                    check_positions(a, nargs, new_id)?;
                }
            }
            entries.insert(new_id, XlatEntry { new_id, nargs, events, offsets });
        }
        if r.pos != bytes.len() {
            return Err(TpError::BadXlat(format!("{} trailing bytes", bytes.len() - r.pos)));
        }
        Ok(XlatTable { original_hash, entries })
    }
}

/// The most events plus argument terms that shared prefixes may expand to in one table
/// (about 100 MiB; the optimiser's tables on the example suite hold a few thousand).
const MAX_EXPANDED_NODES: usize = 1 << 22;

impl XlatEvent {
    /// The event and every term of its arguments: what copying it costs.
    fn nodes(&self) -> usize {
        fn count(s: &ArgSource) -> usize {
            match s {
                ArgSource::Expr(_, a, b) => 1 + count(a) + count(b),
                _ => 1,
            }
        }
        1 + self.args.iter().map(count).sum::<usize>()
    }
}

fn check_positions(s: &ArgSource, nargs: u32, id: u32) -> Result<()> {
    match s {
        ArgSource::Pos(p) if *p >= nargs => {
            Err(TpError::BadXlat(format!("entry {id} uses argument ${p} but carries {nargs}")))
        }
        ArgSource::Expr(_, a, b) => {
            check_positions(a, nargs, id)?;
            check_positions(b, nargs, id)
        }
        _ => Ok(()),
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.pos + n > self.b.len() {
            return Err(TpError::BadXlat("table ends early".into()));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u(&mut self) -> Result<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.take(1)?[0];
            if shift > 63 {
                return Err(TpError::BadXlat("varint too long".into()));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }
    fn u32(&mut self) -> Result<u32> {
        u32::try_from(self.u()?).map_err(|_| TpError::BadXlat("value does not fit 32 bits".into()))
    }
    fn s(&mut self) -> Result<i64> {
        let v = self.u()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    fn source(&mut self, depth: u32) -> Result<ArgSource> {
        if depth > 64 {
            return Err(TpError::BadXlat("expression nested too deeply".into()));
        }
        match self.take(1)?[0] {
            0 => Ok(ArgSource::Pos(self.u32()?)),
            1 => Ok(ArgSource::Const(self.s()? as i32)),
            2 => {
                let op = BinOp::from_code(self.take(1)?[0]).ok_or_else(|| TpError::BadXlat("unknown operator".into()))?;
                let a = self.source(depth + 1)?;
                let b = self.source(depth + 1)?;
                Ok(ArgSource::Expr(op, Box::new(a), Box::new(b)))
            }
            t => Err(TpError::BadXlat(format!("unknown source tag {t}"))),
        }
    }
    fn event(&mut self) -> Result<XlatEvent> {
        let id = self.u32()?;
        let n = self.u()?;
        let args = (0..n).map(|_| self.source(0)).collect::<Result<Vec<_>>>()?;
        Ok(XlatEvent { id, args })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: u32, args: Vec<ArgSource>) -> XlatEvent {
        XlatEvent { id, args }
    }

    #[test]
    fn roundtrip_with_prefix_sharing() {
        let x = ev(1, vec![ArgSource::Pos(0)]);
        let y = ev(2, vec![ArgSource::Pos(0), ArgSource::Pos(1)]);
        let z = ev(3, vec![ArgSource::Expr(BinOp::Mul, Box::new(ArgSource::Pos(0)), Box::new(ArgSource::Pos(1))), ArgSource::Const(7)]);
        let mut t = XlatTable { original_hash: 42, entries: BTreeMap::new() };
        t.entries.insert(100, XlatEntry { new_id: 100, nargs: 2, events: vec![x.clone(), y.clone(), z.clone()], offsets: vec![-5, -2, 0] });
        t.entries.insert(101, XlatEntry { new_id: 101, nargs: 2, events: vec![x, y, z, ev(4, vec![])], offsets: vec![-9, -6, -3, 0] });
        let s = t.sizes();
        assert_eq!(s.entries_sharing_a_prefix, 1);
        assert!(s.bytes < s.bytes_without_prefix_sharing);
        let back = XlatTable::decode(&t.encode()).unwrap();
        assert_eq!(back, t);
        assert!(XlatTable::decode(&t.encode()[..10]).is_err());
    }

    #[test]
    fn a_table_bomb_is_refused_with_its_offset() {
        // One event with an 8191-term argument, shared as a prefix by 600 later entries:
        // 20 KB that expanded to about 5 M terms before.
        fn tree(depth: u32) -> ArgSource {
            if depth == 0 {
                ArgSource::Pos(0)
            } else {
                ArgSource::Expr(BinOp::Add, Box::new(tree(depth - 1)), Box::new(tree(depth - 1)))
            }
        }
        let mut b = b"KXL1".to_vec();
        b.extend(0u64.to_le_bytes());
        put_u(&mut b, 601);
        for (field, v) in [("new_id", 0), ("nargs", 1), ("prefix_len", 0), ("suffix", 1)] {
            let _ = field;
            put_u(&mut b, v);
        }
        put_event(&mut b, &ev(1, vec![tree(12)]));
        put_s(&mut b, 0);
        for id in 1..=600u64 {
            for v in [id, 1, 1, 0, 0] {
                put_u(&mut b, v);
            }
            put_s(&mut b, 0);
        }
        assert!(b.len() < 30_000);
        let e = XlatTable::decode(&b).unwrap_err().to_string();
        assert!(e.contains("table bomb") && e.contains("at byte"), "{e}");
        // A garbled table names where decoding stopped.
        let e = XlatTable::decode(b"KXL1\0\0\0\0\0\0\0\0\x01\x05\x00\x00\x01\x09").unwrap_err().to_string();
        assert!(e.contains("at byte"), "{e}");
    }

    #[test]
    fn eval_wraps_like_wasm() {
        let s = ArgSource::Expr(BinOp::Shl, Box::new(ArgSource::Pos(0)), Box::new(ArgSource::Const(33)));
        assert_eq!(s.eval(&[3]), Some(6));
        assert_eq!(BinOp::Mul.apply(i32::MAX, 2), -2);
    }
}
