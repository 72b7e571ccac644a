/* tools/conf_plan.c: what accelaes-conf adds to a configuration, fitted to that file's names.
 *
 * OpenSSL merges a section that appears twice: a later key replaces an earlier one of the same
 * name (and moves to the end of the section's order), other keys stay. So a snippet included at
 * the end of the file can add keys to the file's own init, providers and algorithm sections.
 * The config modules read a section's own keys only (NCONF_get_string would fall back to
 * [default]), so every lookup here walks the section itself, as they do. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include "tools/conf_tool.h"

#define PREFER       "?provider=accelaes"
/* Names this tool creates; a file that already has one of them is refused rather than merged. */
#define NEW_INIT     "accelaes_init"
#define NEW_PROVS    "accelaes_providers"
#define NEW_DEFAULT  "accelaes_default_sect"
#define NEW_ALGS     "accelaes_algorithms"
#define SECT         "accelaes_sect"
/* Section names and keys written into a header or a key position; values may hold more. */
#define NAME_CHARS   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
#define VALUE_CHARS  NAME_CHARS "/,:=?!+@~%*&|^;<>()[]{} "

/* [accelaes_sect] as conf/accelaes.cnf has it: keep the two in step (tests/system/test_system_conf.py
 * compares them). No module line: OPENSSL_MODULES, else MODULESDIR, unless --module says. */
static const char *const accelaes_settings[][2] = {
    { "activate", "1" }, { "backend", "auto" }, { "workers", "auto" },
    { "split_min", "auto" }, { "gpu_min", "auto" }, { "shm", "auto" },
};

static STACK_OF(CONF_VALUE) *section(const CONF *c, const char *name)
{
    STACK_OF(CONF_VALUE) *sk = NCONF_get_section(c, name);
    ERR_clear_error();   /* an absent section is an answer, not an error */
    return sk;
}

static const char *sect_get(const CONF *c, const char *sect, const char *key)
{
    STACK_OF(CONF_VALUE) *sk = section(c, sect);
    for (int i = 0; sk != NULL && i < sk_CONF_VALUE_num(sk); i++)
        if (strcmp(sk_CONF_VALUE_value(sk, i)->name, key) == 0)
            return sk_CONF_VALUE_value(sk, i)->value;
    return NULL;
}

static int only(const char *s, const char *chars, size_t max)
{
    size_t n = strlen(s);
    return n < max && strspn(s, chars) == n;
}

/* Values come from the parsed file, so they are already expanded: a $, #, backslash or quote in
 * one could not be written back unchanged, and such a value is refused rather than guessed at. */
static int add(ct_plan *p, const char *sect, const char *key, const char *value)
{
    if (p->n == CT_MAX_SET)
        return ct_fail("too many settings to add");
    if (!only(sect, NAME_CHARS, CT_NAME_MAX) || sect[0] == '\0')
        return ct_fail("section name '%s' cannot be written back safely (only %s)", sect, NAME_CHARS);
    if (!only(key, NAME_CHARS, CT_NAME_MAX) || !only(value, VALUE_CHARS, CT_VALUE_MAX))
        return ct_fail("[%s] %s = '%s' cannot be copied safely into the snippet (it holds #, $, a "
                       "backslash, a quote or a control character, or is too long)", sect, key, value);
    ct_setting *s = &p->set[p->n++];
    snprintf(s->sect, sizeof(s->sect), "%s", sect);
    snprintf(s->key, sizeof(s->key), "%s", key);
    snprintf(s->value, sizeof(s->value), "%s", value);
    return 0;
}

/* One more setting, checked as the plan's own are. */
int ct_plan_add(ct_plan *p, const char *sect, const char *key, const char *value)
{
    return add(p, sect, key, value);
}

/* OpenSSL 3.0-3.2 activate a provider whose section has an activate key, whatever its value
 * ("activate = 0" too: checked on 3.0.19); 3.3 and later want 1, yes, true or on (PR 22906). */
static int activates(const char *value)
{
    if (OpenSSL_version_num() < 0x30300000L)
        return 1;
    return strcasecmp(value, "1") == 0 || strcasecmp(value, "yes") == 0
        || strcasecmp(value, "true") == 0 || strcasecmp(value, "on") == 0;
}

/* The file's providers section gets accelaes. If the file activates no provider, default is
 * loaded implicitly today, and an activated accelaes would stop that: so default is activated
 * explicitly, in the file's own section for it when it names one. Explicit activations
 * (a FIPS setup activating fips and base, say) are left as they are. */
static int plan_providers(const CONF *c, ct_plan *p, const char *init)
{
    const char *ps = sect_get(c, init, "providers"), *dsect = NULL;
    int active = 0;
    if (ps == NULL) {
        ps = NEW_PROVS;
        if (add(p, init, "providers", ps) != 0)
            return -1;
    }
    STACK_OF(CONF_VALUE) *sk = section(c, ps);
    for (int i = 0; sk != NULL && i < sk_CONF_VALUE_num(sk); i++) {
        const CONF_VALUE *v = sk_CONF_VALUE_value(sk, i);
        const char *id = sect_get(c, v->value, "identity"), *name = id != NULL ? id : v->name;
        if (strcmp(v->name, "accelaes") == 0 || strcmp(name, "accelaes") == 0)
            return ct_fail("[%s] already configures a provider named accelaes (%s = %s): the file "
                           "offloads already, or remove that first", ps, v->name, v->value);
        if (strcmp(name, "default") == 0)
            dsect = v->value;
        const char *act = sect_get(c, v->value, "activate");
        active |= act != NULL && activates(act);
    }
    if (!active && dsect == NULL) {
        dsect = NEW_DEFAULT;
        if (add(p, ps, "default", NEW_DEFAULT) != 0)
            return -1;
    }
    if (!active && add(p, dsect, "activate", "1") != 0)
        return -1;
    size_t n = strlen(p->summary);
    if (active)
        snprintf(p->summary + n, sizeof(p->summary) - n, "providers in [%s], activated as the file says; ", ps);
    else
        snprintf(p->summary + n, sizeof(p->summary) - n, "providers in [%s], default activated in [%s]; ", ps, dsect);
    return add(p, ps, "accelaes", SECT);
}

static int has_element(const char *list, const char *want)
{
    char buf[CT_VALUE_MAX], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *e = strtok_r(buf, ",", &save); e != NULL; e = strtok_r(NULL, ",", &save)) {
        e += strspn(e, " ");
        size_t n = strlen(e);
        while (n > 0 && e[n - 1] == ' ')
            e[--n] = '\0';
        if (strcmp(e, want) == 0)
            return 1;
    }
    return 0;
}

/* The file's default_properties with ?provider=accelaes added, parsed by libcrypto on a fresh
 * library context: a query that already names a provider ("provider=default") cannot take a
 * second provider clause ("Duplicated name"), and config_diagnostics would stop every program. */
static int combine(const char *as, const char *dp, char *out, size_t cap)
{
    if (dp == NULL || dp[0] == '\0')
        snprintf(out, cap, "%s", PREFER);
    else if (has_element(dp, PREFER))
        snprintf(out, cap, "%s", dp);
    else if ((size_t)snprintf(out, cap, "%s,%s", dp, PREFER) >= cap)
        return ct_fail("[%s] default_properties is too long", as);
    OSSL_LIB_CTX *l = OSSL_LIB_CTX_new();
    int ok = l != NULL && EVP_set_default_properties(l, out) == 1;
    const char *data = NULL;
    int flags = 0;
    unsigned long e = ERR_peek_error_data(&data, &flags);
    char why[256];
    snprintf(why, sizeof(why), "%s", (flags & ERR_TXT_STRING) && data != NULL && data[0] != '\0' ? data
             : ERR_reason_error_string(e) != NULL ? ERR_reason_error_string(e) : "not a property query");
    ERR_clear_error();
    OSSL_LIB_CTX_free(l);
    if (!ok)
        return ct_fail("[%s] default_properties = %s cannot take %s (%s): edit it by hand", as,
                       dp != NULL ? dp : "", PREFER, why);
    return 0;
}

/* alg_module_init applies the section's keys in order, and fips_mode merges fips=yes into what
 * default_properties set. The replaced default_properties moves to the end of the section, so
 * every key that followed it (all of them when there was none) is written again after it. */
static int plan_algorithms(const CONF *c, ct_plan *p, const char *init)
{
    const char *as = sect_get(c, init, "alg_section");
    char value[CT_VALUE_MAX];
    if (as == NULL) {
        snprintf(p->summary + strlen(p->summary), sizeof(p->summary) - strlen(p->summary),
                 "algorithms in [%s]", NEW_ALGS);
        return add(p, init, "alg_section", NEW_ALGS) != 0 || add(p, NEW_ALGS, "default_properties", PREFER) != 0
             ? -1 : 0;
    }
    const char *dp = sect_get(c, as, "default_properties");
    if (combine(as, dp, value, sizeof(value)) != 0 || add(p, as, "default_properties", value) != 0)
        return -1;
    STACK_OF(CONF_VALUE) *sk = section(c, as);
    int from = 0;
    for (int i = 0; sk != NULL && i < sk_CONF_VALUE_num(sk); i++)
        if (strcmp(sk_CONF_VALUE_value(sk, i)->name, "default_properties") == 0)
            from = i + 1;
    for (int i = from; sk != NULL && i < sk_CONF_VALUE_num(sk); i++)
        if (add(p, as, sk_CONF_VALUE_value(sk, i)->name, sk_CONF_VALUE_value(sk, i)->value) != 0)
            return -1;
    snprintf(p->summary + strlen(p->summary), sizeof(p->summary) - strlen(p->summary),
             "algorithms in [%s] (default_properties = %s)", as, value);
    return 0;
}

int ct_plan_build(const CONF *c, ct_plan *p)
{
    const char *init = sect_get(c, "default", "openssl_conf");   /* what CONF_modules_load reads */
    p->n = 0;
    p->summary[0] = '\0';
    if (init == NULL && add(p, "default", "openssl_conf", NEW_INIT) != 0)
        return -1;
    if (init == NULL)
        init = NEW_INIT;
    STACK_OF(CONF_VALUE) *sk = section(c, init);
    for (int i = 0; sk != NULL && i < sk_CONF_VALUE_num(sk); i++) {
        const char *k = sk_CONF_VALUE_value(sk, i)->name;   /* module "name.suffix" is name too */
        if (strncmp(k, "providers.", 10) == 0 || strncmp(k, "alg_section.", 12) == 0)
            return ct_fail("[%s] has %s: several providers or algorithm sections are not handled, "
                           "edit the file by hand", init, k);
    }
    if (plan_providers(c, p, init) != 0 || plan_algorithms(c, p, init) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(accelaes_settings) / sizeof(accelaes_settings[0]); i++)
        if (add(p, SECT, accelaes_settings[i][0], accelaes_settings[i][1]) != 0)
            return -1;
    if (p->module != NULL && add(p, SECT, "module", p->module) != 0)
        return -1;
    /* a section this plan creates must be new: keys merged into one of the file's would mix */
    static const char *const created[] = { NEW_INIT, NEW_PROVS, NEW_DEFAULT, NEW_ALGS, SECT };
    for (size_t i = 0; i < sizeof(created) / sizeof(created[0]); i++)
        for (int j = 0; j < p->n; j++)
            if (strcmp(p->set[j].sect, created[i]) == 0 && section(c, created[i]) != NULL)
                return ct_fail("the file already has a section [%s] (was conf/accelaes.cnf pasted into "
                               "it?): remove it first", created[i]);
    return 0;
}

/* Sections in the order the plan first names them, each with its keys in plan order. */
char *ct_plan_render(const ct_plan *p, const char *for_file)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (f == NULL)
        return NULL;
    if (for_file != NULL)
        fprintf(f,
                CT_SNIPPET_HEAD
                " for %s, which includes it on its last line.\n"
                "# `accelaes-conf enable` rewrites it and `accelaes-conf disable` removes it with that line.\n"
                "# It adds accelaes to that file's own sections; OpenSSL merges a section named twice.\n"
                "# The accelaes settings are documented in docs/transparent-offload.md.\n",
                for_file);
    else /* accelaes-conf program: a whole configuration of its own */
        fprintf(f,
                "# written by `accelaes-conf program`: a whole configuration for one program,\n"
                "#   OPENSSL_CONF=/path/to/this/file program\n"
                "# (no OPENSSL_MODULES: the module is named by its absolute path below, so every other\n"
                "# provider, legacy included, still loads from OpenSSL's own module folder). It replaces\n"
                "# the system openssl.cnf for that program; `accelaes-conf enable` keeps that file instead.\n"
                "# The accelaes settings are documented in docs/transparent-offload.md.\n");
    int done[CT_MAX_SET] = { 0 };
    for (int i = 0; i < p->n; i++) {
        if (done[i])
            continue;
        fprintf(f, "\n[%s]\n", p->set[i].sect);
        for (int j = i; j < p->n; j++)
            if (!done[j] && strcmp(p->set[j].sect, p->set[i].sect) == 0) {
                fprintf(f, "%s = %s\n", p->set[j].key, p->set[j].value);
                done[j] = 1;
            }
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static int planned(const ct_plan *p, const char *sect, const char *key)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->set[i].sect, sect) == 0 && strcmp(p->set[i].key, key) == 0)
            return 1;
    return 0;
}

/* The merged file must hold every planned setting and every other key of the original with its
 * value: a line before the .include that ends in a backslash, say, would swallow it. */
int ct_plan_check(const CONF *orig, const CONF *merged, const ct_plan *p)
{
    for (int i = 0; i < p->n; i++) {
        const char *v = sect_get(merged, p->set[i].sect, p->set[i].key);
        if (v == NULL || strcmp(v, p->set[i].value) != 0)
            return ct_fail("with the .include line, [%s] %s is %s%s%s, not %s: the line does not take "
                           "effect as planned (does the line before it end in a backslash?)",
                           p->set[i].sect, p->set[i].key, v != NULL ? "'" : "", v != NULL ? v : "absent",
                           v != NULL ? "'" : "", p->set[i].value);
    }
    STACK_OF(OPENSSL_CSTRING) *names = NCONF_get_section_names(orig);
    int bad = names == NULL;
    for (int i = 0; !bad && i < sk_OPENSSL_CSTRING_num(names); i++) {
        const char *s = sk_OPENSSL_CSTRING_value(names, i);
        STACK_OF(CONF_VALUE) *sk = section(orig, s);
        for (int j = 0; !bad && sk != NULL && j < sk_CONF_VALUE_num(sk); j++) {
            const CONF_VALUE *v = sk_CONF_VALUE_value(sk, j);
            const char *m = planned(p, s, v->name) ? v->value : sect_get(merged, s, v->name);
            if (m == NULL || strcmp(m, v->value) != 0)
                bad = ct_fail("with the .include line, [%s] %s changes from '%s' to '%s'", s, v->name,
                              v->value, m != NULL ? m : "(absent)");
        }
    }
    sk_OPENSSL_CSTRING_free(names);
    return bad ? -1 : 0;
}

static int cmp_name(const char *const *a, const char *const *b)
{
    return strcmp(*a, *b);
}

static void put_escaped(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\\')
            fputs("\\\\", stdout);
        else if (ch < 0x20 || ch == 0x7f)
            printf("\\x%02x", ch);
        else
            putchar(ch);
    }
}

/* Every section (sorted by name) and its keys in the parser's order, values as expanded. */
void ct_dump(const CONF *c)
{
    STACK_OF(OPENSSL_CSTRING) *names = NCONF_get_section_names(c);
    if (names == NULL)
        return;
    sk_OPENSSL_CSTRING_set_cmp_func(names, cmp_name);
    sk_OPENSSL_CSTRING_sort(names);
    for (int i = 0; i < sk_OPENSSL_CSTRING_num(names); i++) {
        const char *s = sk_OPENSSL_CSTRING_value(names, i);
        STACK_OF(CONF_VALUE) *sk = section(c, s);
        printf("[%s]\n", s);
        for (int j = 0; sk != NULL && j < sk_CONF_VALUE_num(sk); j++) {
            printf("%s = ", sk_CONF_VALUE_value(sk, j)->name);
            put_escaped(sk_CONF_VALUE_value(sk, j)->value);
            putchar('\n');
        }
    }
    sk_OPENSSL_CSTRING_free(names);
}
