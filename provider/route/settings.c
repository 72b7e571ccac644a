/* provider/route/settings.c: the settings of docs/DESIGN.md, read from the provider's openssl.cnf section
 * (through the core's get_params) and overridden by ACCELAES_<NAME> environment variables.
 * A bad value or an unknown key refuses the load with a message that names the setting. */
#define _GNU_SOURCE   /* secure_getenv */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>   /* environ */
#include <openssl/conf.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include "provider/route/backend.h"
#include "provider/base/err.h"
#include "provider/base/settings.h"

/* Default crossover from inline to the split path: below it, waking a pool thread costs more than
 * the second core saves (how 256 KiB was measured is not recorded: bench/results/engine-notes.md). */
#define ACC_DEFAULT_SPLIT_MIN (256u * 1024u)

static const char *const setting_names[] = { "backend", "workers", "split_min", "gpu_min", "shm" };
#define N_SETTINGS (sizeof(setting_names) / sizeof(setting_names[0]))
/* Keys OpenSSL itself reads from a provider section. */
static const char *const core_keys[] = { "module", "activate", "identity", "soft_load" };

static int bad_setting(const char *name, const char *value, const char *expected, const char *from)
{
    acc_raise(ACC_R_INVALID_SETTING, "setting '%s' has invalid value '%s' (from %s): expected %s",
              name, value, from, expected);
    fprintf(stderr, "accelaes: setting '%s' has invalid value '%s' (from %s): expected %s\n",
            name, value, from, expected);
    return 0;
}

/* A byte count: digits with an optional k, m or g suffix (powers of 1024). */
static int parse_size(const char *v, size_t *out)
{
    char *end;
    unsigned long long n;

    if (!isdigit((unsigned char)v[0]))
        return 0;
    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno != 0)
        return 0;
    int shift = 0;
    switch (tolower((unsigned char)*end)) {
    case 'k': shift = 10; end++; break;
    case 'm': shift = 20; end++; break;
    case 'g': shift = 30; end++; break;
    }
    /* The range is checked before the shift: shifted first, 18014398509481985k would wrap to 1 KiB. */
    if (*end != '\0' || n > (1ULL << (40 - shift)))
        return 0;
    n <<= shift;
    *out = (size_t)n;
    return 1;
}

/* A device backend's setting name (backend = cuda): ACC_BACKEND_DEVICE + its index, else -1. */
static int device_backend(const char *v)
{
    for (int i = 0; i < ACC_BK_COUNT; i++)
        if (acc_backends[i]->setting != NULL && strcasecmp(v, acc_backends[i]->setting) == 0)
            return ACC_BACKEND_DEVICE + i;
    return -1;
}

/* "auto, cpu or cuda": the values backend takes, the device backends' from the table. */
static const char *backend_choices(char *buf, size_t len)
{
    const char *names[ACC_BK_COUNT + 2] = { "auto", "cpu" };
    size_t n = 2, at = 0;

    for (int i = 0; i < ACC_BK_COUNT; i++)
        if (acc_backends[i]->setting != NULL)
            names[n++] = acc_backends[i]->setting;
    buf[0] = '\0';
    for (size_t i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
    return buf;
}

static int apply(acc_settings *s, const char *name, const char *v, const char *from)
{
    size_t n;

    if (strcmp(name, "backend") == 0) {
        if (strcasecmp(v, "auto") == 0) s->backend = ACC_BACKEND_AUTO;
        else if (strcasecmp(v, "cpu") == 0) s->backend = ACC_BACKEND_CPU;
        else if (device_backend(v) >= 0) s->backend = device_backend(v);
        else {
            char expect[160];
            return bad_setting(name, v, backend_choices(expect, sizeof(expect)), from);
        }
    } else if (strcmp(name, "workers") == 0) {
        if (strcasecmp(v, "auto") == 0) s->workers = 0;
        else if (parse_size(v, &n) && n <= 4096 && strpbrk(v, "kKmMgG") == NULL) s->workers = (int)n;
        else return bad_setting(name, v, "auto or a number of CPU units from 0 to 4096", from);
    } else if (strcmp(name, "split_min") == 0) {
        if (strcasecmp(v, "auto") == 0) s->split_min = ACC_DEFAULT_SPLIT_MIN, s->split_min_auto = 1;
        else if (parse_size(v, &n) && n >= 16) s->split_min = n, s->split_min_auto = 0;
        else return bad_setting(name, v, "auto or a byte count of at least 16 (k, m, g suffixes allowed)", from);
    } else if (strcmp(name, "gpu_min") == 0) {
        if (strcasecmp(v, "auto") == 0) s->gpu_min = 0;
        else if (parse_size(v, &n) && n >= 16) s->gpu_min = n;
        else return bad_setting(name, v, "auto or a byte count of at least 16 (k, m, g suffixes allowed)", from);
    } else if (strcmp(name, "shm") == 0) {
        if (strcasecmp(v, "auto") == 0) s->shm = -1;
        else if (strcasecmp(v, "on") == 0) s->shm = 1;
        else if (strcasecmp(v, "off") == 0) s->shm = 0;
        else return bad_setting(name, v, "on, off or auto", from);
    }
    return 1;
}

static int known_key(const char *k)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (strcmp(k, setting_names[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(core_keys) / sizeof(core_keys[0]); i++)
        if (strcmp(k, core_keys[i]) == 0)
            return 1;
    return 0;
}

/* The core hands a provider only the values it asks for by name, so an unknown (misspelt) key
 * would pass silently; and a provider loaded by name (`-provider accelaes`) after its config
 * activation failed gets no values at all. So read this provider's section of the configuration
 * file too: an unknown key or a bad value there refuses the load, and values the core did not
 * hand over are taken from it. */
/* A value the core handed over came from the file the application's libcrypto loaded: the file
 * scanned here (OPENSSL_CONF, else OpenSSL's default) when that has the same value; otherwise the
 * application loaded another one (OPENSSL_init_crypto with a file name, CONF_modules_load_file),
 * whose name the core does not pass to providers. */
#define ACC_FROM_APP_CONF "the configuration the application loaded"

static int scan_conf_section(const char *provname, acc_settings *s, const char *const core_vals[])
{
    const char *file = secure_getenv("OPENSSL_CONF");
    char *deffile = NULL;
    CONF *conf;
    const char *init, *provs, *sect = NULL, *from_file[N_SETTINGS] = { NULL };
    STACK_OF(CONF_VALUE) *vals = NULL;
    const char *bad = NULL;
    int ok = 1;

    if (file == NULL && provname != NULL)
        file = deffile = CONF_get1_default_config_file();
    if (provname == NULL || file == NULL) {
        for (size_t k = 0; k < N_SETTINGS; k++)
            if (core_vals[k] != NULL && !apply(s, setting_names[k], core_vals[k], ACC_FROM_APP_CONF))
                return 0;
        return 1;
    }
    ERR_set_mark();   /* a missing or odd file is OpenSSL's business, not an error of ours */
    conf = NCONF_new(NULL);
    if (conf != NULL && NCONF_load(conf, file, NULL) > 0
        && (init = NCONF_get_string(conf, NULL, "openssl_conf")) != NULL
        && (provs = NCONF_get_string(conf, init, "providers")) != NULL
        && (sect = NCONF_get_string(conf, provs, provname)) != NULL)
        vals = NCONF_get_section(conf, sect);
    ERR_pop_to_mark();
    for (int i = 0; vals != NULL && i < sk_CONF_VALUE_num(vals) && bad == NULL; i++) {
        CONF_VALUE *cv = sk_CONF_VALUE_value(vals, i);
        if (cv->name == NULL)
            continue;
        if (!known_key(cv->name))
            bad = cv->name;
        for (size_t k = 0; k < N_SETTINGS; k++)
            if (strcmp(cv->name, setting_names[k]) == 0)
                from_file[k] = cv->value;
    }
    if (bad != NULL) {
        acc_raise(ACC_R_INVALID_SETTING, "unknown setting '%s' in section [%s] of %s", bad, sect, file);
        fprintf(stderr, "accelaes: unknown setting '%s' in section [%s] of %s "
                "(known: backend, workers, split_min, gpu_min, shm)\n", bad, sect, file);
        ok = 0;
    }
    /* The core's value where it handed one over, else the file's; named by the file it came from. */
    for (size_t k = 0; ok && k < N_SETTINGS; k++) {
        const char *v = core_vals[k] != NULL ? core_vals[k] : from_file[k];
        const char *from = file;
        if (core_vals[k] != NULL && (from_file[k] == NULL || strcmp(from_file[k], core_vals[k]) != 0))
            from = ACC_FROM_APP_CONF;
        if (v != NULL && !apply(s, setting_names[k], v, from))
            ok = 0;
    }
    NCONF_free(conf);
    OPENSSL_free(deffile);
    return ok;
}

/* Every ACCELAES_* variable anything of this project reads. The provider's own: its settings (built
 * from setting_names), then these; warn_unknown_env names them when it meets another. */
static const char *const provider_env[] = {
    "SHM_NAME", "GPU_PLUGIN", "GPU_VERBOSE", "FORCE_EVP_ENGINE", "NO_VAES", "VAES",
    /* accel/cuda/runtime.cu's tuning and fault injection */
    "CUDA_ADAPT", "CUDA_CHUNK_KB", "CUDA_CTR", "CUDA_DEVICE", "CUDA_FAIL_AFTER", "CUDA_HOST_SPIN_US",
    "CUDA_HOST_THREADS", "CUDA_NT_KB", "CUDA_SLOTS", "CUDA_SPLIT", "CUDA_STREAMS", "CUDA_DMA",
    "CUDA_DIRECT_MIN_KB", "CUDA_REGCACHE_MB",
};
/* ...and the ones the tools, tests and benchmarks read, which a process that loads the provider
 * may well carry in its environment (accepted without a word, not listed). */
static const char *const project_env[] = {
    "BUILD_DIR", "SANITIZER", "HARDENING_LOG", "INSTALLED", "FILES_NO_TMPFILE",
};
static const char *const project_env_prefixes[] = { "TEST_", "FAKEGPU_", "FAULT_", "LOAD_", "BENCH_" };

static int known_env(const char *name, size_t len)
{
    char up[40];

    for (size_t i = 0; i < N_SETTINGS; i++) {
        size_t n = strlen(setting_names[i]);
        for (size_t j = 0; j <= n && j < sizeof(up); j++)
            up[j] = (char)toupper((unsigned char)setting_names[i][j]);
        if (n == len && memcmp(up, name, len) == 0)
            return 1;
    }
    for (size_t i = 0; i < sizeof(provider_env) / sizeof(provider_env[0]); i++)
        if (strlen(provider_env[i]) == len && memcmp(provider_env[i], name, len) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(project_env) / sizeof(project_env[0]); i++)
        if (strlen(project_env[i]) == len && memcmp(project_env[i], name, len) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(project_env_prefixes) / sizeof(project_env_prefixes[0]); i++)
        if (strncmp(name, project_env_prefixes[i], strlen(project_env_prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Appends s upper-cased to buf (size bytes, NUL-terminated) at off, truncating; the new end. */
static size_t append_upper(char *buf, size_t size, size_t off, const char *s)
{
    for (; *s != '\0' && off + 1 < size; s++)
        buf[off++] = (char)toupper((unsigned char)*s);
    buf[off] = '\0';
    return off;
}

/* A misspelt variable (ACCELAES_WORKER=2) would otherwise be ignored without a word. It is not an
 * error (the environment reaches every program of a session, and refusing the load over a stray
 * name would be worse than the typo): one line on stderr, once per process however many library
 * contexts load the provider; the error queue stays clean, since the load goes on. Not in a
 * setuid/setgid/capability program, which ignores ACCELAES_* anyway (secure_getenv). */
static void warn_unknown_env(void)
{
    static int warned;   /* process-wide by intent, as the environment is */
    char list[512] = "";
    size_t off = 0;

    if (getauxval(AT_SECURE) || __atomic_load_n(&warned, __ATOMIC_RELAXED))
        return;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        const char *name = *e + 9, *eq;
        if (strncmp(*e, "ACCELAES_", 9) != 0 || (eq = strchr(name, '=')) == NULL
            || known_env(name, (size_t)(eq - name)))
            continue;
        if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            return;
        /* the settings, then the provider's other user-facing ones; the CUDA tuning ones as a group */
        for (size_t i = 0; i < N_SETTINGS + 5; i++) {
            const char *n = i < N_SETTINGS ? setting_names[i] : provider_env[i - N_SETTINGS];
            off = append_upper(list, sizeof(list), off, "ACCELAES_");
            off = append_upper(list, sizeof(list), off, n);
            off = append_upper(list, sizeof(list), off, ", ");
        }
        fprintf(stderr, "accelaes: ignoring unknown environment variable %.*s (known: %sACCELAES_CUDA_*)\n",
                (int)(eq - *e), *e, list);
        return;
    }
}

int acc_settings_read(acc_settings *s, const OSSL_CORE_HANDLE *handle,
                      OSSL_FUNC_core_get_params_fn *get_params)
{
    const char *vals[N_SETTINGS] = { NULL };
    const char *provname = NULL;
    OSSL_PARAM params[N_SETTINGS + 2];
    char envname[40];

    s->backend = ACC_BACKEND_AUTO;
    s->workers = 0;
    s->split_min = ACC_DEFAULT_SPLIT_MIN;
    s->split_min_auto = 1;
    s->gpu_min = 0;
    s->shm = -1;

    if (get_params != NULL) {
        size_t i;
        for (i = 0; i < N_SETTINGS; i++)
            params[i] = OSSL_PARAM_construct_utf8_ptr(setting_names[i], (char **)&vals[i], 0);
        params[i++] = OSSL_PARAM_construct_utf8_ptr(OSSL_PROV_PARAM_CORE_PROV_NAME, (char **)&provname, 0);
        params[i] = OSSL_PARAM_construct_end();
        if (!get_params(handle, params))
            memset(vals, 0, sizeof(vals));
    }
    if (!scan_conf_section(provname, s, vals))
        return 0;
    warn_unknown_env();
    /* secure_getenv, as OpenSSL's own ossl_safe_getenv: a setuid, setgid or file-capability
     * program must not take its settings from the user who started it. */
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const char *v;
        size_t j;
        snprintf(envname, sizeof(envname), "ACCELAES_%s", setting_names[i]);
        for (j = 0; envname[j] != '\0'; j++)
            envname[j] = (char)toupper((unsigned char)envname[j]);
        if ((v = secure_getenv(envname)) != NULL && !apply(s, setting_names[i], v, envname))
            return 0;
    }
    return 1;
}
