//! Reading the binary stream of kansoku's own Valgrind tool
//! (`kansoku-probe/valgrind-tool/kansoku_main.c`).
//!
//! ```text
//! frame  := "KSB1" u32le payload_len payload          payload_len in 1..=65528
//! record := varint v, v even     a superblock entry: address = prev + unzigzag(v >> 1)
//!         | 0x01 varint avma varint svma varint len bytes[len]
//!                                an object's .text: runtime, link address and path
//!         | 0x03 varint tid      the superblocks after it are run by this thread
//!         | 0x05 varint addr varint n bytes[n]
//!                                exact mode: a translated superblock's shape, the length
//!                                of each of its n instructions, before its first entry
//!         | 0x07 varint v        exact mode: the superblock just entered left early, at
//!                                its instruction v >> 2; v & 3 says how (see [`ExitKind`])
//!         | 0x09 varint sig varint ip
//!                                exact mode: signal `sig` is delivered to the running
//!                                thread, whose next instruction was `ip`
//!         | 0x0b varint v varint z
//!                                data mode: instruction v >> 1 of the superblock just
//!                                entered reads (v & 1 = 0) or writes (1) memory at
//!                                prev_data + unzigzag(z)
//!         | 0x0d varint id varint parent varint z varint count
//!                                paths mode: node `id` of the tool's path trie is the
//!                                path of node `parent` (0: the empty path) followed by
//!                                the superblock at prev + unzigzag(z), which becomes prev;
//!                                `count` paths ended there
//!         | 0x0f varint n        paths mode: the trie above (n nodes) is complete; node
//!                                ids start again
//!         | 0x11 varint tid varint node
//!                                paths mode: thread `tid` ended (or the run did) inside
//!                                the path of `node` of the next complete trie
//!         | 0x13 varint n        paths mode: n more superblocks were entered
//!         | 0x17 varint n        paths mode: the trie above and the open paths before it
//!                                are a snapshot taken before an execve: what counts if
//!                                the stream ends here, replaced by the next trie if not
//!         | 0x15 varint addr     paths mode: a path ran past the tool's longest (at addr)
//!                                without a cut it could be sure of; it counted no more
//! ```
//! Varints are LEB128 (7 bits a byte, low bits first); `prev` and `prev_data` are 0 at every frame start, so
//! a damaged frame never spoils the next one. The tool writes one frame per `write(2)`.
//!
//! A thread record's `tid` is the kernel thread id (`gettid(2)`) of the Valgrind thread that
//! starts running client code; the tool writes one whenever the running thread changes, the
//! first before the main thread's first superblock (the main thread's tid is the process
//! id, as in the exact tracer's recordings). Streams written before thread records existed
//! have none: all their superblocks belong to one thread, and they decode as before.
//!
//! [`StreamDecoder`] takes the bytes in chunks of any size and hands out [`Item`]s. Damage is
//! reported, not fatal: bytes that are not a frame are skipped up to the next `KSB1`, a frame
//! holding a record it cannot decode loses the rest of that frame, and a stream that ends
//! inside a frame gives the complete records of that frame and then says it was cut.

/// The four bytes every frame starts with.
pub const MAGIC: &[u8; 4] = b"KSB1";
/// Frame header: magic and payload length.
pub(crate) const HEADER: usize = 8;
/// The tool's frame buffer (header included).
pub(crate) const MAX_FRAME: usize = 65536;

/// One decoded element of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A superblock was entered at this runtime address.
    Superblock(u64),
    /// An object Valgrind loaded: its `.text` runtime (`avma`) and link (`svma`) address.
    Module {
        /// Runtime address of `.text`.
        avma: u64,
        /// Link-time address of `.text`.
        svma: u64,
        /// The object's path.
        path: &'a str,
    },
    /// The following superblocks are run by this thread (kernel thread id).
    Thread(u32),
    /// Exact mode: the instruction lengths of the superblock translated at `addr`.
    Shape {
        /// The superblock's runtime address.
        addr: u64,
        /// Each instruction's length in bytes, in order.
        lengths: &'a [u8],
    },
    /// Exact mode: the superblock just entered left at its instruction `index`.
    Exit {
        /// Index of the instruction in the superblock, from 0.
        index: u32,
        /// Whether that instruction ran.
        kind: ExitKind,
    },
    /// Exact mode: a signal is delivered; `ip` is where the thread stood.
    Signal {
        /// The signal number.
        signal: i32,
        /// The thread's instruction pointer.
        ip: u64,
    },
    /// Data mode: instruction `index` of the superblock just entered accesses `addr`.
    Access {
        /// Index of the instruction in the superblock, from 0.
        index: u32,
        /// True for a store.
        write: bool,
        /// The data address.
        addr: u64,
    },
    /// Paths mode: a node of the tool's path trie.
    PathNode {
        /// The node's id.
        id: u32,
        /// Its parent's id (0: the empty path).
        parent: u32,
        /// The superblock address the node adds to its parent's path.
        addr: u64,
        /// Paths that ended at this node.
        count: u64,
    },
    /// Paths mode: the trie of `nodes` nodes is complete.
    PathsEnd {
        /// Nodes the trie holds.
        nodes: u32,
    },
    /// Paths mode: the trie so far, written before an execve (see the format above).
    PathsSnapshot {
        /// Nodes the trie held then.
        nodes: u32,
    },
    /// Paths mode: thread `tid` ended inside the path of `node` (of the next complete trie).
    OpenPath {
        /// The thread's kernel id.
        tid: u32,
        /// The trie node of its unfinished path.
        node: u32,
    },
    /// Paths mode: this many more superblocks were entered.
    Entries(u64),
    /// Paths mode: the tool gave up counting at a path too long to keep (at `addr`).
    PathsGaveUp(u64),
    /// Something was lost here: byte offset in the stream and what happened.
    Damage {
        /// Byte offset in the stream.
        offset: u64,
        /// What was lost (a bad frame, garbage skipped).
        what: String,
    },
}

/// How a superblock was left before its end (the tool knows it from VEX's side exits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitKind {
    /// The instruction at the exit did not run (a fault, or VEX restarts it).
    Before,
    /// The instruction at the exit ran; the rest of the superblock did not.
    After,
    /// A `rep` string instruction found its count at zero: it ran, with no repetition,
    /// unless this entry only came back to it after its last repetition.
    RepDone,
}

/// Incremental decoder of the tool's stream.
#[derive(Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    /// Stream offset of `pending[0]`.
    offset: u64,
    /// Inside bytes that are not a frame (reported once per stretch).
    in_garbage: bool,
    /// Whole frames decoded so far.
    pub frames: u64,
    /// Stream bytes fed so far.
    pub bytes: u64,
}

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let c = *b.get(*i)?;
        *i += 1;
        if shift == 63 && c > 1 {
            return None;
        }
        v |= u64::from(c & 0x7f) << shift;
        if c & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Decodes one frame's payload (or, with `cut`, the part of it that arrived before the
/// stream ended). A record that cannot be decoded loses the rest of the payload. In a cut
/// payload a record that merely runs out of bytes is the cut itself, not a second damage:
/// it is left to the caller's one report, and its kind returned.
fn decode_payload(p: &[u8], base: u64, cut: bool, f: &mut impl FnMut(Item)) -> Option<&'static str> {
    let mut prev: u64 = 0;
    let mut prev_data: u64 = 0;
    let mut i = 0usize;
    // a record that runs past the end: damage in a whole frame, the cut in a cut one
    let past_end = |kind: &'static str, start: usize, f: &mut dyn FnMut(Item)| {
        if cut {
            Some(kind)
        } else {
            f(Item::Damage { offset: base + start as u64, what: format!("a {kind} record runs past the end of its frame") });
            None
        }
    };
    while i < p.len() {
        let start = i;
        let c = p[i];
        if c & 1 == 0 {
            // the hot case: a superblock entry, usually one to three bytes
            let Some(v) = varint(p, &mut i) else {
                return past_end("superblock", start, f);
            };
            let z = v >> 1;
            let delta = (z >> 1) ^ (z & 1).wrapping_neg();
            prev = prev.wrapping_add(delta);
            f(Item::Superblock(prev));
        } else if c == 0x01 {
            i += 1;
            let (Some(avma), Some(svma), Some(len)) = (varint(p, &mut i), varint(p, &mut i), varint(p, &mut i)) else {
                return past_end("module", start, f);
            };
            let Some(bytes) = usize::try_from(len).ok().and_then(|l| p.get(i..i.checked_add(l)?)) else {
                if cut {
                    return Some("module");
                }
                f(Item::Damage { offset: base + start as u64, what: format!("a module record's path ({len} bytes) runs past the end of its frame") });
                return None;
            };
            i += bytes.len();
            match std::str::from_utf8(bytes) {
                Ok(path) => f(Item::Module { avma, svma, path }),
                Err(_) => f(Item::Damage { offset: base + start as u64, what: "a module record's path is not UTF-8".into() }),
            }
        } else if c == 0x03 {
            i += 1;
            match varint(p, &mut i).map(u32::try_from) {
                Some(Ok(tid)) => f(Item::Thread(tid)),
                Some(Err(_)) => {
                    f(Item::Damage { offset: base + start as u64, what: "a thread record's id does not fit 32 bits".into() });
                    return None;
                }
                None => return past_end("thread", start, f),
            }
        } else if c == 0x05 {
            i += 1;
            let (Some(addr), Some(n)) = (varint(p, &mut i), varint(p, &mut i)) else {
                return past_end("shape", start, f);
            };
            let Some(lengths) = usize::try_from(n).ok().and_then(|l| p.get(i..i.checked_add(l)?)) else {
                return past_end("shape", start, f);
            };
            i += lengths.len();
            if lengths.is_empty() || lengths.len() > crate::recording::MAX_SHAPE_INSTRUCTIONS || lengths.iter().any(|&l| l == 0 || l > 15) {
                f(Item::Damage { offset: base + start as u64, what: format!("a shape record at {addr:#x} with {} instructions is not a superblock", lengths.len()) });
                return None;
            }
            f(Item::Shape { addr, lengths });
        } else if c == 0x07 {
            i += 1;
            let Some(v) = varint(p, &mut i) else {
                return past_end("exit", start, f);
            };
            let kind = match v & 3 {
                0 => ExitKind::Before,
                1 => ExitKind::After,
                2 => ExitKind::RepDone,
                _ => {
                    f(Item::Damage { offset: base + start as u64, what: "an exit record of unknown kind 3".into() });
                    return None;
                }
            };
            let Ok(index) = u32::try_from(v >> 2) else {
                f(Item::Damage { offset: base + start as u64, what: "an exit record's instruction index does not fit 32 bits".into() });
                return None;
            };
            f(Item::Exit { index, kind });
        } else if c == 0x09 {
            i += 1;
            let (Some(signal), Some(ip)) = (varint(p, &mut i), varint(p, &mut i)) else {
                return past_end("signal", start, f);
            };
            let Ok(signal) = i32::try_from(signal) else {
                f(Item::Damage { offset: base + start as u64, what: format!("a signal record's number {signal} is out of range") });
                return None;
            };
            f(Item::Signal { signal, ip });
        } else if c == 0x0b {
            i += 1;
            let (Some(v), Some(z)) = (varint(p, &mut i), varint(p, &mut i)) else {
                return past_end("access", start, f);
            };
            let Ok(index) = u32::try_from(v >> 1) else {
                f(Item::Damage { offset: base + start as u64, what: "an access record's instruction index does not fit 32 bits".into() });
                return None;
            };
            prev_data = prev_data.wrapping_add((z >> 1) ^ (z & 1).wrapping_neg());
            f(Item::Access { index, write: v & 1 == 1, addr: prev_data });
        } else if c == 0x0d {
            i += 1;
            let (Some(id), Some(parent), Some(z), Some(count)) = (varint(p, &mut i), varint(p, &mut i), varint(p, &mut i), varint(p, &mut i)) else {
                return past_end("path node", start, f);
            };
            let (Ok(id), Ok(parent)) = (u32::try_from(id), u32::try_from(parent)) else {
                f(Item::Damage { offset: base + start as u64, what: "a path node's id does not fit 32 bits".into() });
                return None;
            };
            prev = prev.wrapping_add((z >> 1) ^ (z & 1).wrapping_neg());
            f(Item::PathNode { id, parent, addr: prev, count });
        } else if c == 0x0f || c == 0x13 || c == 0x15 || c == 0x17 {
            i += 1;
            let Some(n) = varint(p, &mut i) else {
                return past_end(if c == 0x0f { "paths end" } else { "entries" }, start, f);
            };
            if c == 0x13 {
                f(Item::Entries(n));
            } else if c == 0x15 {
                f(Item::PathsGaveUp(n));
            } else if let Ok(nodes) = u32::try_from(n) {
                f(if c == 0x0f { Item::PathsEnd { nodes } } else { Item::PathsSnapshot { nodes } });
            } else {
                f(Item::Damage { offset: base + start as u64, what: "a paths-end record's node count does not fit 32 bits".into() });
                return None;
            }
        } else if c == 0x11 {
            i += 1;
            let (Some(tid), Some(node)) = (varint(p, &mut i), varint(p, &mut i)) else {
                return past_end("open path", start, f);
            };
            let (Ok(tid), Ok(node)) = (u32::try_from(tid), u32::try_from(node)) else {
                f(Item::Damage { offset: base + start as u64, what: "an open path's thread or node does not fit 32 bits".into() });
                return None;
            };
            f(Item::OpenPath { tid, node });
        } else {
            f(Item::Damage { offset: base + start as u64, what: format!("unknown record tag 0x{c:02x}; the rest of the frame ({} bytes) is skipped", p.len() - start) });
            return None;
        }
    }
    None
}

fn find_magic(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == MAGIC)
}

impl StreamDecoder {
    /// A decoder at the stream's start.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next chunk of the stream.
    pub fn feed(&mut self, data: &[u8], f: &mut impl FnMut(Item)) {
        self.bytes += data.len() as u64;
        if self.pending.is_empty() {
            // no copy for the whole frames of the chunk
            let used = self.decode(data, f);
            self.pending.extend_from_slice(&data[used..]);
            self.offset += used as u64;
        } else {
            self.pending.extend_from_slice(data);
            let buf = std::mem::take(&mut self.pending);
            let used = self.decode(&buf, f);
            self.pending = buf;
            self.pending.drain(..used);
            self.offset += used as u64;
        }
    }

    /// Decodes the whole frames at the start of `b`; returns how many bytes were used.
    fn decode(&mut self, b: &[u8], f: &mut impl FnMut(Item)) -> usize {
        let mut pos = 0usize;
        while b.len() - pos >= HEADER {
            let h = &b[pos..pos + HEADER];
            let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
            if &h[..4] != MAGIC || len == 0 || len > MAX_FRAME - HEADER {
                if !self.in_garbage {
                    let what = if &h[..4] == MAGIC { format!("a frame declares {len} bytes") } else { "bytes that are not a frame".to_string() };
                    f(Item::Damage { offset: self.offset + pos as u64, what: format!("{what}; skipped up to the next frame") });
                    self.in_garbage = true;
                }
                match find_magic(&b[pos + 1..]) {
                    Some(q) => {
                        pos += 1 + q;
                        continue;
                    }
                    None => {
                        // keep the last three bytes: they may begin a magic
                        pos = b.len().saturating_sub(3).max(pos);
                        break;
                    }
                }
            }
            if b.len() - pos - HEADER < len {
                break;
            }
            self.in_garbage = false;
            self.frames += 1;
            decode_payload(&b[pos + HEADER..pos + HEADER + len], self.offset + (pos + HEADER) as u64, false, f);
            pos += HEADER + len;
        }
        pos
    }

    /// The stream ended: decodes what arrived of a last, incomplete frame and reports the cut.
    pub fn finish(&mut self, f: &mut impl FnMut(Item)) {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() {
            return;
        }
        let at = self.offset;
        self.offset += rest.len() as u64;
        if rest.len() >= HEADER && &rest[..4] == MAGIC {
            let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
            let halved = decode_payload(&rest[HEADER..], at + HEADER as u64, true, f);
            let halved = halved.map(|kind| format!(", the last of them part of a {kind} record")).unwrap_or_default();
            f(Item::Damage {
                offset: at,
                what: format!("the stream is cut off: its last frame declares {len} bytes, {} arrived{halved}", rest.len() - HEADER),
            });
        } else if !self.in_garbage {
            f(Item::Damage { offset: at, what: format!("the stream is cut off inside a frame header ({} bytes)", rest.len()) });
        }
    }
}

/// Encodes records the way the tool does (for this module's tests).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct StreamEncoder {
    frame: Vec<u8>,
    prev: u64,
    prev_data: u64,
    pub out: Vec<u8>,
}

#[cfg(test)]
impl StreamEncoder {
    pub fn new() -> Self {
        let mut e = Self::default();
        e.frame.extend_from_slice(&[0; HEADER]);
        e
    }

    fn put(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.frame.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.frame.push(v as u8);
    }

    pub fn superblock(&mut self, addr: u64) {
        let d = addr.wrapping_sub(self.prev) as i64;
        let z = ((d << 1) ^ (d >> 63)) as u64;
        self.prev = addr;
        self.put(z << 1);
        if self.frame.len() > MAX_FRAME - 16 {
            self.flush();
        }
    }

    pub fn module(&mut self, avma: u64, svma: u64, path: &str) {
        if self.frame.len() + 31 + path.len() > MAX_FRAME - 16 {
            self.flush();
        }
        self.frame.push(1);
        self.put(avma);
        self.put(svma);
        self.put(path.len() as u64);
        self.frame.extend_from_slice(path.as_bytes());
    }

    pub fn thread(&mut self, tid: u32) {
        self.frame.push(3);
        self.put(u64::from(tid));
        if self.frame.len() > MAX_FRAME - 16 {
            self.flush();
        }
    }

    pub fn shape(&mut self, addr: u64, lengths: &[u8]) {
        if self.frame.len() + 21 + lengths.len() > MAX_FRAME - 16 {
            self.flush();
        }
        self.frame.push(5);
        self.put(addr);
        self.put(lengths.len() as u64);
        self.frame.extend_from_slice(lengths);
    }

    pub fn exit(&mut self, index: u32, kind: ExitKind) {
        self.frame.push(7);
        let k = match kind {
            ExitKind::Before => 0,
            ExitKind::After => 1,
            ExitKind::RepDone => 2,
        };
        self.put(u64::from(index) << 2 | k);
        if self.frame.len() > MAX_FRAME - 16 {
            self.flush();
        }
    }

    pub fn signal(&mut self, signal: i32, ip: u64) {
        self.frame.push(9);
        self.put(signal as u32 as u64);
        self.put(ip);
        if self.frame.len() > MAX_FRAME - 32 {
            self.flush();
        }
    }

    pub fn access(&mut self, index: u32, write: bool, addr: u64) {
        self.frame.push(0x0b);
        self.put(u64::from(index) << 1 | u64::from(write));
        let d = addr.wrapping_sub(self.prev_data) as i64;
        self.prev_data = addr;
        self.put(((d << 1) ^ (d >> 63)) as u64);
        if self.frame.len() > MAX_FRAME - 32 {
            self.flush();
        }
    }

    /// Paths mode: a node of the tool's path trie.
    pub fn path_node(&mut self, id: u32, parent: u32, addr: u64, count: u64) {
        self.frame.push(0x0d);
        self.put(u64::from(id));
        self.put(u64::from(parent));
        let d = addr.wrapping_sub(self.prev) as i64;
        self.prev = addr;
        self.put(((d << 1) ^ (d >> 63)) as u64);
        self.put(count);
        if self.frame.len() > MAX_FRAME - 48 {
            self.flush();
        }
    }

    /// Paths mode: the trie written is complete.
    pub fn paths_end(&mut self, nodes: u32) {
        self.frame.push(0x0f);
        self.put(u64::from(nodes));
        if self.frame.len() > MAX_FRAME - 16 {
            self.flush();
        }
    }

    /// Paths mode: a thread's path in progress.
    pub fn open_path(&mut self, tid: u32, node: u32) {
        self.frame.push(0x11);
        self.put(u64::from(tid));
        self.put(u64::from(node));
        if self.frame.len() > MAX_FRAME - 32 {
            self.flush();
        }
    }

    /// Paths mode: superblocks entered.
    pub fn entries(&mut self, n: u64) {
        self.frame.push(0x13);
        self.put(n);
        if self.frame.len() > MAX_FRAME - 16 {
            self.flush();
        }
    }

    /// Ends the current frame (as the tool's buffer flush does).
    pub fn flush(&mut self) {
        let len = self.frame.len() - HEADER;
        if len == 0 {
            return;
        }
        self.frame[..4].copy_from_slice(MAGIC);
        self.frame[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        self.out.extend_from_slice(&self.frame);
        self.frame.truncate(HEADER);
        self.prev = 0;
        self.prev_data = 0;
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut d = StreamDecoder::new();
        let mut out = Vec::new();
        let mut f = |i: Item| out.push(format!("{i:?}"));
        for c in chunks {
            d.feed(c, &mut f);
        }
        d.finish(&mut f);
        out
    }

    #[test]
    fn round_trip_in_any_chunking() {
        let mut e = StreamEncoder::new();
        e.module(0x10_9040, 0x1040, "/tmp/prog");
        let addrs: Vec<u64> = (0..100_000u64).map(|i| 0x10_9000 + (i * 7919 % 5000)).chain([0, u64::MAX >> 16, 0x7fff_ffff_f000, 1]).collect();
        for &a in &addrs {
            e.superblock(a);
        }
        let bytes = e.finish();
        assert!(bytes.len() > MAX_FRAME, "several frames");
        let whole = decode_all(&[&bytes]);
        assert_eq!(whole.len(), 1 + addrs.len());
        assert_eq!(whole[0], format!("{:?}", Item::Module { avma: 0x10_9040, svma: 0x1040, path: "/tmp/prog" }));
        let want: Vec<String> = addrs.iter().map(|&a| format!("{:?}", Item::Superblock(a))).collect();
        assert_eq!(&whole[1..], &want[..]);
        for size in [1usize, 3, 7, 8, 9, 4096, 65536] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            assert_eq!(decode_all(&chunks), whole, "chunks of {size}");
        }
    }

    #[test]
    fn thread_records_round_trip_in_any_chunking() {
        let mut e = StreamEncoder::new();
        let mut want = Vec::new();
        e.thread(4242);
        want.push(Item::Thread(4242));
        e.module(0x10_9040, 0x1040, "/tmp/prog");
        want.push(Item::Module { avma: 0x10_9040, svma: 0x1040, path: "/tmp/prog" });
        // switches every few hundred entries, over several frames; ids up to u32::MAX
        for i in 0..120_000u64 {
            if i % 337 == 0 {
                let tid = [4242, 4243, 4244, u32::MAX, 0][(i / 337 % 5) as usize];
                e.thread(tid);
                want.push(Item::Thread(tid));
            }
            let a = 0x10_9000 + (i * 7919 % 5000);
            e.superblock(a);
            want.push(Item::Superblock(a));
        }
        let bytes = e.finish();
        assert!(bytes.len() > 2 * MAX_FRAME, "several frames");
        let want: Vec<String> = want.iter().map(|i| format!("{i:?}")).collect();
        for size in [1usize, 2, 5, 8, 4096, bytes.len()] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            assert_eq!(decode_all(&chunks), want, "chunks of {size}");
        }
    }

    #[test]
    fn exact_mode_records_round_trip_in_any_chunking() {
        let mut e = StreamEncoder::new();
        let mut want = Vec::new();
        for i in 0..150_000u64 {
            let a = 0x40_1000 + (i % 97) * 16;
            if i % 97 == i / 97 % 97 {
                let lengths: Vec<u8> = (0..(i % 50 + 1)).map(|j| (j % 15 + 1) as u8).collect();
                e.shape(a, &lengths);
                want.push(format!("{:?}", Item::Shape { addr: a, lengths: &lengths }));
            }
            e.superblock(a);
            want.push(format!("{:?}", Item::Superblock(a)));
            if i % 11 == 0 {
                let kind = [ExitKind::Before, ExitKind::After, ExitKind::RepDone][(i % 3) as usize];
                e.exit((i % 40) as u32, kind);
                want.push(format!("{:?}", Item::Exit { index: (i % 40) as u32, kind }));
            }
            if i % 1000 == 0 {
                e.signal(11, a + 3);
                want.push(format!("{:?}", Item::Signal { signal: 11, ip: a + 3 }));
            }
            if i % 3 == 0 {
                let d = [0x7fff_ffff_e000, 0x55_0000_1000, 8, u64::MAX][(i % 4) as usize].wrapping_add(i);
                e.access((i % 7) as u32, i % 2 == 0, d);
                want.push(format!("{:?}", Item::Access { index: (i % 7) as u32, write: i % 2 == 0, addr: d }));
            }
        }
        let bytes = e.finish();
        assert!(bytes.len() > 2 * MAX_FRAME, "several frames");
        for size in [1usize, 3, 8, 4096, bytes.len()] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            assert_eq!(decode_all(&chunks), want, "chunks of {size}");
        }
        // a shape that is not one: no instructions, or an instruction of 16 bytes
        for lengths in [&[][..], &[3, 16][..]] {
            let mut e = StreamEncoder::new();
            e.shape(0x40_1000, lengths);
            let out = decode_all(&[&e.finish()]);
            assert!(out.len() == 1 && out[0].contains("is not a superblock"), "{out:?}");
        }
    }

    #[test]
    fn paths_mode_records_round_trip_in_any_chunking() {
        let mut e = StreamEncoder::new();
        let mut want = Vec::new();
        e.thread(77);
        want.push(format!("{:?}", Item::Thread(77)));
        for i in 0..20_000u32 {
            if i % 5000 == 4999 {
                e.entries(u64::from(i) << 20);
                want.push(format!("{:?}", Item::Entries(u64::from(i) << 20)));
            }
            let addr = [0x40_1000u64, 0x7f00_0000_1000, 1, u64::MAX][(i % 4) as usize].wrapping_add(u64::from(i % 7));
            let count = [0, 1, u64::MAX][(i % 3) as usize];
            e.path_node(i + 1, i / 2, addr, count);
            want.push(format!("{:?}", Item::PathNode { id: i + 1, parent: i / 2, addr, count }));
        }
        e.open_path(u32::MAX, 19_999);
        want.push(format!("{:?}", Item::OpenPath { tid: u32::MAX, node: 19_999 }));
        e.paths_end(20_000);
        want.push(format!("{:?}", Item::PathsEnd { nodes: 20_000 }));
        let bytes = e.finish();
        assert!(bytes.len() > 2 * MAX_FRAME, "several frames");
        for size in [1usize, 3, 8, 4096, bytes.len()] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            assert_eq!(decode_all(&chunks), want, "chunks of {size}");
        }
        // ids beyond 32 bits are damage, not a node
        let mut frame = b"KSB1\x0c\0\0\0".to_vec();
        frame.extend_from_slice(&[0x0d, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00, 0x02, 0x01, 0x0f, 0x00, 0x13]);
        let out = decode_all(&[&frame]);
        assert!(out.len() == 1 && out[0].contains("does not fit 32 bits"), "{out:?}");
    }

    #[test]
    fn cut_thread_record() {
        // superblock, thread 300 (0x03 0xac 0x02), superblock; cut after each byte of the
        // thread record: the complete records before it come out, then the one damage, the
        // cut, which names the record it halved.
        let mut e = StreamEncoder::new();
        e.superblock(0x40_1000);
        e.thread(300);
        e.superblock(0x40_1010);
        let bytes = e.finish();
        let payload = &bytes[HEADER..];
        let at = payload.iter().position(|&b| b == 0x03).unwrap();
        assert_eq!(&payload[at..at + 3], &[0x03, 0xac, 0x02]);
        let sb = format!("{:?}", Item::Superblock(0x40_1000));
        for cut in [HEADER + at + 1, HEADER + at + 2] {
            let out = decode_all(&[&bytes[..cut]]);
            assert_eq!(out.len(), 2, "{out:?}");
            assert_eq!(out[0], sb);
            assert!(out[1].contains("cut off") && out[1].contains("part of a thread record"), "{out:?}");
        }
        let out = decode_all(&[&bytes[..HEADER + at + 3]]);
        assert_eq!(out[..2], [sb, format!("{:?}", Item::Thread(300))]);
        assert!(out[2].contains("cut off"), "{out:?}");
        // a thread id beyond 32 bits is damage, not a silently truncated id
        let mut bad = bytes[..HEADER].to_vec();
        bad.extend_from_slice(&[0x03, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00]);
        bad[4..8].copy_from_slice(&7u32.to_le_bytes());
        let out = decode_all(&[&bad]);
        assert_eq!(out.len(), 1);
        assert!(out[0].contains("does not fit 32 bits"), "{out:?}");
    }

    #[test]
    fn a_cut_anywhere_is_one_damage_and_a_short_frame_still_is_damage() {
        // wide deltas make multi-byte superblock records, so cuts fall inside records too
        let mut e = StreamEncoder::new();
        let mut want = Vec::new();
        for i in 0..40u64 {
            let a = 0x40_0000 + i * 0x1_2345;
            e.superblock(a);
            want.push(format!("{:?}", Item::Superblock(a)));
        }
        e.module(0x40_0000, 0x1000, "/bin/x");
        let bytes = e.finish();
        for cut in HEADER + 1..bytes.len() {
            let out = decode_all(&[&bytes[..cut]]);
            let damage: Vec<_> = out.iter().filter(|o| o.starts_with("Damage")).collect();
            assert_eq!(damage.len(), 1, "cut at {cut}: {out:?}");
            assert!(damage[0].contains("cut off") && out.last() == Some(damage[0]), "cut at {cut}: {out:?}");
            let complete = out.len() - 1;
            assert_eq!(out[..complete.min(want.len())], want[..complete.min(want.len())], "cut at {cut}");
        }
        // the same bytes as a whole frame that declares them all: a record past the end
        // of a frame that did arrive complete is damage of its own
        let mut short = bytes[..HEADER + 2].to_vec();
        short[4..8].copy_from_slice(&2u32.to_le_bytes());
        let out = decode_all(&[&short]);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("superblock record runs past the end of its frame"), "{out:?}");
    }
}
