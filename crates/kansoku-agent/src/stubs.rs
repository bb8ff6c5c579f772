//! The two hand-written stubs every probe goes through, and the agent's own calibration
//! routine.
//!
//! A probed function's first bytes are a `jmp` to its trampoline, which pushes the entry
//! point's id and jumps to [`entry_stub`]. Every register is kept, not only those the
//! ABI says a callee may read: compilers with interprocedural register allocation (gcc's
//! `-fipa-ra`, on at `-O2`) keep a caller's values in call-clobbered registers across a
//! call to a function they know leaves them alone, and the patched function is still that
//! function to them. So the stubs save all nine call-clobbered general registers and
//! `xmm0`–`xmm15` (the handlers are SSE-only Rust: the upper halves of `ymm`/`zmm`, the
//! x87 stack and the AVX-512 masks are never touched). The stub calls the Rust handler
//! with the point and the address of the return address, and jumps into the
//! trampoline's copy of the overwritten instructions, which jumps back into the function.
//!
//! To see the exit the handler replaces the return address with [`exit_stub`]; the
//! function's `ret` lands there. The stub keeps every register again, asks the handler for
//! the real return address (popped off the thread's shadow stack) and returns to it.

use core::arch::global_asm;

global_asm!(
    ".text",
    // xmm0–xmm15 to and from the 256 bytes at rsp
    ".macro kansoku_save_vectors",
    "movdqu [rsp+0], xmm0",
    "movdqu [rsp+16], xmm1",
    "movdqu [rsp+32], xmm2",
    "movdqu [rsp+48], xmm3",
    "movdqu [rsp+64], xmm4",
    "movdqu [rsp+80], xmm5",
    "movdqu [rsp+96], xmm6",
    "movdqu [rsp+112], xmm7",
    "movdqu [rsp+128], xmm8",
    "movdqu [rsp+144], xmm9",
    "movdqu [rsp+160], xmm10",
    "movdqu [rsp+176], xmm11",
    "movdqu [rsp+192], xmm12",
    "movdqu [rsp+208], xmm13",
    "movdqu [rsp+224], xmm14",
    "movdqu [rsp+240], xmm15",
    ".endm",
    ".macro kansoku_restore_vectors",
    "movdqu xmm0, [rsp+0]",
    "movdqu xmm1, [rsp+16]",
    "movdqu xmm2, [rsp+32]",
    "movdqu xmm3, [rsp+48]",
    "movdqu xmm4, [rsp+64]",
    "movdqu xmm5, [rsp+80]",
    "movdqu xmm6, [rsp+96]",
    "movdqu xmm7, [rsp+112]",
    "movdqu xmm8, [rsp+128]",
    "movdqu xmm9, [rsp+144]",
    "movdqu xmm10, [rsp+160]",
    "movdqu xmm11, [rsp+176]",
    "movdqu xmm12, [rsp+192]",
    "movdqu xmm13, [rsp+208]",
    "movdqu xmm14, [rsp+224]",
    "movdqu xmm15, [rsp+240]",
    ".endm",
    // the nine call-clobbered general registers, pushed and popped in this order
    ".macro kansoku_push_scratch",
    "push rax",
    "push rcx",
    "push rdx",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    ".endm",
    ".macro kansoku_pop_scratch",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rdi",
    "pop rsi",
    "pop rdx",
    "pop rcx",
    "pop rax",
    ".endm",
    ".p2align 4",
    ".globl kansoku_agent_entry_stub",
    ".hidden kansoku_agent_entry_stub",
    ".type kansoku_agent_entry_stub,@function",
    "kansoku_agent_entry_stub:",
    // [rsp] = the point (pushed by the trampoline), [rsp+8] = the return address; rsp ≡ 0
    // (mod 16). Nine pushes and 264 bytes (sixteen xmm registers and a spare slot at
    // [rsp+256]) keep it aligned.
    "kansoku_push_scratch",
    "sub rsp, 264",
    "kansoku_save_vectors",
    "mov rdi, [rsp+336]",
    "lea rsi, [rsp+344]",
    "call {on_entry}",
    // rax: the continuation, which takes the point's place; rdx: where the entry's time
    // stamp goes (0: the handler stamped it, or there is no record)
    "mov [rsp+336], rax",
    "mov [rsp+256], rdx",
    // When the handler put the exit stub in the return address, the function's `ret` will
    // go there while the return stack buffer predicts the caller: a mispredicted return on
    // every call, which a long routine hides behind its own work and an empty one does not
    // (the calibration then subtracted ~8 ns more than such a routine carries). A `call`
    // whose next instruction is the exit stub pushes the stub onto the buffer, so the
    // `ret` is predicted; the exit stub leaves by `ret` to pop the caller's entry again.
    "lea rax, [rip + kansoku_agent_exit_stub]",
    "cmp [rsp+344], rax",
    "jne 3f",
    "jmp kansoku_agent_rsb_prime",
    "kansoku_agent_entry_primed:",
    "3:",
    "kansoku_restore_vectors",
    // The time stamp as late as can be: after the handler and the vector registers, so
    // that little of the probe's own work falls inside the call it times.
    // `rdtsc` does not wait for anything: without the `lfence` after it the function's
    // first instructions would start before the counter is read, and be left out.
    // A point without an exit (a marker, an event) stamps when it was hit, not a call's
    // duration: the handler sets bit 0 of the stamp's address (records are 8-byte
    // aligned), and the `lfence` is skipped (on this VM `rdtsc` + `lfence` is ≈ 50 ns,
    // `rdtsc` alone ≈ 27 ns: the lfence was a fifth of a marker hit, issue 42).
    "mov rcx, [rsp+256]",
    "test rcx, rcx",
    "jz 2f",
    "rdtsc",
    "test cl, 1",
    "jnz 4f",
    "lfence",
    "4:",
    "and rcx, -2",
    "shl rdx, 32",
    "or rax, rdx",
    "mov [rcx], rax",
    "2:",
    "add rsp, 264",
    "kansoku_pop_scratch",
    // Not `ret`: that would pop the return-stack-buffer entry of the probed call and make
    // every return above it mispredict. The slot just left is in the red zone, which
    // signal delivery skips, so it still holds the continuation.
    "lea rsp, [rsp+8]",
    "jmp qword ptr [rsp-8]",
    ".size kansoku_agent_entry_stub, .-kansoku_agent_entry_stub",
    "",
    // The priming `call`: five bytes that end exactly where the exit stub begins (no
    // alignment between them), so the address it pushes is the exit stub's.
    ".p2align 4",
    "kansoku_agent_rsb_prime:",
    "call kansoku_agent_rsb_landing",
    ".globl kansoku_agent_exit_stub",
    ".hidden kansoku_agent_exit_stub",
    ".type kansoku_agent_exit_stub,@function",
    "kansoku_agent_exit_stub:",
    // Reached by `ret`: rsp ≡ 0 (mod 16). A slot for the real return address, then rax
    // and rdx, and the time stamp first of all (as early as can be); then the other seven
    // registers and sixteen xmm registers: 336 bytes, rsp ≡ 0 again at the call.
    // `lfence` first: `rdtsc` alone reads the counter while the function's last
    // instructions may still be executing (a long dependent chain is still in flight at
    // its `ret`): such calls measured 7 % short.
    "push rax",
    "push rax",
    "push rdx",
    "lfence",
    "rdtsc",
    "shl rdx, 32",
    "or rax, rdx",
    "push rcx",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "sub rsp, 256",
    "kansoku_save_vectors",
    // the stack pointer as the function's `ret` left it, and the time stamp
    "lea rdi, [rsp+336]",
    "mov rsi, rax",
    "call {on_exit}",
    "mov [rsp+328], rax",
    "kansoku_restore_vectors",
    "add rsp, 256",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rdi",
    "pop rsi",
    "pop rcx",
    "pop rdx",
    "pop rax",
    // `ret`: pops the caller's entry of the return stack buffer (the entry stub pushed
    // this stub's above it), so the return to the caller is predicted too.
    "ret",
    ".size kansoku_agent_exit_stub, .-kansoku_agent_exit_stub",
    // Where the priming call lands: drop the address it pushed, back into the entry stub.
    "kansoku_agent_rsb_landing:",
    "lea rsp, [rsp+8]",
    "jmp kansoku_agent_entry_primed",
    "",
    // The calibration routine: a five-byte nop (room for the patch, no branch target
    // inside) and a return. Probing it measures exactly what a probe adds to a call.
    ".p2align 4",
    ".globl kansoku_agent_empty",
    ".hidden kansoku_agent_empty",
    ".type kansoku_agent_empty,@function",
    "kansoku_agent_empty:",
    ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
    "ret",
    ".size kansoku_agent_empty, .-kansoku_agent_empty",
    "",
    // The loader's notification (`_dl_debug_state`, reached by a jump over its first
    // bytes, see `crate::hook_loader`): rsp ≡ 8 (mod 16) as at any function's entry. Every
    // call-clobbered register is kept, as for the probes (the loader's callers may rely
    // on an empty function leaving them alone): nine pushes and 256 bytes, rsp ≡ 0 at the
    // call.
    ".p2align 4",
    ".globl kansoku_agent_load_stub",
    ".hidden kansoku_agent_load_stub",
    ".type kansoku_agent_load_stub,@function",
    "kansoku_agent_load_stub:",
    "kansoku_push_scratch",
    "sub rsp, 256",
    "kansoku_save_vectors",
    "call {on_load}",
    "kansoku_restore_vectors",
    "add rsp, 256",
    "kansoku_pop_scratch",
    "ret",
    ".size kansoku_agent_load_stub, .-kansoku_agent_load_stub",
    "",
    // This thread's slot for the address of its state (see `crate::state`): static TLS,
    // reached initial-exec (`%fs` plus a GOT offset), never through `__tls_get_addr`.
    ".section .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".globl kansoku_agent_tls",
    ".hidden kansoku_agent_tls",
    ".type kansoku_agent_tls,@object",
    ".size kansoku_agent_tls, 8",
    "kansoku_agent_tls:",
    ".zero 8",
    ".text",
    on_entry = sym crate::on_entry,
    on_exit = sym crate::on_exit,
    on_load = sym crate::on_load,
);

extern "C" {
    pub fn kansoku_agent_entry_stub();
    pub fn kansoku_agent_exit_stub();
    pub fn kansoku_agent_empty();
    pub fn kansoku_agent_load_stub();
}

/// Size of [`kansoku_agent_empty`] in bytes (the nop and the `ret`).
pub const EMPTY_SIZE: u64 = 6;
