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
 * caller registers it itself for the request. base_out: the registered range's start. */
acc_rc_entry *acc_rc_get(acc_rc *c, const void *p, size_t len, int writable);
void acc_rc_put(acc_rc *c, acc_rc_entry *e);
void acc_rc_get_stats(acc_rc *c, acc_rc_stats *out);
/* Unregister everything, stop watching, free (no entry may be held). */
void acc_rc_destroy(acc_rc *c);

#endif
