/* Makes this process see an AVX2 CPU without AVX-512, AVX-VNNI or AMX, so that onnxruntime's
 * MLAS (which picks its kernels from CPUID) runs its AVX2 kernels on an AVX-512 machine: the
 * zoo's AVX2 goldens (golden/zoo/) can then be made here. LD_PRELOAD it (see run.sh).
 *
 * Mechanism: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID 0, CPU flag `cpuid_fault`) makes
 * every CPUID instruction of this process raise SIGSEGV; the handler runs the real CPUID with
 * faulting briefly off, clears the feature bits below, writes the registers and steps over the
 * two instruction bytes. The setting is per thread and inherited by the threads started later.
 * XGETBV is not touched: MLAS uses AVX-512 only when CPUID also reports it.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static int set_cpuid_faulting(int on) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, on ? 0 : 1); }

/* leaf 7 subleaf 0: EBX AVX512F/DQ/IFMA/PF/ER/CD/BW/VL; ECX AVX512_VBMI/VBMI2/VNNI/BITALG/
 * VPOPCNTDQ; EDX AVX512_4VNNIW/4FMAPS/VP2INTERSECT, AMX-BF16, AVX512_FP16, AMX-TILE, AMX-INT8.
 * leaf 7 subleaf 1: EAX AVX-VNNI, AVX512_BF16, AMX-FP16, AVX-IFMA; EDX AVX-VNNI-INT8. */
#define B(n) (1u << (n))
static const uint32_t L7S0_EBX = B(16) | B(17) | B(21) | B(26) | B(27) | B(28) | B(30) | B(31);
static const uint32_t L7S0_ECX = B(1) | B(6) | B(11) | B(12) | B(14);
static const uint32_t L7S0_EDX = B(2) | B(3) | B(8) | B(22) | B(23) | B(24) | B(25);
static const uint32_t L7S1_EAX = B(4) | B(5) | B(21) | B(23);
static const uint32_t L7S1_EDX = B(4);

static void on_sigsegv(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *r = uc->uc_mcontext.gregs;
    const uint8_t *ip = (const uint8_t *)r[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2) {  /* not CPUID: a real fault, die as one */
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)r[REG_RAX], sub = (uint32_t)r[REG_RCX], a, b, c, d;
    set_cpuid_faulting(0);
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(leaf), "c"(sub));
    set_cpuid_faulting(1);
    if (leaf == 7 && sub == 0) { b &= ~L7S0_EBX; c &= ~L7S0_ECX; d &= ~L7S0_EDX; }
    if (leaf == 7 && sub == 1) { a &= ~L7S1_EAX; d &= ~L7S1_EDX; }
    r[REG_RAX] = a; r[REG_RBX] = b; r[REG_RCX] = c; r[REG_RDX] = d;
    r[REG_RIP] += 2;
    (void)sig; (void)info;
}

__attribute__((constructor)) static void mask_cpu(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsegv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    if (set_cpuid_faulting(1) != 0) {
        perror("avx2_cpu: arch_prctl(ARCH_SET_CPUID) (no cpuid_fault on this CPU?)");
        exit(2);
    }
}
