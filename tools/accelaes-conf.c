/* tools/accelaes-conf.c: adds accelaes to an existing openssl.cnf and keeps every other section
 * of it ([req], [ca], [new_oids]...), which a program run with OPENSSL_CONF=accelaes.cnf loses.
 *
 * FILE (default: the file OpenSSL itself loads, $OPENSSL_CONF else OPENSSLDIR/openssl.cnf) is
 * parsed by libcrypto, and a snippet fitted to its own section names (conf_plan.c) is written
 * beside the real file (a symlink such as Debian's /usr/lib/ssl/openssl.cnf is followed, never
 * replaced) as <name>-accelaes.cnf, mode 0644. FILE gets one marked .include line at its end,
 * through a temporary file and rename with FILE's mode and owner. Before anything is written the
 * result is parsed with the snippet at a temporary name and checked: every planned key present,
 * every other key of FILE unchanged. enable twice changes nothing; disable gives FILE back byte
 * for byte. `program` prints a whole configuration for one program's OPENSSL_CONF instead (the
 * plan for an empty file), with the module named by its absolute path. Exit status: 0, 1 for an error (nothing written), 2 for a usage error, and for status
 * 3 when not enabled. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include "tools/conf_tool.h"

#define EXIT_USAGE 2
#define EXIT_NOT_ENABLED 3

typedef struct target {
    char real[PATH_MAX], snippet[PATH_MAX];
    ct_text t;           /* FILE as it is */
    char *base;          /* FILE without accelaes-conf's line */
    size_t blen;
    int found;           /* FILE has that line */
} target;

static void usage(FILE *f)
{
    fputs("usage: accelaes-conf COMMAND [--system FILE] [--module PATH]\n"
          "  program   print a whole configuration for one program (OPENSSL_CONF=that file, no\n"
          "            OPENSSL_MODULES) naming the module by absolute path: PATH, else the\n"
          "            accelaes.so beside this program (a build tree), else MODULESDIR's\n"
          "  snippet   print what enable would include, fitted to FILE's sections\n"
          "  enable    write it beside FILE as NAME-accelaes.cnf and include it at FILE's end\n"
          "  disable   remove that line and that file (FILE comes back byte for byte)\n"
          "  status    say whether FILE offloads through accelaes: exit 0 yes, 3 no, 1 broken or stale\n"
          "  dump      every section and key of FILE as libcrypto parses it\n"
          "FILE: the configuration to edit, by default the one OpenSSL loads ($OPENSSL_CONF, else\n"
          "`openssl version -d`/openssl.cnf). PATH: an absolute accelaes.so for the snippet (by default\n"
          "OpenSSL looks in $OPENSSL_MODULES, else in MODULESDIR, `openssl version -m`).\n"
          "Node.js reads only its nodejs_conf section unless started with --openssl-shared-config\n"
          "(docs/transparent-offload.md).\n",
          f);
}

static int open_target(const char *file, target *tg)
{
    memset(tg, 0, sizeof(*tg));
    if (realpath(file, tg->real) == NULL)
        return ct_fail("%s: %s", file, strerror(errno));
    if (ct_read_file(tg->real, &tg->t) != 0 || ct_snippet_path(tg->real, tg->snippet, sizeof(tg->snippet)) != 0)
        return -1;
    return ct_strip_line(tg->real, &tg->t, tg->snippet, &tg->base, &tg->blen, &tg->found);
}

static void close_target(target *tg)
{
    ct_text_free(&tg->t);
    free(tg->base);
}

/* The plan and the snippet's text for FILE without accelaes-conf's line; *base is that parse. */
static int make_plan(const target *tg, const char *module, ct_plan *p, CONF **base, char **text)
{
    *base = ct_parse(tg->real, tg->base, tg->blen);
    p->module = module;
    if (*base == NULL || ct_plan_build(*base, p) != 0)
        return -1;
    *text = ct_plan_render(p, tg->real);
    return *text != NULL ? 0 : ct_fail("out of memory");
}

/* 0: no snippet; 1: accelaes-conf's (its text in *out if asked); -1: something else is there. */
static int snippet_state(const char *path, ct_text *out)
{
    struct stat st;
    ct_text t;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : ct_fail("%s: %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return ct_fail("%s is a symbolic link, not accelaes-conf's snippet: move it away first", path);
    if (ct_read_file(path, &t) != 0)
        return -1;
    if (strncmp(t.buf, CT_SNIPPET_HEAD, strlen(CT_SNIPPET_HEAD)) != 0) {
        ct_text_free(&t);
        return ct_fail("%s was not written by accelaes-conf: move it away first", path);
    }
    if (out != NULL)
        *out = t;
    else
        ct_text_free(&t);
    return 1;
}

/* FILE with the snippet included from a temporary name, parsed and checked against the plan. */
static int check_with_temp(const target *tg, const CONF *base, const ct_plan *p, const char *text)
{
    char tmp[PATH_MAX], *full = NULL;
    size_t flen;
    int rc = -1;
    if (ct_temp_beside(tg->snippet, text, strlen(text), NULL, tmp, sizeof(tmp)) != 0)
        return -1;
    if (ct_append_line(tg->base, tg->blen, tmp, &full, &flen) == 0) {
        CONF *merged = ct_parse(tg->real, full, flen);
        rc = merged != NULL ? ct_plan_check(base, merged, p) : -1;
        NCONF_free(merged);
    }
    free(full);
    unlink(tmp);
    return rc;
}

static int cmd_snippet(const char *file, const char *module)
{
    target tg;
    ct_plan p;
    CONF *base = NULL;
    char *text = NULL;
    int rc = open_target(file, &tg) == 0 && make_plan(&tg, module, &p, &base, &text) == 0 ? 0 : 1;
    if (rc == 0)
        fputs(text, stdout);
    free(text);
    NCONF_free(base);
    close_target(&tg);
    return rc;
}

static int cmd_enable(const char *file, const char *module)
{
    target tg;
    ct_plan p;
    CONF *base = NULL;
    char *text = NULL, *full = NULL;
    size_t flen;
    ct_text old = { 0 };
    int rc = 1, st = -1;
    if (open_target(file, &tg) != 0 || make_plan(&tg, module, &p, &base, &text) != 0
        || (st = snippet_state(tg.snippet, &old)) < 0 || check_with_temp(&tg, base, &p, text) != 0
        || ct_append_line(tg.base, tg.blen, tg.snippet, &full, &flen) != 0)
        goto out;
    /* the snippet first: until FILE names it, no program reads it */
    if ((st == 0 || strcmp(old.buf, text) != 0)
        && ct_replace_file(tg.snippet, text, strlen(text), NULL, st == 1 ? &old.st : NULL) != 0)
        goto out;
    int same = flen == tg.t.len && memcmp(full, tg.t.buf, flen) == 0;
    if (!same && ct_replace_file(tg.real, full, flen, &tg.t.st, &tg.t.st) != 0)
        goto out;
    printf("%s: %s %s\n  %s\n", tg.real, same && st == 1 && strcmp(old.buf, text) == 0
           ? "already enabled, nothing changed; it includes" : "enabled; it includes", tg.snippet, p.summary);
    rc = 0;
out:
    ct_text_free(&old);
    free(full);
    free(text);
    NCONF_free(base);
    close_target(&tg);
    return rc;
}

static int cmd_disable(const char *file)
{
    target tg;
    int rc = 1, st = -1;
    if (open_target(file, &tg) != 0 || (st = snippet_state(tg.snippet, NULL)) < 0)
        goto out;   /* something else at the snippet's name: touch neither */
    /* the line first: a missing included file is not an error in 3.0, but a stale one would load */
    if (tg.found && ct_replace_file(tg.real, tg.base, tg.blen, &tg.t.st, &tg.t.st) != 0)
        goto out;
    if (st == 1 && unlink(tg.snippet) != 0) {
        ct_fail("%s: %s", tg.snippet, strerror(errno));
        goto out;
    }
    printf("%s: %s\n", tg.real, tg.found ? "disabled, the .include line and its snippet are removed"
                                         : st == 1 ? "not enabled; the snippet left beside it is removed"
                                         : "not enabled, nothing to remove");
    rc = 0;
out:
    close_target(&tg);
    return rc;
}

/* Enabled and current: the file, as parsed now, still holds what enable would plan today. */
static int cmd_status(const char *file)
{
    target tg;
    ct_plan p;
    ct_text snip = { 0 };
    CONF *base = NULL, *merged = NULL, *sc = NULL;
    char *text = NULL;
    int rc = 1, st;
    if (open_target(file, &tg) != 0 || (st = snippet_state(tg.snippet, &snip)) < 0)
        goto out;
    if (!tg.found) {
        printf("%s: not enabled%s\n", tg.real, st == 1 ? " (a snippet is left beside it: disable removes it)" : "");
        rc = EXIT_NOT_ENABLED;
        goto out;
    }
    if (st == 0) {
        printf("%s: broken: it includes %s, which is missing: run accelaes-conf enable or disable\n",
               tg.real, tg.snippet);
        goto out;
    }
    const char *module = (sc = ct_parse(tg.snippet, snip.buf, snip.len)) != NULL
                       ? NCONF_get_string(sc, "accelaes_sect", "module") : NULL;
    ERR_clear_error();
    if (make_plan(&tg, module, &p, &base, &text) != 0 || (merged = ct_parse(tg.real, tg.t.buf, tg.t.len)) == NULL
        || ct_plan_check(base, merged, &p) != 0 || strcmp(text, snip.buf) != 0) {
        printf("%s: enabled, but %s no longer fits it: run accelaes-conf enable again\n", tg.real, tg.snippet);
        goto out;
    }
    printf("%s: enabled through %s\n  %s\n", tg.real, tg.snippet, p.summary);
    rc = 0;
out:
    NCONF_free(sc);
    NCONF_free(merged);
    NCONF_free(base);
    free(text);
    ct_text_free(&snip);
    close_target(&tg);
    return rc;
}

/* The module a one-program configuration names when --module does not: the build tree's (accelaes.so beside this
 * executable, as make leaves build/accelaes-conf), else the installed one in the running libcrypto's MODULESDIR. */
static int default_module(char *out, size_t cap)
{
    char self[PATH_MAX], beside[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(beside, sizeof(beside), "%s/accelaes.so", self);
            if (access(beside, F_OK) == 0 && realpath(beside, out) != NULL && strlen(out) < cap)
                return 0;
        }
    }
    const char *dir = OPENSSL_info(OPENSSL_INFO_MODULES_DIR);
    if (dir == NULL || (size_t)snprintf(out, cap, "%s/accelaes.so", dir) >= cap)
        return ct_fail("no module folder known to libcrypto: give --module PATH");
    return 0;
}

static int cmd_program(const char *module)
{
    char found[PATH_MAX];
    ct_plan p;
    if (module == NULL && default_module(found, sizeof(found)) != 0)
        return 1;
    p.module = module != NULL ? module : found;
    CONF *empty = ct_parse("(empty)", "", 0), *back = NULL;
    char *text = NULL;
    int rc = 1;
    /* config_diagnostics: a malformed directive stops the program instead of being ignored (conf/accelaes.cnf) */
    if (empty == NULL || ct_plan_build(empty, &p) != 0 || ct_plan_add(&p, "default", "config_diagnostics", "1") != 0
        || (text = ct_plan_render(&p, NULL)) == NULL)
        goto out;
    /* what was written is what OpenSSL will read: parsed back and checked against the plan */
    if ((back = ct_parse("(generated)", text, strlen(text))) == NULL || ct_plan_check(empty, back, &p) != 0)
        goto out;
    if (access(p.module, R_OK) != 0)
        fprintf(stderr, "accelaes-conf: note: %s: %s (the configuration names it anyway)\n", p.module, strerror(errno));
    fputs(text, stdout);
    rc = 0;
out:
    NCONF_free(back);
    NCONF_free(empty);
    free(text);
    return rc;
}

static int cmd_dump(const char *file)
{
    ct_text t;
    if (ct_read_file(file, &t) != 0)
        return 1;
    CONF *c = ct_parse(file, t.buf, t.len);
    if (c != NULL)
        ct_dump(c);
    NCONF_free(c);
    ct_text_free(&t);
    return c != NULL ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL, *system = NULL, *module = NULL;
    if (cmd == NULL || strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage(cmd == NULL ? stderr : stdout);
        return cmd == NULL ? EXIT_USAGE : 0;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--system=", 9) == 0 || strncmp(a, "--module=", 9) == 0)
            *(a[2] == 's' ? &system : &module) = a + 9;
        else if ((strcmp(a, "--system") == 0 || strcmp(a, "--module") == 0) && i + 1 < argc)
            *(a[2] == 's' ? &system : &module) = argv[++i];
        else
            return ct_fail("unknown or incomplete argument '%s' (accelaes-conf --help)", a), EXIT_USAGE;
    }
    if (module != NULL
        && (module[0] != '/'
            || (strcmp(cmd, "snippet") != 0 && strcmp(cmd, "enable") != 0 && strcmp(cmd, "program") != 0)))
        return ct_fail("--module takes an absolute path, with program, snippet or enable only"), EXIT_USAGE;
    if (system != NULL && system[0] == '\0')
        return ct_fail("--system takes a file name"), EXIT_USAGE;
    /* This tool must not load the configuration it edits: a broken one would stop it, and an
     * enabled one would load the provider. */
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
    char *file = system != NULL ? OPENSSL_strdup(system) : CONF_get1_default_config_file();
    int rc = EXIT_USAGE;
    if (strcmp(cmd, "program") == 0) /* reads no configuration file */
        rc = system != NULL ? (ct_fail("program takes no --system"), EXIT_USAGE) : cmd_program(module);
    else if (file == NULL) {
        ct_fail("no configuration file name (OPENSSL_CONF or OpenSSL's default)");
        rc = 1;
    } else if (strcmp(cmd, "snippet") == 0)
        rc = cmd_snippet(file, module);
    else if (strcmp(cmd, "enable") == 0)
        rc = cmd_enable(file, module);
    else if (strcmp(cmd, "disable") == 0)
        rc = cmd_disable(file);
    else if (strcmp(cmd, "status") == 0)
        rc = cmd_status(file);
    else if (strcmp(cmd, "dump") == 0)
        rc = cmd_dump(file);
    else
        ct_fail("unknown command '%s' (accelaes-conf --help)", cmd);
    OPENSSL_free(file);
    return rc;
}
