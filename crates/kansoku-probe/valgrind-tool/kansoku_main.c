/* kansoku's Valgrind tool: the guest start address of every executed superblock, as a
   compact binary stream on a file descriptor (seed 003's block source).

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
     `prev` is 0 at the start of every frame, so each frame decodes on its own.
   A module record is written when a translation first meets code of an object Valgrind has
   loaded, i.e. always before that object's first superblock entry in the stream.
   A thread record is written whenever Valgrind's scheduler starts running client code of a
   thread other than the last one (the `start_client_code` event), the first one before
   the main thread's first superblock. Valgrind runs one thread at a time, each guest
   thread on its own kernel thread, so every superblock entry belongs to the thread of the
   last thread record before it.

   Options: --out-fd=N (required) is where the frames go. */

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

static Long kk_out_fd = -1;
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
   if (gWordTy != hWordTy)
      VG_(tool_panic)("host/guest word size mismatch");
   sb_out = deepCopyIRSBExceptStmts(sb_in);
   for (i = 0; i < sb_in->stmts_used; i++) {
      IRStmt* st = sb_in->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
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
   else
      return False;
   return True;
}

static void kk_print_usage(void)
{
   VG_(printf)("    --out-fd=<number>         write the superblock stream to this fd [required]\n");
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
