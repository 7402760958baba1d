/* Run a program on this CPU as if it had no AVX-512, VNNI or AMX: the kernels that libraries
 * pick on an AVX2-only CPU (AMD EPYC Rome/Milan, older Xeons) then run here, natively.
 *
 *   bench/as-avx2 python bench/tts.py --engines kokoro
 *
 * Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, flag `cpuid_fault` in /proc/cpuinfo) makes
 * every CPUID instruction of the process trap; the SIGSEGV handler runs the real CPUID with
 * faulting briefly off, clears the AVX-512 / VNNI / AMX feature bits (and their XSAVE state
 * bits) and returns. Loaded with LD_PRELOAD, so forked workers inherit it and exec'd children
 * load it again. What it emulates is the instruction sets a library dispatches on, not another
 * microarchitecture: timings are this CPU's running AVX2 code, not an EPYC's.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static int set_cpuid(int enabled) { return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void on_segv(int sig, siginfo_t *si, void *raw) {
    ucontext_t *ctx = raw;
    greg_t *r = ctx->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    (void)si;
    if (ip[0] != 0x0f || ip[1] != 0xa2) { /* a real fault: die as the program would have */
        signal(sig, SIG_DFL);
        return;
    }
    unsigned leaf = (unsigned)r[REG_RAX], sub = (unsigned)r[REG_RCX], a, b, c, d;
    set_cpuid(1);
    __cpuid_count(leaf, sub, a, b, c, d);
    set_cpuid(0);
    if (leaf == 7 && sub == 0) {
        /* EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31 */
        b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        /* ECX: VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14 */
        c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        /* EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, AVX512-FP16 23, AMX-TILE 24, AMX-INT8 25 */
        d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
    } else if (leaf == 7 && sub == 1) {
        a &= ~((1u << 4) | (1u << 5)); /* AVX-VNNI 4, AVX512-BF16 5 */
    } else if (leaf == 0xd && sub == 0) {
        a &= ~(0xe0u | (3u << 17)); /* XSAVE state: opmask, ZMM_Hi256, Hi16_ZMM; AMX tile config/data */
    }
    r[REG_RAX] = a;
    r[REG_RBX] = b;
    r[REG_RCX] = c;
    r[REG_RDX] = d;
    r[REG_RIP] += 2;
}

__attribute__((constructor)) static void mask_cpuid(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    if (set_cpuid(0) != 0) {
        fprintf(stderr, "cpuid_mask: this kernel or CPU has no CPUID faulting (no cpuid_fault flag)\n");
        exit(3);
    }
}
