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

   Options: --out-fd=N (required) is where the frames go; --exact=yes adds the records
   an exact trace needs; --data=yes (with --exact=yes) adds every memory access's address,
   as Lackey's --trace-mem does, for the waveform's data addresses. */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_machine.h"
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
   if (kk_exact) {
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
      if (n > 0)
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
         d = unsafeIRDirty_0_N(1, "kk_superblock",
                               VG_(fnptr_to_fnentry)(&kk_superblock),
                               mkIRExprVec_1(mkIRExpr_HWord((HWord)start)));
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
   else
      return False;
   return True;
}

static void kk_print_usage(void)
{
   VG_(printf)("    --out-fd=<number>         write the superblock stream to this fd [required]\n");
   VG_(printf)("    --exact=no|yes            add instruction lengths, side exits and signals [no]\n");
   VG_(printf)("    --data=no|yes             (with --exact) add every memory access's address [no]\n");
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
}

static void kk_fini(Int exitcode)
{
   kk_flush();
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
}

VG_DETERMINE_INTERFACE_VERSION(kk_pre_clo_init)
