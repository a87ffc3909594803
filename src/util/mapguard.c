/* SIGBUS guard for read-only file mappings (see mapguard.h for why). The table is a fixed array
 * of lock-free atomics, the only state a signal handler may read. */
#define _GNU_SOURCE // MAP_ANONYMOUS
#include "util/mapguard.h"

#include "util/err.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A slot is live while base != 0. Written by add/remove, read by the handler. */
static _Atomic uintptr_t g_base[MAPGUARD_CAP];
static _Atomic size_t g_len[MAPGUARD_CAP]; // page-rounded
static atomic_bool g_used[MAPGUARD_CAP];
static atomic_bool g_faulted[MAPGUARD_CAP];
static atomic_bool g_installed;
static size_t g_page = 4096;    // set by install, before any thread starts
static struct sigaction g_prev; // the handler before ours: faults outside our mappings

/* Not ours: hand the fault to whoever handled SIGBUS before (a sanitizer's reporter), or
 * restore the default action, so the retried access (or, for a SIGBUS sent with kill, the
 * signal raised again and delivered once this handler returns) kills the process with a
 * core. */
static void pass_on(int sig, siginfo_t *info, void *uctx)
{
    if ((g_prev.sa_flags & SA_SIGINFO) && g_prev.sa_sigaction) {
        g_prev.sa_sigaction(sig, info, uctx);
        return;
    }
    if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
        g_prev.sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &dfl, NULL);
    raise(sig);
}

/* Runs on the faulting thread. mmap is not on POSIX's async-signal-safe list, but on Linux it
 * is a bare system call that takes no user-space lock, which is what the list guards against;
 * JVMs handle faults on mapped files the same way. */
static void on_sigbus(int sig, siginfo_t *info, void *uctx)
{
    uintptr_t addr = (uintptr_t)info->si_addr;
    // si_code > 0: the kernel's, for a fault at si_addr; a signal sent by a process has none.
    for (int i = 0; info->si_code > 0 && i < MAPGUARD_CAP; i++) {
        uintptr_t base = atomic_load(&g_base[i]);
        size_t len = atomic_load(&g_len[i]);
        if (!base || addr < base || addr - base >= len) continue;
        // The whole range, not just the page: the rest of the file is as stale, and the
        // zero page costs no memory. Another thread faulting meanwhile maps it again: harmless.
        void *p =
            mmap((void *)base, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (p == MAP_FAILED) break;
        atomic_store(&g_faulted[i], true);
        return;
    }
    pass_on(sig, info, uctx);
}

int mapguard_install(void)
{
    bool was = false;
    if (!atomic_compare_exchange_strong(&g_installed, &was, true)) return ERR_OK;
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0) g_page = (size_t)page;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_prev) != 0) {
        atomic_store(&g_installed, false);
        return ERR_IO;
    }
    return ERR_OK;
}

int mapguard_add(const void *base, size_t len)
{
    if (!base || len == 0) return -1;
    size_t rounded = len + (g_page - len % g_page) % g_page;
    if (rounded < len) return -1; // cannot happen for a real mapping
    for (int i = 0; i < MAPGUARD_CAP; i++) {
        bool was = false;
        if (!atomic_compare_exchange_strong(&g_used[i], &was, true)) continue;
        atomic_store(&g_faulted[i], false);
        atomic_store(&g_len[i], rounded);
        atomic_store(&g_base[i], (uintptr_t)base); // live from here
        return i;
    }
    return -1;
}

void mapguard_remove(int slot)
{
    if (slot < 0 || slot >= MAPGUARD_CAP) return;
    atomic_store(&g_base[slot], 0);
    atomic_store(&g_len[slot], 0);
    atomic_store(&g_faulted[slot], false);
    atomic_store(&g_used[slot], false);
}

bool mapguard_has_faulted(int slot)
{
    if (slot < 0 || slot >= MAPGUARD_CAP) return false;
    return atomic_load(&g_faulted[slot]);
}
