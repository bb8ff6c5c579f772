//! Issue 46: kansoku's misses against the real program's. Five of kansoku's own
//! PolyBench-style kernels (polybench/*.c, as they are) are compiled with a driver of ours —
//! the arrays page-aligned as PolyBench's posix_memalign(…, 4096) places them, an
//! `init_array` in PolyBench's style, the kernel, and between them, for a cold start, a
//! flush of the cache — and run under `valgrind --tool=callgrind --cache-sim=yes
//! --D1=32768,8,64`: the D1 misses (reads and writes) of the kernel function must equal
//! kansoku's at MINI, cold (the default) and warm (`init_array` first, `Program::warmed_by`).
//!
//! Flags: `-O2 -fno-inline`. `-fno-inline` keeps `kernel_*` a function of its own (gcc
//! would inline a static function called once into `main`, and callgrind would charge its
//! accesses there); `-O2` keeps the scalars (alpha, loop counters, temporaries) in
//! registers, as kansoku assumes: at -O0 every scalar is a stack access. -O2 may vectorise
//! and keep a reused element in a register, which changes how many accesses there are but
//! not the order in which lines are first touched and evicted, so the misses are compared
//! (kansoku's access counts are the C source's). The arrays are globals aligned to 4096,
//! not malloc'd: glibc's posix_memalign writes the header of the chunk after a small
//! array into the array's last line, which warms that line in the real program
//! (docs/BENCHMARKS.md, issue 46).

use kansoku_cache::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The macros of PolyBench's polybench.h the kernels use, written for this driver.
const POLYBENCH_H: &str = "#define DATA_TYPE double
#define POLYBENCH_1D(v, d1, dd1) v[d1]
#define POLYBENCH_2D(v, d1, d2, dd1, dd2) v[d1][d2]
#define SCALAR_VAL(x) x
#define _PB_NI NI
#define _PB_NJ NJ
#define _PB_NK NK
#define _PB_M M
#define _PB_N N
#define _PB_TSTEPS TSTEPS
";

/// Evicts every line of the arrays from a 32 KiB D1: 512 KiB read once (PolyBench's flush
/// reads 32 MiB); not `static`, or gcc reads the never-written zeros as constants. The five
/// kernels have no floating-point literal other than 0 (and alpha and beta come from main
/// at run time): a literal (jacobi-2d's 0.2) is loaded from .rodata, one line more that
/// misses from cold in the real program, which kansoku does not model (docs/BENCHMARKS.md
/// counts it in the PolyBench table).
const FLUSH: &str = "double flush_area[65536];
static void flush(void) { volatile double s = 0; int i; for (i = 0; i < 65536; i += 8) s += flush_area[i]; }
";

/// Per kernel: the arrays (globals, page-aligned), init_array, and the calls in main.
fn driver(kernel: &str) -> String {
    let (arrays, init, call) = match kernel {
        "gemm" => (
            "C[NI][NJ], A[NI][NK], B[NK][NJ]",
            "static void init_array(int ni, int nj, int nk, DATA_TYPE POLYBENCH_2D(C,NI,NJ,ni,nj), DATA_TYPE POLYBENCH_2D(A,NI,NK,ni,nk), DATA_TYPE POLYBENCH_2D(B,NK,NJ,nk,nj))
{
  int i, j;
  for (i = 0; i < ni; i++)
    for (j = 0; j < nj; j++)
      C[i][j] = (DATA_TYPE) ((i*j+1) % ni) / ni;
  for (i = 0; i < ni; i++)
    for (j = 0; j < nk; j++)
      A[i][j] = (DATA_TYPE) (i*(j+1) % nk) / nk;
  for (i = 0; i < nk; i++)
    for (j = 0; j < nj; j++)
      B[i][j] = (DATA_TYPE) (i*(j+2) % nj) / nj;
}",
            "init_array(NI, NJ, NK, C, A, B); FLUSH; kernel_gemm(NI, NJ, NK, alpha, beta, C, A, B); return C[1][1] > 1e300;",
        ),
        "atax" => (
            "A[M][N], x[N], y[N], tmp[M]",
            "static void init_array(int m, int n, DATA_TYPE POLYBENCH_2D(A,M,N,m,n), DATA_TYPE POLYBENCH_1D(x,N,n))
{
  int i, j;
  for (i = 0; i < n; i++)
    x[i] = 1 + (i / (DATA_TYPE) n);
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++)
      A[i][j] = (DATA_TYPE) ((i+j) % n) / (5*m);
}",
            "init_array(M, N, A, x); FLUSH; kernel_atax(M, N, A, x, y, tmp); return y[1] > 1e300;",
        ),
        "mvt" => (
            "x1[N], x2[N], y_1[N], y_2[N], A[N][N]",
            "static void init_array(int n, DATA_TYPE POLYBENCH_1D(x1,N,n), DATA_TYPE POLYBENCH_1D(x2,N,n), DATA_TYPE POLYBENCH_1D(y_1,N,n), DATA_TYPE POLYBENCH_1D(y_2,N,n), DATA_TYPE POLYBENCH_2D(A,N,N,n,n))
{
  int i, j;
  for (i = 0; i < n; i++) {
    x1[i] = (DATA_TYPE) (i % n) / n;
    x2[i] = (DATA_TYPE) ((i + 1) % n) / n;
    y_1[i] = (DATA_TYPE) ((i + 3) % n) / n;
    y_2[i] = (DATA_TYPE) ((i + 4) % n) / n;
    for (j = 0; j < n; j++)
      A[i][j] = (DATA_TYPE) (i*j % n) / n;
  }
}",
            "init_array(N, x1, x2, y_1, y_2, A); FLUSH; kernel_mvt(N, x1, x2, y_1, y_2, A); return x1[1] > 1e300;",
        ),
        "gesummv" => (
            "A[N][N], B[N][N], tmp[N], x[N], y[N]",
            "static void init_array(int n, DATA_TYPE POLYBENCH_2D(A,N,N,n,n), DATA_TYPE POLYBENCH_2D(B,N,N,n,n), DATA_TYPE POLYBENCH_1D(x,N,n))
{
  int i, j;
  for (i = 0; i < n; i++) {
    x[i] = (DATA_TYPE)( i % n) / n;
    for (j = 0; j < n; j++) {
      A[i][j] = (DATA_TYPE) ((i*j+1) % n) / n;
      B[i][j] = (DATA_TYPE) ((i*j+2) % n) / n;
    }
  }
}",
            "init_array(N, A, B, x); FLUSH; kernel_gesummv(N, alpha, beta, A, B, tmp, x, y); return y[1] > 1e300;",
        ),
        "trisolv" => (
            "L[N][N], x[N], b[N]",
            "static void init_array(int n, DATA_TYPE POLYBENCH_2D(L,N,N,n,n), DATA_TYPE POLYBENCH_1D(x,N,n), DATA_TYPE POLYBENCH_1D(b,N,n))
{
  int i, j;
  for (i = 0; i < n; i++) {
    x[i] = - 999;
    b[i] = i;
    for (j = 0; j <= i; j++)
      L[i][j] = (DATA_TYPE) (i+n-j+1)*2/n;
  }
}",
            "init_array(N, L, x, b); FLUSH; kernel_trisolv(N, L, x, b); return x[1] > 1e300;",
        ),
        other => panic!("no driver for {other}"),
    };
    let globals: String = arrays.split(", ").map(|a| format!("static DATA_TYPE {a} __attribute__((aligned(4096)));\n")).collect();
    let call = call.replace("FLUSH;", "if (argc > 1) flush();");
    // alpha and beta from main's stack, not constants the kernel loads from .rodata
    format!("\n/* the test's driver (tests/callgrind.rs) */\n{globals}{FLUSH}{init}\nint main(int argc, char **argv) {{ volatile DATA_TYPE va = 1.5, vb = 1.2; DATA_TYPE alpha = va, beta = vb; (void) argv; (void) alpha; (void) beta; {call} }}\n")
}

/// Whether `tool` runs (callgrind_annotate answers `--version` with status 255).
fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| !o.stdout.is_empty() || !o.stderr.is_empty() || o.status.success())
}

/// D1 misses (reads + writes) of the function whose name starts with `kernel_`.
fn callgrind_kernel_misses(exe: &Path, args: &[&str]) -> u64 {
    let out = exe.with_extension(format!("{}.cg", args.len()));
    let run = Command::new("valgrind")
        .args(["--tool=callgrind", "--cache-sim=yes", "--D1=32768,8,64"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    assert!(run.status.code().is_some(), "valgrind: {}", String::from_utf8_lossy(&run.stderr));
    let ann = Command::new("callgrind_annotate").args(["--threshold=100", "--show=D1mr,D1mw"]).arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&ann.stdout);
    let line = text.lines().find(|l| l.contains(":kernel_")).unwrap_or_else(|| panic!("no kernel_ function in callgrind's profile:\n{text}"));
    // "   232 ( 0.04%)   0      ???:kernel_gemm.constprop.0 [...]": the first two numbers
    let mut nums = Vec::new();
    let mut in_percent = false;
    for word in line.split_whitespace() {
        if word.starts_with('(') {
            in_percent = !word.ends_with(')');
            continue;
        }
        if in_percent {
            in_percent = !word.ends_with(')');
            continue;
        }
        match word.replace(',', "").parse::<u64>() {
            Ok(n) => nums.push(n),
            Err(_) => break,
        }
    }
    assert_eq!(nums.len(), 2, "cannot read D1mr and D1mw in: {line}");
    nums.iter().sum()
}

#[test]
fn five_kernels_miss_as_callgrind_says_cold_and_warm() {
    for tool in ["gcc", "valgrind", "callgrind_annotate"] {
        if !have(tool) {
            kansoku_examples::skip(kansoku_examples::Missing::Installed { package: "gcc and valgrind" }, format!("{tool} is missing"));
            return;
        }
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("polybench");
    // The programs are built by the shared builder (once per source and flags) in a
    // directory of their own, the headers they include beside them.
    let dir = kansoku_examples::test_build_dir().join("callgrind");
    std::fs::create_dir_all(&dir).unwrap();
    let headers = [("polybench.h", POLYBENCH_H.to_string()), ("sizes.h", std::fs::read_to_string(here.join("sizes.h")).unwrap())];
    for (name, text) in headers {
        if std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let l1 = CacheConfig::parse("32KiB,8-way,64B").unwrap();
    let results: Vec<(String, [(u64, u64); 2])> = std::thread::scope(|s| {
        let handles: Vec<_> = ["gemm", "atax", "mvt", "gesummv", "trisolv"]
            .into_iter()
            .map(|name| {
                let (dir, here) = (dir.clone(), here.clone());
                s.spawn(move || {
                    let src = std::fs::read_to_string(here.join(format!("{name}.c"))).unwrap() + &driver(name);
                    let include = dir.to_str().unwrap();
                    // gcc's code, as the expected counts were taken of
                    let exe = kansoku_examples::build_source_by("gcc", name, &src, &dir, &["-O2", "-fno-inline", "-DMINI_DATASET", "-I", include]).unwrap_or_else(|e| panic!("{name}: {e}"));
                    // the source as built (with the builder's note of its flags at the end)
                    let file: PathBuf = exe.with_extension("c");
                    let input = CInput { preset: Some("MINI".into()), ..Default::default() };
                    let lowered = load_c_kernel(&file, &input).unwrap();
                    let p: ParamValues = lowered.sizes.iter().cloned().collect();
                    let prog = Program::new(&lowered.kernel, &p, &LayoutSpec::polybench()).unwrap();
                    let total = |prog: &Program| prog.simulate(&[l1])[0].iter().map(RefStats::misses).sum::<u64>();
                    let cold = total(&prog);
                    let init = load_c_warmup(&file, &input, "init_array").unwrap();
                    let warm = total(&prog.warmed_by(&init, &p, 4096).unwrap());
                    (name.to_string(), [(callgrind_kernel_misses(&exe, &["flush"]), cold), (callgrind_kernel_misses(&exe, &[]), warm)])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (name, [(cg_cold, k_cold), (cg_warm, k_warm)]) in &results {
        eprintln!("{name}: cold callgrind {cg_cold} kansoku {k_cold}; warm callgrind {cg_warm} kansoku {k_warm}");
    }
    for (name, [(cg_cold, k_cold), (cg_warm, k_warm)]) in &results {
        assert_eq!(k_cold, cg_cold, "{name} cold");
        assert_eq!(k_warm, cg_warm, "{name} warm");
        assert!(k_cold > k_warm, "{name}: the flush should cost misses");
    }
}
