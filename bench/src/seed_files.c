/* bench/src/seed_files.c: the baseline for the directory benchmark, written the way the seed program was: OpenMP
 * `parallel for` over the files of one directory, one file per thread, each read whole, EVP AES-128-CBC with the
 * default provider. Same CLI shape and output format (IV + ciphertext) as accelaes-files. Not for real use. */
#define _GNU_SOURCE
#include <dirent.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

static int read_whole(const char *path, unsigned char **buf, long *len)
{
    FILE *f = fopen(path, "rb");
    int ok = 0;

    *buf = NULL;
    if (f == NULL)
        return 0;
    if (fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        *buf = malloc((size_t)*len + 1);
        ok = *buf != NULL && fread(*buf, 1, (size_t)*len, f) == (size_t)*len;
    }
    fclose(f);
    return ok;
}

/* One file, start to end: the seed allocated per request (buffers, context) and so does this. */
static int do_file(const char *in_path, const char *out_path, const unsigned char *key, int enc)
{
    unsigned char *in = NULL, *out = NULL, iv[16];
    long len = 0;
    int outl = 0, fin = 0, ok = 0;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    FILE *f = NULL;

    if (ctx == NULL || !read_whole(in_path, &in, &len))
        goto done;
    if (enc) {
        if (RAND_bytes(iv, sizeof(iv)) != 1)
            goto done;
    } else {
        if (len < 16)
            goto done;
        memcpy(iv, in, 16);
    }
    out = malloc((size_t)len + 32);
    if (out == NULL || !EVP_CipherInit_ex(ctx, EVP_aes_128_cbc(), NULL, key, iv, enc))
        goto done;
    if (!EVP_CipherUpdate(ctx, out, &outl, enc ? in : in + 16, (int)(enc ? len : len - 16)) ||
        !EVP_CipherFinal_ex(ctx, out + outl, &fin))
        goto done;
    f = fopen(out_path, "wb");
    if (f == NULL)
        goto done;
    ok = (!enc || fwrite(iv, 1, 16, f) == 16) && fwrite(out, 1, (size_t)(outl + fin), f) == (size_t)(outl + fin);
    ok = (fclose(f) == 0) && ok;
done:
    EVP_CIPHER_CTX_free(ctx);
    free(in);
    free(out);
    return ok;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int main(int argc, char **argv)
{
    const char *mode = NULL, *keyfile = NULL, *dirs[2] = { 0 };
    unsigned char key[16];
    char text[256] = { 0 }, **names = NULL;
    int nd = 0, threads = 0, n = 0, kl = 0, hi = -1, failed = 0;
    FILE *kf;
    DIR *d;
    struct dirent *e;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--key-file") == 0 && i + 1 < argc)
            keyfile = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cipher") == 0 && i + 1 < argc)
            i++; /* accepted for the same CLI shape; always aes-128-cbc */
        else if (mode == NULL)
            mode = argv[i];
        else if (nd < 2)
            dirs[nd++] = argv[i];
    }
    if (mode == NULL || keyfile == NULL || nd != 2) {
        fprintf(stderr, "usage: seed_files encrypt|decrypt --key-file KEYFILE IN_DIR OUT_DIR [--threads N]\n");
        return 2;
    }
    if ((kf = fopen(keyfile, "r")) == NULL || fread(text, 1, sizeof(text) - 1, kf) == 0) {
        fprintf(stderr, "seed_files: cannot read %s\n", keyfile);
        return 2;
    }
    fclose(kf);
    for (size_t i = 0; text[i] != '\0'; i++) {
        int v = hexval((unsigned char)text[i]);

        if (v < 0)
            continue;
        if (hi < 0)
            hi = v;
        else if (kl < 16)
            key[kl++] = (unsigned char)(hi << 4 | v), hi = -1;
    }
    OPENSSL_cleanse(text, sizeof(text));
    if (kl != 16) {
        fprintf(stderr, "seed_files: need a 16-byte hex key\n");
        return 2;
    }
    if ((d = opendir(dirs[0])) == NULL) {
        fprintf(stderr, "seed_files: cannot open %s\n", dirs[0]);
        return 2;
    }
    mkdir(dirs[1], 0700);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, sizeof(*names) * (size_t)(n + 1));
        if (names == NULL)
            return 2;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (threads > 0)
        omp_set_num_threads(threads);
#pragma omp parallel for reduction(+ : failed)
    for (int i = 0; i < n; i++) {
        char in_path[4096], out_path[4096];

        snprintf(in_path, sizeof(in_path), "%s/%s", dirs[0], names[i]);
        snprintf(out_path, sizeof(out_path), "%s/%s", dirs[1], names[i]);
        if (!do_file(in_path, out_path, key, strcmp(mode, "encrypt") == 0)) {
            fprintf(stderr, "seed_files: %s failed\n", in_path);
            failed++;
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    OPENSSL_cleanse(key, sizeof(key));
    return failed ? 1 : 0;
}
