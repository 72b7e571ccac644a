/* tools/stat.h: what accelaes-stat's main file (tools/accelaes-stat.c: opening, checking and
 * copying segments, signals, arguments) shares with its output (tools/stat_print.c). */
#ifndef ACCELAES_TOOLS_STAT_H
#define ACCELAES_TOOLS_STAT_H

#include <stdio.h>
#include <sys/types.h>
#include "scheduler/shm_layout.h"

/* Why a table was not read. Every one of them is an error exit: a table that was not read is never shown
 * as zeros (accelaes-stat's exit statuses: STAT_EXIT_*). */
enum { READ_OK = 0, REFUSED_NOT_FILE = 1, REFUSED_OPEN = 2, UNUSABLE = 3, ABSENT = 4 };
enum { STAT_EXIT_OK = 0, STAT_EXIT_UNREADABLE = 1, STAT_EXIT_USAGE = 2, STAT_EXIT_ABSENT = 3 };

typedef struct snapshot {
    char name[ACC_SHM_NAME_MAX + 1];  /* "/accelaes.<uid>" or $ACCELAES_SHM_NAME */
    uid_t uid;               /* the owner it must have: the uid in its name, or ours */
    int exists;              /* something is there under that name */
    int named;               /* the name came from $ACCELAES_SHM_NAME, not from the uid */
    int refused;             /* READ_OK, or why it was not read (REFUSED_*, UNUSABLE, ABSENT) */
    const char *error;       /* why it is not shown; NULL exactly when refused == READ_OK */
    char why[160];           /* storage for error */
    acc_shm_table *t;        /* private copy, valid when refused == READ_OK */
} snapshot;

/* "nobody (uid 65534)", or "uid 3000000000" for a uid without a passwd entry. */
const char *stat_who(uid_t uid, char *buf, size_t len);
/* One table as JSON (one object) or as text. */
void stat_print_json(FILE *out, const snapshot *s);
void stat_print_text(FILE *out, const snapshot *s);

#endif
