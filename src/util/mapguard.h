/* Guards read-only file mappings against SIGBUS. A mapped file that is truncated (or emptied
 * by a rewrite in place) raises SIGBUS on the next touch of a page past its new end, which
 * would kill the whole process. Registered mappings are covered by a SIGBUS handler: a fault
 * inside one replaces the whole range with anonymous zero pages (MAP_FIXED) and marks it
 * faulted, so the faulting instruction retries, reads zeros and the computation finishes; its
 * owner sees mapguard_has_faulted() and discards the result. A SIGBUS anywhere else keeps the
 * default action (the process dies with a core, as before). Not a general fault handler:
 * SIGSEGV is untouched. */
#ifndef UTIL_MAPGUARD_H
#define UTIL_MAPGUARD_H

#include <stdbool.h>
#include <stddef.h>

#define MAPGUARD_CAP 256 // mappings guarded at once; further ones are left unguarded

/* Installs the process's SIGBUS handler. ERR_OK or ERR_IO (sigaction failed). Call once at
 * start-up, before threads start; calling again is a no-op. Until it is called, registered
 * mappings are only tracked (a fault kills the process as without the guard). */
int mapguard_install(void);

/* Registers the mapping [base, base + len) (base from mmap, so page-aligned). Returns its slot
 * (>= 0), or -1 when MAPGUARD_CAP mappings are registered (the mapping is then unguarded).
 * Thread-safe. */
int mapguard_add(const void *base, size_t len);

/* Forgets slot (call before unmapping; -1 is a no-op). Thread-safe; the mapping must not be
 * in use by another thread. */
void mapguard_remove(int slot);

/* True once a SIGBUS hit slot's mapping (its contents are zeros from then on). -1: false.
 * Thread-safe, lock-free. */
bool mapguard_has_faulted(int slot);

#endif
