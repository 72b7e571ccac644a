/* scheduler/forksafe.c: the one pthread_atfork handler set for every mutex registered with
 * ACC_FORK_SAFE (scheduler/forksafe.h). */
#include "scheduler/forksafe.h"

/* The linker defines these for the section when at least one entry exists; weak, so a module
 * with none still links. */
extern const acc_fork_lock_reg *const __start_acc_fork_locks[] __attribute__((weak));
extern const acc_fork_lock_reg *const __stop_acc_fork_locks[] __attribute__((weak));

#define MAX_REGS 32

static const acc_fork_lock_reg *sorted[MAX_REGS];
static size_t nsorted;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void lock_all(const acc_fork_lock_reg *r)
{
    for (size_t i = 0; i < r->n; i++)
        pthread_mutex_lock(&r->m[i]);
}

static void unlock_all(const acc_fork_lock_reg *r)
{
    for (size_t i = r->n; i-- > 0;)
        pthread_mutex_unlock(&r->m[i]);
}

static void prepare(void)
{
    for (size_t i = 0; i < nsorted; i++)
        if (sorted[i]->mode == ACC_FORK_HOLD)
            lock_all(sorted[i]);
}

static void parent(void)
{
    for (size_t i = nsorted; i-- > 0;)
        if (sorted[i]->mode == ACC_FORK_HOLD)
            unlock_all(sorted[i]);
}

/* The forking thread holds every HOLD lock (it took them in prepare), so it may release them. */
static void child(void)
{
    for (size_t i = nsorted; i-- > 0;) {
        const acc_fork_lock_reg *r = sorted[i];
        if (r->mode == ACC_FORK_HOLD) {
            unlock_all(r);
        } else {
            for (size_t k = 0; k < r->n; k++)
                pthread_mutex_init(&r->m[k], NULL);
        }
    }
}

static void install(void)
{
    const acc_fork_lock_reg *const *p = __start_acc_fork_locks, *const *end = __stop_acc_fork_locks;

    /* Insertion sort by rank: a dozen entries, once per process. */
    for (; p != NULL && p < end && nsorted < MAX_REGS; p++) {
        size_t j = nsorted++;
        while (j > 0 && sorted[j - 1]->rank > (*p)->rank) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = *p;
    }
    (void)pthread_atfork(prepare, parent, child);
}

void acc_fork_install(void)
{
    pthread_once(&install_once, install);
}

size_t acc_fork_lock_count(void)
{
    acc_fork_install();
    return nsorted;
}

const acc_fork_lock_reg *acc_fork_lock_at(size_t i)
{
    acc_fork_install();
    return i < nsorted ? sorted[i] : NULL;
}
