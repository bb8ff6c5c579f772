/* kansoku's Valgrind tool: the guest start address of every executed superblock, as a
   compact binary stream on a file descriptor (seed 003's block source), and with
   --exact=yes what makes that stream an exact instruction trace (kansoku's exact engine).

   Licence: this tool is compiled against Valgrind's headers and linked with Valgrind's
   GPL-2 core libraries into a separate executable (kansoku-amd64-linux), which runs as a
   separate process and talks to kansoku only through the stream below; kansoku itself
   stays MIT/Apache-2.0.

   Written for kansoku against Valgrind's public tool interface (pub_tool_*.h, libvex_ir.h).
   Like the seed's plugin it hands every executed block's start to the path analysis; unlike
   Lackey's text trace it buffers: records go into a 64 KiB buffer that is written with one
   write(2) per frame.

   Stream (all integers little endian; varint = LEB128, 7 bits per byte, low bits first):
     frame  := "KSB1" u32 payload_len payload            (payload_len <= 65536 - 8)
     record := varint v  with v even:  a superblock entry, address = prev + unzigzag(v >> 1)
             | 0x01 varint avma varint svma varint len bytes[len]
                                       an object's .text: runtime and link address, and path
             | 0x03 varint tid         the following superblocks are run by this thread
                                       (its kernel thread id, as gettid(2) gives it)
             | 0x05 varint addr varint n bytes[n]
                                       (exact mode) a translated superblock's instruction
                                       lengths, written when it is translated, so before
                                       its first entry
             | 0x07 varint v           (exact mode) the superblock just entered was left by
                                       a side exit in its instruction v >> 2; v & 3 is 0 when
                                       that instruction did not run, 1 when it did, 2 when
                                       it is a rep string instruction whose count was zero
             | 0x09 varint sig varint ip
                                       (exact mode) a signal is delivered to the running
                                       thread, whose guest instruction pointer was ip
             | 0x0b varint v varint z  (data mode) instruction v >> 1 of the superblock just
                                       entered reads (v & 1 == 0) or writes (1) memory at
                                       prev_data + unzigzag(z)
             | 0x0d varint id varint parent varint z varint count
                                       (paths mode) a node of the path trie: the path of node
                                       `parent` followed by the superblock at prev +
                                       unzigzag(z) (prev becomes that address); `count`
                                       paths ended here
             | 0x0f varint n           (paths mode) the trie of n nodes above is complete:
                                       node ids start again (the trie was full, or the run
                                       ended)
             | 0x11 varint tid varint node
                                       (paths mode) thread tid ended (or the run did) with
                                       the path of `node` of the next complete trie in
                                       progress
             | 0x13 varint n           (paths mode) n more superblocks were entered
             | 0x17 varint n           (paths mode) the trie above (n nodes) and the open
                                       paths before it are a snapshot taken before an
                                       execve: the program's last word if the execve
                                       succeeds, replaced by the next trie if it fails
             | 0x15 varint addr        (paths mode) a path ran past 65536 superblocks (at
                                       addr) without a cut this tool can be sure of: it
                                       counts no more (kansoku says to stream instead)
     `prev` and `prev_data` are 0 at the start of every frame, so each frame decodes on
     its own.
   A module record is written when a translation first meets code of an object Valgrind has
   loaded, i.e. always before that object's first superblock entry in the stream.
   A thread record is written whenever Valgrind's scheduler starts running client code of a
   thread other than the last one (the `start_client_code` event), the first one before
   the main thread's first superblock. Valgrind runs one thread at a time, each guest
   thread on its own kernel thread, so every superblock entry belongs to the thread of the
   last thread record before it.

   Why side exits: with chasing off, VEX ends a superblock at every branch, so an entry
   normally means all its instructions ran. The exceptions are exits in the middle of a
   superblock (faults, restarts) and the zero-count check at the start of a rep string
   instruction; those, and only those, get a guarded call that says where the superblock
   was left. A conditional branch's exit at the end needs none: either way every
   instruction ran.

   Paths mode (--paths=split|through): seed 003's paths are counted here instead of
   streaming every entry (issue 11: the pipe and the analysis of 10^8 entries cost 3-4x
   the run under --tool=none). A path in this tool is the sequence of superblocks entered
   between two cuts: a superblock's entry appends its start to its thread's path in
   progress, and only a cut looks the path up, in a table of distinct paths with their
   counts (paths of one or two superblocks, most of them, in the last superblock's own
   record, so a hot path touches no table); the table is written as a trie. Before
   (a trie walked at every entry, one hash probe for most) the trie's cache misses were
   half of the tool's time on bzip2. kansoku replays each distinct path once, weighted by
   its count, through the same splitter and path profiler as the stream. That gives the same path table only if
   every cut made here is also a cut of kansoku's rule (kansoku may cut more: it cuts
   again inside a replayed path). So this tool cuts only where kansoku surely does, with
   the superblock's last instruction classified from its bytes:
     - a call (split mode) or a return;
     - a jump back to or below the start of the block it leaves: kansoku cuts when the
       target starts at or below the last block entered, whose start is at least the
       lowest entry since the last control transfer (the `chain` below);
   and never when the next entry lies inside the superblock left (it was left early,
   which kansoku's splitter sees from the next entry). System calls, rep strings, the
   instruction limit, and everything else are left to kansoku.

   Options: --out-fd=N (required) is where the frames go; --exact=yes adds the records
   an exact trace needs; --data=yes (with --exact=yes) adds every memory access's address,
   as Lackey's --trace-mem does, for the waveform's data addresses; --paths=split|through
   counts paths in the tool (calls cut paths, or not) instead of writing every entry. */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"

/* Part of the core's libcfile, not of the tool headers: moves an fd into Valgrind's
   reserved range, where the client cannot close or replace it. */
extern Int VG_(safe_fd)(Int oldfd);

#define KK_FRAME_BYTES 65536
#define KK_HEADER_BYTES 8
/* room kept free for one superblock record (at most 10 bytes) */
#define KK_SLACK 16
#define KK_MAX_PATH 4000
#define KK_MAX_OBJECTS 4096
/* VEX translates at most 99 guest instructions into one superblock */
#define KK_MAX_INSNS 128

static Long kk_out_fd = -1;
static Bool kk_exact = False;
static Bool kk_data = False;
static Addr kk_prev_data = 0;
static Int kk_fd = -1;
static UChar kk_buf[KK_FRAME_BYTES];
static UInt kk_pos = KK_HEADER_BYTES;
static Addr kk_prev = 0;
static Bool kk_failed = False;
/* paths mode: 0 off, else how calls are treated */
#define KK_PATHS_OFF 0
#define KK_PATHS_SPLIT 1
#define KK_PATHS_THROUGH 2
static Int kk_paths = KK_PATHS_OFF;
/* Valgrind's id of the thread whose superblocks are being written (0: none yet) */
static ThreadId kk_tid = VG_INVALID_THREADID;

typedef struct { const DebugInfo* di; Addr avma; SizeT size; } KKObject;
static KKObject kk_objects[KK_MAX_OBJECTS];
static Int kk_n_objects = 0;
/* the object of the last translation, to skip the search for most translations */
static Addr kk_last_lo = 1, kk_last_hi = 0;

static void kk_flush(void)
{
   UInt len = kk_pos - KK_HEADER_BYTES;
   if (len == 0)
      return;
   kk_buf[0] = 'K'; kk_buf[1] = 'S'; kk_buf[2] = 'B'; kk_buf[3] = '1';
   kk_buf[4] = len & 0xff; kk_buf[5] = (len >> 8) & 0xff;
   kk_buf[6] = (len >> 16) & 0xff; kk_buf[7] = (len >> 24) & 0xff;
   if (kk_fd >= 0 && !kk_failed) {
      UInt done = 0;
      while (done < kk_pos) {
         Int n = VG_(write)(kk_fd, kk_buf + done, kk_pos - done);
         if (n <= 0) {
            /* the reader is gone (or the fd is bad): stop writing, let the program run */
            kk_failed = True;
            break;
         }
         done += n;
      }
   }
   kk_pos = KK_HEADER_BYTES;
   kk_prev = 0;
   kk_prev_data = 0;
}

static inline void kk_put_varint(ULong v)
{
   while (v >= 0x80) {
      kk_buf[kk_pos++] = (UChar)(v | 0x80);
      v >>= 7;
   }
   kk_buf[kk_pos++] = (UChar)v;
}

/* Called at the entry of every executed superblock. */
static VG_REGPARM(1) void kk_superblock(Addr addr)
{
   Long delta = (Long)(addr - kk_prev);
   ULong zz = ((ULong)delta << 1) ^ (ULong)(delta >> 63);
   kk_prev = addr;
   kk_put_varint(zz << 1);
   if (kk_pos > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
}

/* ---- Paths mode (see the top) ---- */

/* How a superblock's last instruction leaves it, from its bytes. */
#define KK_END_OTHER 0
#define KK_END_JUMP 1
#define KK_END_CALL 2
#define KK_END_RETURN 3

/* What a translated superblock tells the path step; made once per translation, kept for
   the run (on the list kk_runs). Most paths are one or two superblocks long (bzip2: 1.7 on
   average): the ids of the last such paths that ended with this superblock are kept here,
   with their counts since (valid in table generation `gen`), so that such a path's end
   touches no table. */
typedef struct KKRun_ {
   Addr start, last;
   UChar end, rep;
   UInt gen;
   UInt solo, pair;          /* ids of the path [start] and of [pair_first, start], 0: none */
   UInt longer;              /* id of the last longer path that ended here, 0: none */
   Addr pair_first;
   ULong solo_count, pair_count;
   struct KKRun_* next;
} KKRun;
static KKRun* kk_runs;

/* A distinct path counted: the `len` superblock starts at kk_store[at], the times it
   ended (`count`), and its hash (kk_hash). */
typedef struct { ULong hash; ULong count; UInt at; UInt len; } KKPath;

/* A node of the trie written out (built from the paths when they are written). */
typedef struct { Addr addr; UInt parent; ULong count; } KKNode;

/* One thread's path in progress: the superblocks entered since its last cut, so that the
   step per superblock is an append (no lookup); a path is looked up when it ends. */
typedef struct {
   Addr* seq;           /* KK_MAX_DEPTH starts, allocated when the thread first runs */
   UInt len;            /* superblocks in the path so far */
   KKRun* prev;         /* the superblock entered last (NULL: none yet) */
   Addr chain;          /* no block entered since the last control transfer starts lower */
   Int ktid;            /* kernel thread id, for the 0x11 record */
} KKPathState;

/* The paths are written out (as a trie) and started again when their superblocks would
   make a trie of more than this many nodes (--paths-nodes, for tests of that; the reader
   takes up to 2^23). */
static Long kk_max_nodes = 1 << 22;
/* The longest path this tool keeps: a path that runs longer without a cut it can be sure
   of (a loop whose back edge it cannot see) ends the counting, with a 0x15 record. */
#define KK_MAX_DEPTH (1u << 16)
static Bool kk_gave_up = False;

/* A progress record after this many superblock entries. */
#define KK_PROGRESS_EVERY (1u << 20)

static KKPath* kk_tab;            /* distinct paths, from 1 (0: none) */
static UInt kk_n_tab, kk_cap_tab;
static UInt* kk_tab_slots;        /* open addressing: path ids, 0 empty */
static UInt kk_tab_mask;
static Addr* kk_store;            /* the distinct paths' superblock starts */
static UInt kk_store_used, kk_store_cap;
/* A direct-mapped cache of path ids by hash in front of the slots (a hot path's entry and
   starts stay in the CPU's cache; the slot table is large and cold). */
#define KK_RECENT 4096
static UInt kk_recent[KK_RECENT];
/* Threads that ended inside a path: their open paths, written with the next trie (0x11). */
typedef struct { Int ktid; UInt path; } KKOpen;
static KKOpen* kk_opens;
static UInt kk_n_opens, kk_cap_opens;
static KKPathState* kk_states;    /* by Valgrind thread id */
static KKPathState* kk_cur;       /* the running thread's */
static UInt kk_entries;           /* superblocks entered since the last progress record */
static UInt kk_gen = 1;           /* table generation: path ids of older ones are stale */

/* The last instruction's kind, as kansoku's decoder would call it, for the few kinds that
   cut; anything unsure is OTHER (kansoku then decides alone). */
static UChar kk_end_kind(Addr a, UInt len)
{
   const UChar* p = (const UChar*)a;
   UInt i = 0;
   UChar op;
   while (i < len && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0x2E || p[i] == 0x3E || p[i] == 0x26
                      || p[i] == 0x36 || p[i] == 0x64 || p[i] == 0x65 || p[i] == 0xF0 || p[i] == 0xF2
                      || p[i] == 0xF3 || (p[i] >= 0x40 && p[i] <= 0x4F)))
      i++;
   if (i >= len)
      return KK_END_OTHER;
   op = p[i];
   if (op == 0xE8)
      return KK_END_CALL;
   if (op == 0xC3 || op == 0xC2)
      return KK_END_RETURN;
   if (op == 0xE9 || op == 0xEB || (op >= 0x70 && op <= 0x7F) || (op >= 0xE0 && op <= 0xE3))
      return KK_END_JUMP;
   if (op == 0x0F && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x8F)
      return KK_END_JUMP;
   if (op == 0xFF && i + 1 < len) {
      UChar reg = (p[i + 1] >> 3) & 7;
      if (reg == 2)
         return KK_END_CALL;
      if (reg == 4)
         return KK_END_JUMP;
   }
   return KK_END_OTHER;
}

static ULong kk_hash(const Addr* seq, UInt len)
{
   ULong h = 0;
   UInt i;
   for (i = 0; i < len; i++)
      h = (h ^ seq[i]) * 0x9E3779B97F4A7C15ULL;
   return h;
}

/* Where a path of hash `h` and `len` superblocks is looked for, in a table of mask + 1. */
static inline UInt kk_index(ULong h, UInt len, UInt mask)
{
   ULong x = (h + len) ^ ((h + len) >> 31);
   return (UInt)((x * 0xC2B2AE3D27D4EB4FULL) >> 32) & mask;
}

static Bool kk_same_starts(const KKPath* p, const Addr* seq, UInt len)
{
   const Addr* s = kk_store + p->at;
   UInt i;
   if (p->len != len)
      return False;
   for (i = 0; i < len; i++)
      if (s[i] != seq[i])
         return False;
   return True;
}

static Bool kk_same_path(const KKPath* p, const Addr* seq, UInt len, ULong h)
{
   return p->hash == h && kk_same_starts(p, seq, len);
}

static void kk_grow_tab_slots(void)
{
   UInt size = (kk_tab_mask + 1) * 2, i;
   VG_(free)(kk_tab_slots);
   kk_tab_slots = VG_(calloc)("kansoku.pathslots", size, sizeof(UInt));
   kk_tab_mask = size - 1;
   for (i = 1; i < kk_n_tab; i++) {
      UInt s = kk_index(kk_tab[i].hash, kk_tab[i].len, kk_tab_mask);
      while (kk_tab_slots[s])
         s = (s + 1) & kk_tab_mask;
      kk_tab_slots[s] = i;
   }
}

static void kk_room(UInt bytes)
{
   if (kk_pos + bytes > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
}

static void kk_put_progress(void)
{
   if (kk_entries == 0)
      return;
   kk_room(12);
   kk_buf[kk_pos++] = 0x13;
   kk_put_varint(kk_entries);
   kk_entries = 0;
}

/* The trie written out: nodes from 1 (0 is the empty path), found by (parent, addr). */
static KKNode* kk_nodes;
static UInt kk_n_nodes;
static UInt* kk_slots;
static UInt kk_slot_mask;

static inline UInt kk_slot_of(UInt parent, Addr a)
{
   ULong h = ((ULong)a * 0x9E3779B97F4A7C15ULL) ^ ((ULong)parent * 0xC2B2AE3D27D4EB4FULL);
   return (UInt)(h >> 32) & kk_slot_mask;
}

/* The trie node of `len` superblock starts, made where new (room for it was made). */
static UInt kk_trie_insert(const Addr* seq, UInt len)
{
   UInt node = 0, i;
   for (i = 0; i < len; i++) {
      UInt s = kk_slot_of(node, seq[i]), c;
      while ((c = kk_slots[s]) != 0 && !(kk_nodes[c].addr == seq[i] && kk_nodes[c].parent == node))
         s = (s + 1) & kk_slot_mask;
      if (c == 0) {
         c = kk_n_nodes++;
         kk_nodes[c].addr = seq[i];
         kk_nodes[c].parent = node;
         kk_nodes[c].count = 0;
         kk_slots[s] = c;
      }
      node = c;
   }
   return node;
}

/* Writes the paths counted (as 0x0d trie records), the open paths of the threads that
   ended, with `live` those of the running threads too (0x11), then `end` (0x0f, or 0x17
   for a snapshot), for kansoku to replay. */
static void kk_write_trie(UChar end, Bool live)
{
   UInt most = 1 + kk_store_used, size = 16, i, t;
   UInt* open_nodes;
   KKRun* r;
   for (r = kk_runs; r; r = r->next) {
      if (r->gen != kk_gen)
         continue;
      if (r->solo)
         kk_tab[r->solo].count += r->solo_count;
      if (r->pair)
         kk_tab[r->pair].count += r->pair_count;
      r->solo_count = r->pair_count = 0;
   }
   if (live)
      for (t = 0; t < VG_N_THREADS; t++)
         most += kk_states[t].len;
   while (size < 2 * most)
      size *= 2;
   kk_nodes = VG_(malloc)("kansoku.nodes", most * sizeof(KKNode));
   kk_slots = VG_(calloc)("kansoku.slots", size, sizeof(UInt));
   kk_slot_mask = size - 1;
   kk_nodes[0].addr = 0;
   kk_nodes[0].parent = 0;
   kk_nodes[0].count = 0;
   kk_n_nodes = 1;
   for (i = 1; i < kk_n_tab; i++)
      kk_nodes[kk_trie_insert(kk_store + kk_tab[i].at, kk_tab[i].len)].count += kk_tab[i].count;
   open_nodes = VG_(malloc)("kansoku.opennodes", (kk_n_opens + 1) * sizeof(UInt));
   for (i = 0; i < kk_n_opens; i++)
      open_nodes[i] = kk_trie_insert(kk_store + kk_tab[kk_opens[i].path].at, kk_tab[kk_opens[i].path].len);
   for (i = 0; i < kk_n_opens; i++) {
      kk_room(1 + 2 * 10);
      kk_buf[kk_pos++] = 0x11;
      kk_put_varint((ULong)(UInt)kk_opens[i].ktid);
      kk_put_varint(open_nodes[i]);
   }
   VG_(free)(open_nodes);
   for (t = 0; live && t < VG_N_THREADS; t++) {
      const KKPathState* st = &kk_states[t];
      if (st->len == 0)
         continue;
      kk_room(1 + 2 * 10);
      kk_buf[kk_pos++] = 0x11;
      kk_put_varint((ULong)(UInt)st->ktid);
      kk_put_varint(kk_trie_insert(st->seq, st->len));
   }
   for (i = 1; i < kk_n_nodes; i++) {
      Long delta;
      kk_room(1 + 4 * 10);
      /* prev is 0 at every frame start, as for superblock entries */
      delta = (Long)(kk_nodes[i].addr - kk_prev);
      kk_prev = kk_nodes[i].addr;
      kk_buf[kk_pos++] = 0x0d;
      kk_put_varint(i);
      kk_put_varint(kk_nodes[i].parent);
      kk_put_varint(((ULong)delta << 1) ^ (ULong)(delta >> 63));
      kk_put_varint(kk_nodes[i].count);
   }
   kk_room(12);
   kk_buf[kk_pos++] = end;
   kk_put_varint(kk_n_nodes - 1);
   VG_(free)(kk_nodes);
   VG_(free)(kk_slots);
   kk_nodes = NULL;
   kk_slots = NULL;
}

/* The paths would make too large a trie: write them and start again; every running
   thread's path in progress goes on (a cut here would be a cut kansoku does not make). */
static void kk_table_full(void)
{
   kk_write_trie(0x0f, False);
   kk_flush();
   VG_(memset)(kk_tab_slots, 0, (kk_tab_mask + 1) * sizeof(UInt));
   VG_(memset)(kk_recent, 0, sizeof(kk_recent));
   kk_n_tab = 1;
   kk_store_used = 0;
   kk_n_opens = 0;
   kk_gen++;
}

/* The id of the path of `len` superblock starts `seq`, made with count 0 if new. */
static UInt kk_path_id(const Addr* seq, UInt len)
{
   ULong h = kk_hash(seq, len);
   UInt* recent = &kk_recent[kk_index(h, len, KK_RECENT - 1)];
   UInt s, c, id;
   if (*recent != 0 && kk_same_path(&kk_tab[*recent], seq, len, h))
      return *recent;
   s = kk_index(h, len, kk_tab_mask);
   while ((c = kk_tab_slots[s]) != 0) {
      if (kk_same_path(&kk_tab[c], seq, len, h)) {
         *recent = c;
         return c;
      }
      s = (s + 1) & kk_tab_mask;
   }
   if (kk_n_tab > 1 && (Long)kk_store_used + len + 1 > kk_max_nodes) {
      kk_table_full();
      recent = &kk_recent[kk_index(h, len, KK_RECENT - 1)];
      s = kk_index(h, len, kk_tab_mask);
   }
   if (kk_store_used + len > kk_store_cap) {
      while (kk_store_used + len > kk_store_cap)
         kk_store_cap *= 2;
      kk_store = VG_(realloc)("kansoku.store", kk_store, (SizeT)kk_store_cap * sizeof(Addr));
   }
   if (kk_n_tab == kk_cap_tab) {
      kk_cap_tab *= 2;
      kk_tab = VG_(realloc)("kansoku.paths", kk_tab, (SizeT)kk_cap_tab * sizeof(KKPath));
   }
   id = kk_n_tab++;
   kk_tab[id].hash = h;
   kk_tab[id].count = 0;
   kk_tab[id].at = kk_store_used;
   kk_tab[id].len = len;
   VG_(memcpy)(kk_store + kk_store_used, seq, len * sizeof(Addr));
   kk_store_used += len;
   kk_tab_slots[s] = id;
   *recent = id;
   if (2 * kk_n_tab > kk_tab_mask)
      kk_grow_tab_slots();
   return id;
}

static void kk_run_reset(KKRun* r)
{
   r->gen = kk_gen;
   r->solo = r->pair = r->longer = 0;
   r->solo_count = r->pair_count = 0;
}

/* Thread `st`'s path ends here (a cut) with its last superblock `p`: counted. */
static void kk_end_path(KKPathState* st, KKRun* p)
{
   UInt len = st->len, id;
   st->len = 0;
   if (p->gen != kk_gen)
      kk_run_reset(p);
   if (len > 2) {
      if (!(p->longer && kk_same_starts(&kk_tab[p->longer], st->seq, len))) {
         id = kk_path_id(st->seq, len); /* it may move kk_tab, and start a new one */
         if (p->gen != kk_gen)
            kk_run_reset(p);
         p->longer = id;
      }
      kk_tab[p->longer].count++;
      return;
   }
   if (len == 1 && p->solo) {
      p->solo_count++;
      return;
   }
   if (len == 2 && p->pair && p->pair_first == st->seq[0]) {
      p->pair_count++;
      return;
   }
   id = kk_path_id(st->seq, len);
   /* the table may have been written and started again */
   if (p->gen != kk_gen)
      kk_run_reset(p);
   if (len == 1) {
      p->solo = id;
      p->solo_count = 1;
   } else {
      if (p->pair)
         kk_tab[p->pair].count += p->pair_count;
      p->pair = id;
      p->pair_first = st->seq[0];
      p->pair_count = 1;
   }
}

/* The path step of superblock `r` entered by thread `st`, all cases. */
static __attribute__((noinline)) void kk_path_step_all(KKRun* r, KKPathState* st)
{
   KKRun* p = st->prev;
   Addr a = r->start;
   UInt len;
   if (kk_entries == KK_PROGRESS_EVERY) {
      kk_put_progress();
      kk_flush();
   }
   /* a rep string instruction's next element: kansoku's splitter makes nothing of it */
   if ((r == p && r->rep) || kk_gave_up)
      return;
   if (p) {
      /* left early: the entry lies inside the superblock left (kansoku decides) */
      Bool inside = a > p->start && a <= p->last;
      Bool cut = False;
      if (!inside) {
         if (p->end == KK_END_RETURN)
            cut = True;
         else if (p->end == KK_END_CALL)
            cut = kk_paths == KK_PATHS_SPLIT;
         else if (p->end == KK_END_JUMP)
            cut = a <= st->chain;
      }
      if (cut && st->len != 0)
         kk_end_path(st, p);
      if (p->end != KK_END_OTHER)
         st->chain = a;
      else if (a < st->chain)
         st->chain = a;
   } else {
      st->chain = a;
   }
   st->prev = r;
   len = st->len;
   st->seq[len++] = a;
   st->len = len;
   if (len == KK_MAX_DEPTH) {
      kk_room(12);
      kk_buf[kk_pos++] = 0x15;
      kk_put_varint(a);
      kk_gave_up = True;
   }
}

/* Called at the entry of every executed superblock in paths mode. The common cases are
   done here: an entry that does not cut (an append), and a cut that ends a path of one or
   two superblocks its last superblock knows (a count there, then the new path's first
   entry). Everything else goes to kk_path_step_all, a call that keeps this one a leaf
   function (no registers to save). */
static VG_REGPARM(1) void kk_path_step(KKRun* r)
{
   KKPathState* st = kk_cur;
   KKRun* p = st->prev;
   Addr a = r->start;
   UInt len = st->len;
   if (++kk_entries != KK_PROGRESS_EVERY && p && !r->rep && !kk_gave_up && len + 1 < KK_MAX_DEPTH) {
      UChar end = p->end;
      Bool cut;
      if (end == KK_END_OTHER) {
         if (a < st->chain)
            st->chain = a;
         cut = False;
      } else {
         cut = !(a > p->start && a <= p->last)
               && (end == KK_END_RETURN || (end == KK_END_CALL && kk_paths == KK_PATHS_SPLIT)
                   || (end == KK_END_JUMP && a <= st->chain));
         if (!cut)
            st->chain = a;
      }
      if (!cut) {
         st->prev = r;
         st->seq[len] = a;
         st->len = len + 1;
         return;
      }
      if (p->gen == kk_gen && ((len == 1 && p->solo) || (len == 2 && p->pair && p->pair_first == st->seq[0]))) {
         if (len == 1)
            p->solo_count++;
         else
            p->pair_count++;
         st->chain = a;
         st->prev = r;
         st->seq[0] = a;
         st->len = 1;
         return;
      }
   }
   kk_path_step_all(r, st);
}

/* Exact mode: the superblock just entered was left by a side exit (see the top). */
static VG_REGPARM(1) void kk_exit(HWord v)
{
   kk_buf[kk_pos++] = 0x07;
   kk_put_varint((ULong)v);
   if (kk_pos > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
}

/* Data mode: instruction `info >> 1` of the current superblock accesses memory at `a`. */
static VG_REGPARM(2) void kk_access(Addr a, HWord info)
{
   Long delta = (Long)(a - kk_prev_data);
   kk_prev_data = a;
   kk_buf[kk_pos++] = 0x0b;
   kk_put_varint((ULong)info);
   kk_put_varint(((ULong)delta << 1) ^ (ULong)(delta >> 63));
   if (kk_pos > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
}

/* Data mode: a call of kk_access before the statement that accesses `addr` (an atom),
   taken when `guard` (NULL: always). */
static void kk_add_access(IRSB* sb, IRExpr* addr, Int k, Bool write, IRExpr* guard)
{
   IRDirty* d = unsafeIRDirty_0_N(2, "kk_access", VG_(fnptr_to_fnentry)(&kk_access),
                                  mkIRExprVec_2(addr, mkIRExpr_HWord((HWord)((k << 1) | (write ? 1 : 0)))));
   if (guard)
      d->guard = guard;
   addStmtToIRSB(sb, IRStmt_Dirty(d));
}

/* Data mode: the memory accesses of one statement of instruction k. */
static void kk_accesses_of(IRSB* sb, const IRStmt* st, Int k)
{
   switch (st->tag) {
   case Ist_WrTmp:
      if (st->Ist.WrTmp.data->tag == Iex_Load)
         kk_add_access(sb, st->Ist.WrTmp.data->Iex.Load.addr, k, False, NULL);
      break;
   case Ist_Store:
      kk_add_access(sb, st->Ist.Store.addr, k, True, NULL);
      break;
   case Ist_LoadG:
      kk_add_access(sb, st->Ist.LoadG.details->addr, k, False, st->Ist.LoadG.details->guard);
      break;
   case Ist_StoreG:
      kk_add_access(sb, st->Ist.StoreG.details->addr, k, True, st->Ist.StoreG.details->guard);
      break;
   case Ist_CAS:
      kk_add_access(sb, st->Ist.CAS.details->addr, k, True, NULL);
      break;
   case Ist_LLSC:
      kk_add_access(sb, st->Ist.LLSC.addr, k, st->Ist.LLSC.storedata != NULL, NULL);
      break;
   case Ist_Dirty: {
      const IRDirty* d = st->Ist.Dirty.details;
      if (d->mFx != Ifx_None && d->mAddr)
         kk_add_access(sb, d->mAddr, k, d->mFx != Ifx_Read, NULL);
      break;
   }
   default:
      break;
   }
}

/* Exact mode: the instruction lengths of a superblock being translated. */
static void kk_shape(Addr start, const UChar* lengths, Int n)
{
   if (kk_pos + 1 + 20 + n > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
   kk_buf[kk_pos++] = 0x05;
   kk_put_varint((ULong)start);
   kk_put_varint((ULong)n);
   VG_(memcpy)(kk_buf + kk_pos, lengths, n);
   kk_pos += n;
}

/* Exact mode: a signal is about to be delivered to `tid`; where did it stand? */
static void kk_pre_deliver_signal(ThreadId tid, Int sigNo, Bool alt_stack)
{
   if (kk_pos + 1 + 20 > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
   kk_buf[kk_pos++] = 0x09;
   kk_put_varint((ULong)(UInt)sigNo);
   kk_put_varint((ULong)VG_(get_IP)(tid));
}

/* Is the instruction at `a` (of `len` bytes) a rep-prefixed string instruction? VEX
   translates those as "if the count is zero, go to the next instruction", one repetition,
   and a jump back to the instruction itself. */
static Bool kk_is_rep_string(Addr a, UInt len)
{
   const UChar* p = (const UChar*)a;
   Bool rep = False;
   UInt i;
   for (i = 0; i < len; i++) {
      UChar b = p[i];
      if (b == 0xF2 || b == 0xF3) { rep = True; continue; }
      if (b == 0x66 || b == 0x67 || b == 0x2E || b == 0x3E || b == 0x26 || b == 0x36
          || b == 0x64 || b == 0x65 || b == 0xF0 || (b >= 0x40 && b <= 0x4F))
         continue;
      return rep && ((b >= 0xA4 && b <= 0xA7) || (b >= 0xAA && b <= 0xAF) || (b >= 0x6C && b <= 0x6F));
   }
   return False;
}

/* Exact mode: what a side exit in instruction k (of n, at `addr`, `len` bytes) means when
   it is taken, as the 0x07 record's low bits; -1 when it needs no record. */
static Int kk_exit_kind(const IRStmt* st, Int k, Int n, Addr addr, UInt len)
{
   Addr dst = (Addr)st->Ist.Exit.dst->Ico.U64;
   if (st->Ist.Exit.jk != Ijk_Boring || k < n - 1)
      return dst == addr ? 0 : 1;
   if (dst == addr + len && kk_is_rep_string(addr, len))
      return 2;
   return -1;
}

/* Valgrind's scheduler starts running client code of `tid`, on that thread's own kernel
   thread (Valgrind serialises threads with its lock; a switch can only happen here). */
static void kk_start_client_code(ThreadId tid, ULong blocks_dispatched)
{
   if (tid == kk_tid)
      return;
   kk_tid = tid;
   if (kk_paths) {
      kk_cur = &kk_states[tid];
      kk_cur->ktid = VG_(gettid)();
      if (!kk_cur->seq)
         kk_cur->seq = VG_(malloc)("kansoku.seq", KK_MAX_DEPTH * sizeof(Addr));
   }
   kk_buf[kk_pos++] = 0x03;
   kk_put_varint((ULong)(UInt)VG_(gettid)());
   if (kk_pos > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
}

static void kk_announce(const DebugInfo* di)
{
   Addr avma = VG_(DebugInfo_get_text_avma)(di);
   SizeT size = VG_(DebugInfo_get_text_size)(di);
   PtrdiffT bias = VG_(DebugInfo_get_text_bias)(di);
   const HChar* path = VG_(DebugInfo_get_filename)(di);
   SizeT len = path ? VG_(strlen)(path) : 0;
   Int i;
   if (size == 0 || len == 0)
      return;
   /* Valgrind's own executable (this tool) has a DebugInfo too; it runs no guest code */
   if ((Addr)&kk_flush >= avma && (Addr)&kk_flush < avma + size)
      return;
   for (i = 0; i < kk_n_objects; i++)
      if (kk_objects[i].di == di && kk_objects[i].avma == avma)
         return;
   if (kk_n_objects == KK_MAX_OBJECTS)
      return;
   kk_objects[kk_n_objects].di = di;
   kk_objects[kk_n_objects].avma = avma;
   kk_objects[kk_n_objects].size = size;
   kk_n_objects++;
   if (len > KK_MAX_PATH)
      len = KK_MAX_PATH;
   if (kk_pos + 1 + 30 + len > KK_FRAME_BYTES - KK_SLACK)
      kk_flush();
   kk_buf[kk_pos++] = 0x01;
   kk_put_varint((ULong)avma);
   kk_put_varint((ULong)(avma - bias));
   kk_put_varint((ULong)len);
   VG_(memcpy)(kk_buf + kk_pos, path, len);
   kk_pos += len;
}

/* Announces every loaded object not yet announced, when a translation lies outside the
   objects announced so far. */
static void kk_objects_for(Addr addr)
{
   const DebugInfo* di;
   Int i;
   if (addr >= kk_last_lo && addr < kk_last_hi)
      return;
   for (i = 0; i < kk_n_objects; i++) {
      if (addr >= kk_objects[i].avma && addr < kk_objects[i].avma + kk_objects[i].size) {
         kk_last_lo = kk_objects[i].avma;
         kk_last_hi = kk_objects[i].avma + kk_objects[i].size;
         return;
      }
   }
   for (di = VG_(next_DebugInfo)(NULL); di != NULL; di = VG_(next_DebugInfo)(di))
      kk_announce(di);
}

static IRSB* kk_instrument(VgCallbackClosure* closure, IRSB* sb_in,
                           const VexGuestLayout* layout, const VexGuestExtents* vge,
                           const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   IRSB* sb_out;
   Int i;
   Bool done = False;
   /* exact mode: the instructions' addresses and lengths, and which one we are in */
   Addr addrs[KK_MAX_INSNS];
   UChar lengths[KK_MAX_INSNS];
   Int n = 0, k = -1;
   if (gWordTy != hWordTy)
      VG_(tool_panic)("host/guest word size mismatch");
   if (kk_exact || kk_paths) {
      for (i = 0; i < sb_in->stmts_used; i++) {
         IRStmt* st = sb_in->stmts[i];
         if (st && st->tag == Ist_IMark) {
            if (n == KK_MAX_INSNS)
               VG_(tool_panic)("kansoku: a superblock of more instructions than expected");
            addrs[n] = (Addr)st->Ist.IMark.addr;
            lengths[n] = (UChar)st->Ist.IMark.len;
            n++;
         }
      }
      if (n > 0 && kk_exact)
         kk_shape(addrs[0], lengths, n);
   }
   sb_out = deepCopyIRSBExceptStmts(sb_in);
   for (i = 0; i < sb_in->stmts_used; i++) {
      IRStmt* st = sb_in->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      if (st->tag == Ist_IMark)
         k++;
      if (kk_data && done && k >= 0)
         kk_accesses_of(sb_out, st, k);
      if (kk_exact && st->tag == Ist_Exit && done && k >= 0) {
         Int kind = kk_exit_kind(st, k, n, addrs[k], lengths[k]);
         if (kind >= 0) {
            IRDirty* d = unsafeIRDirty_0_N(1, "kk_exit", VG_(fnptr_to_fnentry)(&kk_exit),
                                           mkIRExprVec_1(mkIRExpr_HWord((HWord)((k << 2) | kind))));
            d->guard = st->Ist.Exit.guard;
            addStmtToIRSB(sb_out, IRStmt_Dirty(d));
         }
      }
      if (!done && st->tag == Ist_IMark) {
         Addr start = (Addr)st->Ist.IMark.addr;
         IRDirty* d;
         kk_objects_for(start);
         if (kk_paths && n > 0) {
            /* one per translation, kept for the run: the path step points at it */
            KKRun* r = VG_(malloc)("kansoku.run", sizeof(KKRun));
            r->start = start;
            r->last = addrs[n - 1];
            r->end = kk_end_kind(addrs[n - 1], lengths[n - 1]);
            r->rep = kk_is_rep_string(addrs[n - 1], lengths[n - 1]);
            r->gen = 0;
            r->next = kk_runs;
            kk_runs = r;
            d = unsafeIRDirty_0_N(1, "kk_path_step", VG_(fnptr_to_fnentry)(&kk_path_step),
                                  mkIRExprVec_1(mkIRExpr_HWord((HWord)r)));
         } else {
            d = unsafeIRDirty_0_N(1, "kk_superblock",
                                  VG_(fnptr_to_fnentry)(&kk_superblock),
                                  mkIRExprVec_1(mkIRExpr_HWord((HWord)start)));
         }
         addStmtToIRSB(sb_out, IRStmt_Dirty(d));
         done = True;
      }
      addStmtToIRSB(sb_out, st);
   }
   return sb_out;
}

static Bool kk_process_cmd_line_option(const HChar* arg)
{
   if VG_INT_CLO(arg, "--out-fd", kk_out_fd) {}
   else if VG_BOOL_CLO(arg, "--exact", kk_exact) {}
   else if VG_BOOL_CLO(arg, "--data", kk_data) {}
   else if VG_XACT_CLO(arg, "--paths=no", kk_paths, KK_PATHS_OFF) {}
   else if VG_XACT_CLO(arg, "--paths=split", kk_paths, KK_PATHS_SPLIT) {}
   else if VG_XACT_CLO(arg, "--paths=through", kk_paths, KK_PATHS_THROUGH) {}
   else if VG_BINT_CLO(arg, "--paths-nodes", kk_max_nodes, 16, 1 << 22) {}
   else
      return False;
   return True;
}

static void kk_print_usage(void)
{
   VG_(printf)("    --out-fd=<number>         write the superblock stream to this fd [required]\n");
   VG_(printf)("    --exact=no|yes            add instruction lengths, side exits and signals [no]\n");
   VG_(printf)("    --data=no|yes             (with --exact) add every memory access's address [no]\n");
   VG_(printf)("    --paths=no|split|through  count paths between cuts in the tool (calls cut\n");
   VG_(printf)("                              them or not) instead of writing every entry [no]\n");
   VG_(printf)("    --paths-nodes=<number>    write the path trie out at this many nodes [4194304]\n");
}

static void kk_print_debug_usage(void)
{
   VG_(printf)("    (none)\n");
}

/* A forked child must not write the parent's buffered records (nor its own) into the
   parent's stream. */
static void kk_atfork_child(ThreadId tid)
{
   kk_fd = -1;
   kk_pos = KK_HEADER_BYTES;
}

/* Paths mode: a thread ends; its path in progress is counted as the stream's would be
   at the end (a later thread may get the same Valgrind thread id). */
static void kk_thread_exit(ThreadId tid)
{
   KKPathState* st = &kk_states[tid];
   Addr* seq = st->seq;
   if (!kk_gave_up && st->len != 0) {
      UInt path = kk_path_id(st->seq, st->len);
      if (kk_n_opens == kk_cap_opens) {
         kk_cap_opens = kk_cap_opens ? 2 * kk_cap_opens : 16;
         kk_opens = VG_(realloc)("kansoku.opens", kk_opens, kk_cap_opens * sizeof(KKOpen));
      }
      kk_opens[kk_n_opens].ktid = st->ktid;
      kk_opens[kk_n_opens].path = path;
      kk_n_opens++;
   }
   VG_(memset)(st, 0, sizeof(KKPathState));
   st->seq = seq;
}

static void kk_post_clo_init(void)
{
   if (kk_out_fd < 0)
      VG_(fmsg_bad_option)("--out-fd", "kansoku's tool needs --out-fd=N, the stream's file descriptor\n");
   kk_fd = VG_(safe_fd)((Int)kk_out_fd);
   if (kk_fd < 0)
      VG_(fmsg_bad_option)("--out-fd", "cannot use this file descriptor\n");
   VG_(atfork)(NULL, NULL, kk_atfork_child);
   if (kk_data && !kk_exact)
      VG_(fmsg_bad_option)("--data", "--data=yes needs --exact=yes\n");
   if (kk_exact)
      VG_(track_pre_deliver_signal)(kk_pre_deliver_signal);
   if (kk_paths && kk_exact)
      VG_(fmsg_bad_option)("--paths", "--paths counts paths; it does not go with --exact=yes\n");
   if (kk_paths) {
      kk_cap_tab = 1024;
      kk_tab = VG_(malloc)("kansoku.paths", kk_cap_tab * sizeof(KKPath));
      kk_n_tab = 1;
      kk_tab_mask = 4095;
      kk_tab_slots = VG_(calloc)("kansoku.pathslots", kk_tab_mask + 1, sizeof(UInt));
      kk_store_cap = 1 << 16;
      kk_store = VG_(malloc)("kansoku.store", kk_store_cap * sizeof(Addr));
      kk_states = VG_(calloc)("kansoku.states", VG_N_THREADS, sizeof(KKPathState));
      kk_cur = &kk_states[1];
      kk_cur->seq = VG_(malloc)("kansoku.seq", KK_MAX_DEPTH * sizeof(Addr));
      VG_(track_pre_thread_ll_exit)(kk_thread_exit);
   }
}

/* Paths mode: everything counted so far (the entries, every thread's open path, the trie
   ended by `end`), then the stream flushed. */
static void kk_write_paths(UChar end)
{
   if (kk_paths && !kk_gave_up) {
      kk_put_progress();
      kk_write_trie(end, True);
   }
   kk_flush();
}

/* Before an execve (which replaces the process without a fini): what the stream holds
   so far is flushed, and in paths mode a snapshot of the trie is written (0x17). */
static void kk_pre_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs)
{
   if (syscallno == 59 || syscallno == 322) /* execve, execveat (amd64) */
      kk_write_paths(0x17);
}

static void kk_post_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs, SysRes res)
{
}

static void kk_fini(Int exitcode)
{
   kk_write_paths(0x0f);
}

static void kk_pre_clo_init(void)
{
   VG_(details_name)("kansoku");
   VG_(details_version)("1");
   VG_(details_description)("superblock entries as a binary stream, for kansoku paths");
   VG_(details_copyright_author)("the kansoku authors");
   VG_(details_bug_reports_to)("the kansoku repository");
   VG_(details_avg_translation_sizeB)(200);
   VG_(basic_tool_funcs)(kk_post_clo_init, kk_instrument, kk_fini);
   VG_(needs_command_line_options)(kk_process_cmd_line_option, kk_print_usage, kk_print_debug_usage);
   VG_(track_start_client_code)(kk_start_client_code);
   VG_(needs_syscall_wrapper)(kk_pre_syscall, kk_post_syscall);
}

VG_DETERMINE_INTERFACE_VERSION(kk_pre_clo_init)
