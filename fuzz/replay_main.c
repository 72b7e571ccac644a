/* fuzz/replay_main.c: a main() for the fuzz target without libFuzzer: runs every file named on
 * the command line (a directory: every file in it, in name order) through LLVMFuzzerTestOneInput
 * once, so the committed corpus is a regression test wherever a C compiler is. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One input through the target; 1, or -1 if the file could not be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    do {
        if (len == cap) {
            uint8_t *p = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (p == NULL) {
                fprintf(stderr, "%s: out of memory\n", path);
                free(buf);
                fclose(f);
                return -1;
            }
            buf = p;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    if (ferror(f)) {
        perror(path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(buf, len);   /* a divergence aborts inside */
    free(buf);
    return 1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of a directory, sorted so that runs are repeatable. Returns files run, -1 if
 * any could not be read. */
static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int done = 0, failed = 0;

    if (d == NULL) {
        perror(dir);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
            if (p == NULL)
                break;
            names = p;
        }
        if ((names[n] = strdup(path)) != NULL)
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        int k = run_file(names[i]);

        if (k < 0)
            failed = 1;
        else
            done += k;
        free(names[i]);
    }
    free(names);
    return failed ? -1 : done;
}

int main(int argc, char **argv)
{
    int total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int k;

        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        k = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
        if (k < 0)
            return 2;
        total += k;
    }
    printf("replay: %d inputs, no divergence\n", total);
    return total > 0 ? 0 : 2;
}
