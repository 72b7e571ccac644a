/* accel/cuda/regcache.h: a cache of host memory registrations (pinned for DMA) of callers' buffers,
 * so that a buffer used again is not registered again. Plain C, no CUDA: the plugin hands in the
 * register / unregister calls, and tests/c/test_regcache.c drives it with its own.
 *
 * The guarantee: a cached registration is never used after any page of it was unmapped or replaced.
 * A pinned registration keeps the pages it pinned, while the caller's address may come to name other
 * pages (free + malloc again at the same address, munmap + mmap, mremap, madvise(MADV_DONTNEED)): DMA
 * through the old entry would read or write memory the caller no longer sees. The cache watches every
 * range it holds with a userfaultfd that reports unmap, remove and remap events (registered in
 * write-protect mode and never write-protected, so no fault ever reaches it). The kernel holds the
 * caller's munmap / madvise / mremap until the event is read, and the monitor thread reads it only
 * while it holds the cache lock, then drops every entry the event touches before it lets go of the
 * lock: by the time such a call returns, no lookup can find the entry. A range that cannot be watched
 * (no userfaultfd, a file mapping, a range already watched by someone else) is never cached: the
 * caller registers it for the one request (acc_rc_get returns NULL).
 * Shared mappings and file mappings are never cached either (another process may truncate or punch
 * them with no event here): only private anonymous memory (heap, stacks, anonymous mmap).
 * Each lookup first waits (briefly, reading the events itself) while an unmap of a watched range is
 * between its change and its event: another thread may already have new memory at the old address.
 * The window left (regcache.cu says more): madvise(MADV_DONTNEED / MADV_FREE) reports before it
 * discards, so a lookup racing the discard of the same pages may cache pages about to go; only a
 * caller that discards a buffer while handing it to the cipher from another thread gets there.
 *
 * For the plugin:
 * - The callbacks run on the caller's thread, outside the cache lock, and may allocate, free and call
 *   the driver; they must not call back into the cache. The driver refuses overlapping registrations,
 *   so the cache keeps its entries disjoint: a request that overlaps a held entry without being
 *   covered by it (or that needs it writable when it is not) gets NULL. A request whose input and
 *   output share a page asks once, for the hull of both.
 * - Entries are per process. In a forked child acc_rc_get returns NULL, acc_rc_put does nothing and
 *   acc_rc_destroy frees only memory (no callback, no ioctl): the registrations are the parent's.
 * - acc_rc_create makes the userfaultfd(2) system call and starts a thread: call it lazily, where the
 *   GPU path is taken (a seccomp filter may kill on an unexpected system call).
 * - A signal handler that unmaps a watched range while its thread is inside acc_rc_get / put would
 *   wait for the cache lock that thread holds: do not unmap cached buffers from signal handlers.
 */
#ifndef ACCELAES_CUDA_REGCACHE_H
#define ACCELAES_CUDA_REGCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Pin [base, base + len) (page aligned) for DMA; 0 on success. writable: the device will write it. */
typedef int (*acc_rc_reg_fn)(void *ctx, void *base, size_t len, int writable);
/* Undo acc_rc_reg_fn for exactly that range. */
typedef void (*acc_rc_unreg_fn)(void *ctx, void *base, size_t len);

typedef struct acc_rc_stats {
    uint64_t hits, misses;      /* lookups served by an entry / that registered a new one */
    uint64_t uncached;          /* lookups refused (range not watchable, cache off, registration failed) */
    uint64_t invalidated;       /* entries dropped because their memory was unmapped or replaced */
    uint64_t evicted;           /* entries dropped to stay within the limits */
    uint64_t entries, bytes;    /* held now */
} acc_rc_stats;

typedef struct acc_rc_entry acc_rc_entry;   /* opaque outside regcache.cu */
typedef struct acc_rc acc_rc;               /* opaque outside regcache.cu */

/* Start a cache holding at most max_entries registrations and max_bytes pinned bytes. Returns NULL
 * (and a reason in why) where it cannot watch memory: then every lookup is the caller's to register. */
acc_rc *acc_rc_create(size_t max_entries, size_t max_bytes, acc_rc_reg_fn reg, acc_rc_unreg_fn unreg, void *ctx,
                      char *why, size_t whylen);
/* A registration covering [p, p + len), found or made (page rounded), held until acc_rc_put: it is not
 * unregistered while held, even if invalidated meanwhile (then at the put). NULL: not cacheable, the
 * caller registers it itself for the request. acc_rc_entry_base / _len: the registered range, which
 * may be larger than asked (page rounding, or grown over neighbouring entries it replaced). */
acc_rc_entry *acc_rc_get(acc_rc *c, const void *p, size_t len, int writable);
void acc_rc_put(acc_rc *c, acc_rc_entry *e);
void *acc_rc_entry_base(const acc_rc_entry *e);
size_t acc_rc_entry_len(const acc_rc_entry *e);
void acc_rc_get_stats(acc_rc *c, acc_rc_stats *out);
/* Unregister everything, stop watching, free (no entry may be held). */
void acc_rc_destroy(acc_rc *c);

#endif
