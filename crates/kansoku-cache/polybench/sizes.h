/* kansoku's dataset presets for the PolyBench-style kernels beside this file (issue 17).
   PolyBench ships one header per kernel; these are ours, one set of values per size name,
   chosen so that every kernel of a preset fits the same cache study. Read by
   `kansoku cache ... FILE.c --size MINI|SMALL|MEDIUM`; -D NAME=VALUE overrides. */
# ifdef MINI_DATASET
#   define N 16
#   define M 14
#   define NI 12
#   define NJ 13
#   define NK 14
#   define NL 15
#   define NM 16
#   define NR 8
#   define NQ 9
#   define NP 10
#   define NX 12
#   define NY 14
#   define TMAX 4
#   define TSTEPS 4
#   define W 16
#   define H 12
# endif

# ifdef SMALL_DATASET
#   define N 60
#   define M 50
#   define NI 40
#   define NJ 50
#   define NK 60
#   define NL 70
#   define NM 80
#   define NR 20
#   define NQ 25
#   define NP 30
#   define NX 60
#   define NY 80
#   define TMAX 20
#   define TSTEPS 20
#   define W 64
#   define H 48
# endif

# ifdef MEDIUM_DATASET
#   define N 400
#   define M 380
#   define NI 200
#   define NJ 220
#   define NK 240
#   define NL 260
#   define NM 280
#   define NR 50
#   define NQ 60
#   define NP 70
#   define NX 200
#   define NY 240
#   define TMAX 40
#   define TSTEPS 40
#   define W 240
#   define H 160
# endif
