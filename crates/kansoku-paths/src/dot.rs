//! The CFG picture: one function's basic blocks with their execution counts, edges with
//! their transition counts, and the hottest paths drawn over them, as Graphviz DOT.

use std::collections::HashMap;
use std::fmt::Write;

use crate::analysis::PathAnalysis;
use crate::code::BlockId;

/// Colours of the hottest paths, hottest first.
const PATH_COLOURS: &[&str] = &["#d62728", "#ff7f0e", "#2ca02c", "#9467bd"];

/// Why a function's CFG picture cannot be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CfgError {
    /// The program has the function but it did not run in the observed part (`hint` lists similar names that ran).
    #[error("function '{name}' did not run in the observed part of the program{hint}")]
    NotExecuted {
        /// The function asked for.
        name: String,
        /// ` (similar functions that ran: …)`, or empty.
        hint: String,
    },
    /// The program (as it was read) has no function of that name.
    #[error(transparent)]
    NoSuchFunction(#[from] kansoku_binary::BinaryError),
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

impl PathAnalysis {
    /// Is `name` a function that ran? If not, says whether the program has no such
    /// function at all (a typo: with similar names) or has it but did not run it.
    pub fn check_function(&self, name: &str) -> Result<(), CfgError> {
        if self.code.functions().iter().any(|f| f.name == name) {
            return Ok(());
        }
        if let Some(path) = self.code.program_path() {
            // A program that cannot be read (gone since the recording) only loses the
            // distinction: the name is then reported as not run.
            if let Ok(program) = kansoku_binary::Program::open(std::path::Path::new(path)) {
                program.function_named(name)?;
            }
        }
        Err(CfgError::NotExecuted { name: name.to_string(), hint: String::new() })
    }

    /// DOT text of `function`'s CFG with counts and its `hot` hottest paths highlighted.
    pub fn cfg_dot(&mut self, function: &str, hot: usize) -> Result<String, CfgError> {
        let Some(f) = self.code.functions().iter().position(|fi| fi.name == function) else {
            let mut names: Vec<&str> = self.code.functions().iter().map(|f| f.name.as_str()).filter(|n| n.contains(function) || function.contains(n)).collect();
            names.truncate(5);
            let hint = if names.is_empty() { String::new() } else { format!(" (similar functions that ran: {})", names.join(", ")) };
            return Err(CfgError::NotExecuted { name: function.to_string(), hint });
        };
        let fi = self.code.functions()[f].clone();
        let cfg = fi.cfg.clone();
        // counts per CFG block (whole-block entries only)
        let mut counts = vec![0u64; cfg.blocks.len()];
        let mut id_of: HashMap<u32, BlockId> = HashMap::new();
        for (b, info) in self.code.blocks().iter().enumerate() {
            if info.function == Some(f as u32) {
                if let Some(cb) = info.cfg_block {
                    counts[cb as usize] += self.profiler.block_counts.get(b).copied().unwrap_or(0);
                    if info.offset == 0 {
                        id_of.insert(cb, b as BlockId);
                    }
                }
            }
        }
        let max = counts.iter().copied().max().unwrap_or(0).max(1);
        // hottest paths lying in this function
        let mut hot_paths: Vec<(u64, Vec<u32>)> = Vec::new();
        for (path, count) in self.profiler.paths.iter() {
            let mut cbs = Vec::new();
            let mut inside = true;
            for &b in path {
                let info = self.code.block(b);
                if info.function != Some(f as u32) || info.cfg_block.is_none() {
                    inside = false;
                    break;
                }
                cbs.push(info.cfg_block.unwrap());
            }
            if inside {
                hot_paths.push((count, cbs));
            }
        }
        // stable: equal counts keep first-seen order, as in the report
        hot_paths.sort_by_key(|p| std::cmp::Reverse(p.0));
        hot_paths.truncate(hot.min(PATH_COLOURS.len()));

        let mut dot = String::new();
        let _ = writeln!(dot, "digraph \"{}\" {{", escape(function));
        let _ = writeln!(dot, "  graph [fontname=\"Helvetica\", label=\"{} — block counts; hottest paths in colour; dashed: the back edges that cut paths ({:?} rule)\", labelloc=t];", escape(function), self.profiler.back_edges);
        let _ = writeln!(dot, "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];");
        let _ = writeln!(dot, "  edge [fontname=\"Helvetica\", fontsize=10];");
        for (i, b) in cfg.blocks.iter().enumerate() {
            let heat = counts[i] as f64 / max as f64;
            let g = (255.0 - heat * 155.0) as u8;
            let line = id_of
                .get(&(i as u32))
                .and_then(|&id| {
                    let addr = self.code.block(id).addr;
                    self.code.symbolizer.source_line(addr)
                })
                .map(|l| format!("\\n{l}"))
                .unwrap_or_default();
            let _ = writeln!(
                dot,
                "  bb{i} [label=\"BB{i}  0x{:x}{line}\\n{} instr, {} ends\\nexecuted {}\", fillcolor=\"#ff{g:02x}{g:02x}\"];",
                b.start,
                b.instruction_count,
                b.terminator.class(),
                counts[i]
            );
        }
        let mut edge_counts: HashMap<(u32, u32), u64> = HashMap::new();
        if let Some(edges) = &self.profiler.edges {
            for (&(a, b), &c) in edges {
                let (ia, ib) = (self.code.block(a), self.code.block(b));
                if ia.function == Some(f as u32) && ib.function == Some(f as u32) {
                    if let (Some(x), Some(y)) = (ia.cfg_block, ib.cfg_block) {
                        *edge_counts.entry((x, y)).or_insert(0) += c;
                    }
                }
            }
        }
        for (i, b) in cfg.blocks.iter().enumerate() {
            let mut succ = b.successors.clone();
            succ.sort_unstable();
            succ.dedup();
            for s in succ {
                let c = edge_counts.get(&(i as u32, s)).copied().unwrap_or(0);
                // Dashed: exactly the edges this run's --back-edges mode cuts paths at.
                let back = crate::ballarus::is_back_edge(&cfg, i as u32, s, self.profiler.back_edges);
                let style = if back { ", style=dashed" } else { "" };
                let _ = writeln!(dot, "  bb{i} -> bb{s} [label=\"{c}\", color=\"#999999\"{style}];");
            }
        }
        for (k, (count, cbs)) in hot_paths.iter().enumerate() {
            let colour = PATH_COLOURS[k];
            for w in cbs.windows(2) {
                let _ = writeln!(dot, "  bb{} -> bb{} [color=\"{colour}\", penwidth=3, constraint=false];", w[0], w[1]);
            }
            let first = cbs[0];
            let _ = writeln!(dot, "  p{k} [shape=plaintext, style=\"\", fontcolor=\"{colour}\", label=\"path #{} ×{count}\"];", k + 1);
            let _ = writeln!(dot, "  p{k} -> bb{first} [color=\"{colour}\", penwidth=3, arrowhead=none, style=dotted];");
        }
        dot.push_str("}\n");
        Ok(dot)
    }
}
