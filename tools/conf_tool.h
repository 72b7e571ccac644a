/* tools/conf_tool.h: what accelaes-conf's files share (tools/accelaes-conf.c, tools/conf_*.c).
 *
 * The tool adds accelaes to an existing openssl.cnf through one `.include` line at its end. The
 * plan is a list of (section, key, value) settings computed from that file as libcrypto's own
 * parser sees it; the snippet is the plan written out, and the same list checks the result. */
#ifndef ACCELAES_TOOLS_CONF_TOOL_H
#define ACCELAES_TOOLS_CONF_TOOL_H

#include <stddef.h>
#include <sys/stat.h>
#include <openssl/conf.h>

#define CT_FILE_MAX    (1u << 20)   /* a configuration larger than 1 MiB is refused */
#define CT_NAME_MAX    128          /* a section name we write or copy */
#define CT_VALUE_MAX   1024         /* a value we copy into the snippet */
#define CT_MAX_SET     64           /* settings in one plan */
#define CT_SNIPPET_HEAD "# written by accelaes-conf"   /* the snippet's first words: disable checks them */

/* A file's bytes (NUL-terminated copy) and what fstat said when it was read. */
typedef struct ct_text {
    char *buf;
    size_t len;
    struct stat st;
} ct_text;

typedef struct ct_setting {
    char sect[CT_NAME_MAX], key[CT_NAME_MAX], value[CT_VALUE_MAX];
} ct_setting;

typedef struct ct_plan {
    ct_setting set[CT_MAX_SET];
    int n;
    const char *module;      /* --module PATH, or NULL: OPENSSL_MODULES, else MODULESDIR */
    char summary[512];       /* which of the file's sections were used, for the user */
} ct_plan;

/* conf_file.c: bounded reading, the marked line, atomic replacement. */
int ct_read_file(const char *path, ct_text *t);
void ct_text_free(ct_text *t);
CONF *ct_parse(const char *label, const char *buf, size_t len);
int ct_snippet_path(const char *real, char *out, size_t cap);
int ct_strip_line(const char *path, const ct_text *t, const char *snippet, char **base, size_t *blen, int *found);
int ct_append_line(const char *base, size_t blen, const char *snippet, char **out, size_t *olen);
int ct_temp_beside(const char *path, const char *data, size_t len, const struct stat *like, char *tmp, size_t cap);
int ct_replace_file(const char *path, const char *data, size_t len, const struct stat *like,
                    const struct stat *expect);

/* conf_plan.c: the plan, the snippet text, the check of a merged configuration, the dump. */
int ct_plan_build(const CONF *c, ct_plan *p);
char *ct_plan_render(const ct_plan *p, const char *for_file); /* for_file NULL: a whole file (program) */
int ct_plan_add(ct_plan *p, const char *sect, const char *key, const char *value);
int ct_plan_check(const CONF *orig, const CONF *merged, const ct_plan *p);
void ct_dump(const CONF *c);

int ct_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
