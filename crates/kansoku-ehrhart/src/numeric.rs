//! Counting a polytope without parameters (every size fixed: a PolyBench file at its
//! preset) by partial enumeration: every variable but one is enumerated inside the bounds
//! that Fourier–Motzkin elimination gives it, and the innermost one is counted in O(1).
//!
//! Why: at a point, the summation over chambers meets floor terms with large denominators
//! (a line of 64 bytes in 220-element rows gives bands such as `6600·a − 14080·b ∈
//! [11028, 11247]`) and splits into thousands of residue classes per variable; gemm at
//! MEDIUM on a 32 KiB 8-way L1 spent 20 s on one lifted piece of four free variables whose
//! enumeration is 585,000 steps. Enumeration gives up past [`MAX_STEPS`] outer steps or
//! when an elimination grows past [`MAX_ROWS`] rows; isl's scanner counts those polytopes
//! instead ([`count_by_isl`]), for a while, then the symbolic counter. The rational projections contain the integer ones, so a
//! branch may come out empty, never miss a point.

use crate::EhrhartError;
use std::time::Instant;

/// Enumeration steps (outer-variable values) tried at most before isl's scanner is asked.
pub const MAX_STEPS: u64 = 20_000_000;
/// Rows one Fourier–Motzkin elimination may produce before the method gives up.
const MAX_ROWS: usize = 4_000;

/// Inequalities `row[..n]·x + row[n] >= 0`.
type Row = Vec<i128>;

/// The number of integer points of `{ x : rows·(x, 1) >= 0 }` over the variables `vars`
/// (indices into the rows; other columns are zero). `Ok(None)`: the enumeration took too
/// many steps or an elimination too many rows (or a variable is unbounded): count another
/// way.
pub fn count(rows: &[Vec<i64>], vars: &[usize], deadline: Option<Instant>) -> Result<Option<u128>, EhrhartError> {
    let w = rows.first().map_or(0, |r| r.len() - 1);
    // Compact rows over the live variables only: [x_0 .. x_{n-1}, constant].
    let rows: Vec<Row> = rows.iter().map(|r| vars.iter().map(|&v| r[v] as i128).chain([r[w] as i128]).collect()).collect();
    let n = vars.len();
    if n == 0 {
        return Ok(Some(u128::from(rows.iter().all(|r| r[0] >= 0))));
    }
    let Some(order) = order(&rows, n)? else { return Ok(None) };
    // systems[j]: the rows over order[0..=j] (the rest eliminated).
    let mut systems = vec![Vec::new(); n];
    let mut current = rows;
    for j in (0..n).rev() {
        systems[j] = current.iter().filter(|r| r[order[j]] != 0).cloned().collect();
        let Some(next) = eliminate(&current, order[j]) else { return Ok(None) };
        current = next;
    }
    // What is left involves no variable: a negative constant means no point at all.
    if current.iter().any(|r| r[n] < 0) {
        return Ok(Some(0));
    }
    let mut e = Enumeration { order, systems, values: vec![0; n], steps: 0, deadline };
    e.level(0)
}

/// Seconds isl's scanner gets before the symbolic counter is asked instead.
const ISL_SCAN_SECONDS: u64 = 2;

/// The same count by isl's scanner (`isl_set_count_val`: exact integer projections by
/// linear programming at each level, one step per point): it does not blow up where
/// Fourier–Motzkin does (gemm MEDIUM: one piece's elimination grew 12 → 17 → 38 → 108 →
/// 1,393 rows; isl counted its 258,852 points), but its time grows with the points, so it
/// gets [`ISL_SCAN_SECONDS`]; `Ok(None)` past them (the symbolic counter's polynomial sums
/// do not care how many points there are).
pub fn count_by_isl(rows: &[Vec<i64>], vars: &[usize], deadline: Option<Instant>) -> Result<Option<u128>, EhrhartError> {
    let w = rows.first().map_or(0, |r| r.len() - 1);
    let cons: Vec<String> = rows.iter().map(|r| {
        let mut t = r[w].to_string();
        for (i, &v) in vars.iter().enumerate() {
            if r[v] != 0 {
                t += &format!(" + {}*x{i}", r[v]);
            }
        }
        t + " >= 0"
    }).collect();
    let names: Vec<String> = (0..vars.len()).map(|i| format!("x{i}")).collect();
    let text = format!("{{ [{}] : {} }}", names.join(","), if cons.is_empty() { "true".into() } else { cons.join(" and ") });
    let ctx = kansoku_isl::Ctx::new();
    let slot = Instant::now() + std::time::Duration::from_secs(ISL_SCAN_SECONDS);
    let n = ctx.with_deadline(Some(deadline.map_or(slot, |d| d.min(slot))), || ctx.set(&text).and_then(|s| s.set_count()));
    if ctx.aborted() {
        return match deadline {
            Some(d) if Instant::now() > d => Err(EhrhartError::OutOfTime(crate::CountStop::IslScan)),
            _ => Ok(None),
        };
    }
    let n = n.map_err(|e| EhrhartError::Isl(e.to_string()))?;
    u128::try_from(n).map(Some).map_err(|_| EhrhartError::Isl(format!("isl counted {n} points")))
}

struct Enumeration {
    order: Vec<usize>,
    systems: Vec<Vec<Row>>,
    values: Vec<i128>,
    steps: u64,
    deadline: Option<Instant>,
}

impl Enumeration {
    /// Points with the variables before level `j` at their values.
    fn level(&mut self, j: usize) -> Result<Option<u128>, EhrhartError> {
        let v = self.order[j];
        let (mut lo, mut hi) = (i128::MIN, i128::MAX);
        for r in &self.systems[j] {
            // r[v]·x + rest >= 0, rest from the values of the enclosing levels.
            let rest: i128 = self.order[..j].iter().map(|&u| r[u] * self.values[u]).sum::<i128>() + r[r.len() - 1];
            if r[v] > 0 {
                lo = lo.max(div_ceil(-rest, r[v]));
            } else {
                hi = hi.min(div_floor(rest, -r[v]));
            }
        }
        if lo > hi {
            return Ok(Some(0));
        }
        if j + 1 == self.order.len() {
            return Ok(Some((hi - lo + 1) as u128));
        }
        let mut total = 0u128;
        for x in lo..=hi {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Ok(None);
            }
            if self.steps & 0xffff == 0 && self.deadline.is_some_and(|d| Instant::now() > d) {
                return Err(EhrhartError::OutOfTime(crate::CountStop::Enumeration { steps: self.steps }));
            }
            self.values[v] = x;
            let Some(n) = self.level(j + 1)? else { return Ok(None) };
            total += n;
        }
        Ok(Some(total))
    }
}

/// The enumeration order: the variable with the widest range innermost (counted in
/// O(1)), the others outside, narrowest first. `None` when an elimination passes the row
/// limit; an error when a variable has no bound (as the symbolic counter says).
fn order(rows: &[Row], n: usize) -> Result<Option<Vec<usize>>, EhrhartError> {
    let mut ranges = Vec::new();
    for v in 0..n {
        let Some((lo, hi, _)) = shadow(rows, v, n) else { return Ok(None) };
        if lo == i128::MIN || hi == i128::MAX {
            return Err(EhrhartError::Unbounded);
        }
        ranges.push(((hi - lo + 1).max(0) as u128, v));
    }
    ranges.sort();
    Ok(Some(ranges.iter().map(|(_, v)| *v).collect()))
}

/// The smallest and largest value of column `v` over `{ x : rows·(x, 1) >= 0 }` (rows
/// over `n` columns, every column a variable), by eliminating the others: a rational
/// shadow, so it contains every integer value. `None` when unbounded, empty, or an
/// elimination passes the row limit.
pub(crate) fn constant_range(rows: &[Vec<i64>], v: usize, n: usize) -> Option<(i128, i128)> {
    let rows: Vec<Row> = rows.iter().map(|r| r.iter().map(|&c| c as i128).collect()).collect();
    let (lo, hi, infeasible) = shadow(&rows, v, n)?;
    (!infeasible && lo != i128::MIN && hi != i128::MAX && lo <= hi).then_some((lo, hi))
}

/// Column `v`'s bounds once every other column is eliminated: `(lo, hi, infeasible)`,
/// `i128::MIN`/`MAX` where there is none, `infeasible` when a row left without `v` fails;
/// `None` when an elimination passes the row limit.
fn shadow(rows: &[Row], v: usize, n: usize) -> Option<(i128, i128, bool)> {
    let mut s = rows.to_vec();
    let mut others: Vec<usize> = (0..n).filter(|&u| u != v).collect();
    // The column with the fewest pairs first: in index order, correlation 8-way's P29
    // (extents 16) had a piece whose eliminations passed the row limit for every variable;
    // so (a scratch script of the same steps), its largest step paired 308 rows.
    while let Some(i) = (0..others.len()).min_by_key(|&i| pairs(&s, others[i])) {
        s = eliminate(&s, others.swap_remove(i))?;
    }
    let (mut lo, mut hi, mut infeasible) = (i128::MIN, i128::MAX, false);
    for r in &s {
        if r[v] > 0 {
            lo = lo.max(div_ceil(-r[n], r[v]));
        } else if r[v] < 0 {
            hi = hi.min(div_floor(r[n], -r[v]));
        } else {
            infeasible |= r[n] < 0;
        }
    }
    Some((lo, hi, infeasible))
}

/// The pairs of a lower and an upper bound on column `v` in `rows`: the rows its
/// elimination makes.
fn pairs(rows: &[Row], v: usize) -> usize {
    let lower = rows.iter().filter(|r| r[v] > 0).count();
    lower * rows.iter().filter(|r| r[v] < 0).count()
}

/// Fourier–Motzkin: the rows implied for the other variables once `v` is eliminated
/// (every pair of a lower and an upper bound), divided by their gcd, and of rows alike
/// but for the constant only the tightest (it implies the others: the same points, and
/// fewer pairs at the next elimination).
fn eliminate(rows: &[Row], v: usize) -> Option<Vec<Row>> {
    let (lower, upper): (Vec<&Row>, Vec<&Row>) = rows.iter().filter(|r| r[v] != 0).partition(|r| r[v] > 0);
    if lower.len() * upper.len() > MAX_ROWS {
        return None;
    }
    let n = rows.first().map_or(0, |r| r.len() - 1);
    let mut out: Vec<Row> = Vec::new();
    let mut seen: std::collections::HashMap<Vec<i128>, usize> = std::collections::HashMap::new();
    let mut push = |r: Row| {
        let Some(r) = normalized(r) else { return };
        match seen.entry(r[..n].to_vec()) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let kept = &mut out[*e.get()];
                kept[n] = kept[n].min(r[n]);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(out.len());
                out.push(r);
            }
        }
    };
    for r in rows.iter().filter(|r| r[v] == 0) {
        push(r.clone());
    }
    for l in &lower {
        for u in &upper {
            let (a, b) = (l[v], -u[v]);
            let combined: Option<Row> = l.iter().zip(u.iter()).map(|(x, y)| x.checked_mul(b)?.checked_add(y.checked_mul(a)?)).collect();
            push(combined?);
        }
    }
    (out.len() <= MAX_ROWS).then_some(out)
}

/// The row divided by the gcd of its variable coefficients (the constant rounded down:
/// the same integer points); a row of zeros over the variables is kept as it is.
fn normalized(mut r: Row) -> Option<Row> {
    let n = r.len() - 1;
    let g = r[..n].iter().fold(0i128, |g, c| crate::qpoly::gcd128(g, *c));
    if g > 1 {
        for c in r[..n].iter_mut() {
            *c /= g;
        }
        r[n] = r[n].div_euclid(g);
    }
    if g == 0 && r[n] >= 0 {
        return None; // always true
    }
    Some(r)
}

fn div_floor(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -(-a).div_euclid(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{box_rows, random};

    /// Every count against brute force over a box: random small polytopes in 3 variables.
    #[test]
    fn equals_brute_force() {
        let mut rnd = random(12345);
        for _ in 0..300 {
            // A box 0..=9 per variable, plus three random constraints.
            let mut rows = box_rows(3, 4, 9);
            for _ in 0..3 {
                rows.push(vec![rnd(13), rnd(13), rnd(13), rnd(40)]);
            }
            let brute = (0..1000).filter(|i| {
                let x = [i % 10, i / 10 % 10, i / 100];
                rows.iter().all(|r| r[0] * x[0] + r[1] * x[1] + r[2] * x[2] + r[3] >= 0)
            });
            let brute = brute.count() as u128;
            assert_eq!(count(&rows, &[0, 1, 2], None).unwrap(), Some(brute), "{rows:?}");
            assert_eq!(count_by_isl(&rows, &[0, 1, 2], None).unwrap(), Some(brute), "{rows:?}");
        }
    }

    #[test]
    fn unbounded_is_an_error_and_too_large_is_left_to_the_symbolic_counter() {
        // x >= 0 only: unbounded, an error as from the symbolic counter.
        assert!(matches!(count(&[vec![1, 0]], &[0], None), Err(EhrhartError::Unbounded)));
        // Three variables of 10^6 values each: 10^12 outer steps, 10^18 points.
        let huge = box_rows(3, 4, 999_999);
        assert_eq!(count(&huge, &[0, 1, 2], None).unwrap(), None);
        assert_eq!(count_by_isl(&huge, &[0, 1, 2], None).unwrap(), None);
    }
}
