/* kansoku_trace.h — trace points for WebAssembly modules optimised by `kansoku tp`.
 *
 * Usage (compile with `clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry
 * -Wl,--export=run -I crates/kansoku-tracepoints/include prog.c -o prog.wasm`):
 *
 *   KTRACE_DECL(3, "iter", "i,sum", KTRACE_IDEMPOTENT, 20);
 *   ...
 *   KTRACE(3, i, sum);     // 0 to 4 integer arguments after the id
 *   KTRACE_BARRIER();      // no trace call may be moved across this point
 *
 * Every KTRACE becomes a call to the import `kansoku.traceN` (N = number of arguments)
 * with the id as first argument; KTRACE_BARRIER becomes a call to `kansoku.barrier`,
 * which the optimiser removes. The id must be an integer constant.
 *
 * KTRACE_DECL(id, name, arg_names, flags, max_move) records one declaration in the
 * custom section `kansoku.decl` of the compiled module, as one text line
 *   id=<id>;name=<name>;args=<a,b>;flags=<flags>;move=<max_move>
 * flags: KTRACE_DEFAULT, KTRACE_IDEMPOTENT, KTRACE_DISABLED, or KTRACE_IDEMPOTENT_DISABLED.
 * max_move: how far the optimiser may move the call, in wasm instructions from the original
 * call to the merged call that replaces it (-1 = unlimited, 0 = never moved, so the point can
 * only be the last member of a merge).
 */
#ifndef KANSOKU_TRACE_H
#define KANSOKU_TRACE_H

#define KTRACE_IMPORT_(n) __attribute__((import_module("kansoku"), import_name(n)))

KTRACE_IMPORT_("trace0") void __kansoku_trace0(int id);
KTRACE_IMPORT_("trace1") void __kansoku_trace1(int id, int a);
KTRACE_IMPORT_("trace2") void __kansoku_trace2(int id, int a, int b);
KTRACE_IMPORT_("trace3") void __kansoku_trace3(int id, int a, int b, int c);
KTRACE_IMPORT_("trace4") void __kansoku_trace4(int id, int a, int b, int c, int d);
KTRACE_IMPORT_("barrier") void __kansoku_barrier(void);

#define KTRACE_PICK_(_0, _1, _2, _3, _4, NAME, ...) NAME
#define KTRACE(...)                                                                  \
  KTRACE_PICK_(__VA_ARGS__, __kansoku_trace4, __kansoku_trace3, __kansoku_trace2,    \
               __kansoku_trace1, __kansoku_trace0, unused_)                          \
  (__VA_ARGS__)
#define KTRACE_BARRIER() __kansoku_barrier()

#define KTRACE_DEFAULT ""
#define KTRACE_IDEMPOTENT "idempotent"
#define KTRACE_DISABLED "disabled"
#define KTRACE_IDEMPOTENT_DISABLED "idempotent,disabled"

#define KTRACE_STR2_(x) #x
#define KTRACE_STR_(x) KTRACE_STR2_(x)
/* File-scope assembly puts the line into a real custom section, which wasm-ld concatenates
 * across translation units and keeps without any reference. */
#define KTRACE_DECL(id, name, args, flags, max_move)                                   \
  __asm__(".section .custom_section.kansoku.decl,\"\",@\n"                           \
          ".ascii \"id=" KTRACE_STR_(id) ";name=" name ";args=" args ";flags=" flags    \
          ";move=" KTRACE_STR_(max_move) "\\n\"\n"                                   \
          ".text\n")

#endif
