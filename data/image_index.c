/* The index of a folder of image files: every file under a folder, recursively, in sorted path
 * order (byte order, as torchvision and Keras sort), each recognised by its first bytes rather
 * than its name (ImageNet holds PNGs named .JPEG), with its size. Hidden files and folders (a
 * leading '.') and files that are not JPEG or PNG are skipped and counted. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/rng.h"
#include "data/image_decode.h"
#include "data/image_index.h"

static int by_bytes(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    size_t at = la;
    if (la && a[la - 1] != '/')
        s[at++] = '/';
    memcpy(s + at, b, lb + 1);
    return s;
}

/* The names in folder `path`, hidden ones counted and left out, sorted. */
static ct_status list_folder(const char *path, char ***out, int *n_out, long *hidden, ct_err *err)
{
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(path);
    if (!d)
        return ct_fail(err, CT_ERR_DATA, "%s: cannot open the folder: %s", path, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    ct_status st = CT_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && hidden)
                (*hidden)++;
            continue;
        }
        if (n == cap) {
            int nc = cap ? 2 * cap : 64;
            char **g = realloc(names, (size_t)nc * sizeof *g);
            if (!g) {
                st = ct_fail(err, CT_ERR_NOMEM, "%s: out of memory listing the folder", path);
                break;
            }
            names = g;
            cap = nc;
        }
        if (!(names[n] = strdup(e->d_name))) {
            st = ct_fail(err, CT_ERR_NOMEM, "%s: out of memory listing the folder", path);
            break;
        }
        n++;
    }
    closedir(d);
    if (st != CT_OK) {
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return st;
    }
    if (n > 1)   /* names is NULL for an empty folder, which qsort may not take */
        qsort(names, (size_t)n, sizeof *names, by_bytes);
    *out = names;
    *n_out = n;
    return CT_OK;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

ct_status ct_image_subfolders(const char *root, char ***names, int *n, ct_err *err)
{
    *names = NULL;
    *n = 0;
    struct stat sb;
    if (stat(root, &sb) != 0)
        return ct_fail(err, CT_ERR_DATA, "%s: %s", root, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ct_fail(err, CT_ERR_DATA, "%s is not a folder (format = imagefolder takes a folder of class folders)",
                       root);
    char **all;
    int n_all;
    ct_status st = list_folder(root, &all, &n_all, NULL, err);
    if (st != CT_OK)
        return st;
    int k = 0;
    for (int i = 0; i < n_all; i++) {
        char *p = join(root, all[i]);
        int dir = p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (dir)
            all[k++] = all[i];
        else
            free(all[i]);
    }
    *names = all;
    *n = k;
    return CT_OK;
}

void ct_image_names_free(char **names, int n) { free_names(names, n); }

/* Whether the file's first bytes are a JPEG or PNG. */
static int sniff_file(const char *path, long long *size)
{
    /* without blocking, and regular files only: a FIFO or a device named like an image is no image */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat sb;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    uint8_t head[8];
    ssize_t got = ok ? read(fd, head, sizeof head) : -1;
    close(fd);
    *size = ok ? (long long)sb.st_size : 0;
    return ok && got > 0 && ct_image_sniff(head, (size_t)got) != CT_IMAGE_UNKNOWN;
}

static ct_status add_file(ct_image_index *ix, const char *path, int label, ct_err *err)
{
    if (ix->count == ix->cap) {
        long nc = ix->cap ? 2 * ix->cap : 256;
        ct_image_entry *g = realloc(ix->entries, (size_t)nc * sizeof *g);
        if (!g)
            return ct_fail(err, CT_ERR_NOMEM, "out of memory indexing %ld image files", ix->count);
        ix->entries = g;
        ix->cap = nc;
    }
    ct_image_entry *e = &ix->entries[ix->count];
    memset(e, 0, sizeof *e);
    if (!(e->path = strdup(path)))
        return ct_fail(err, CT_ERR_NOMEM, "out of memory indexing %ld image files", ix->count);
    e->label = label;
    ix->count++;
    return CT_OK;
}

/* Every image under folder `path` (recursively, sorted), with label. */
static ct_status walk(ct_image_index *ix, const char *path, int label, int depth, ct_err *err)
{
    if (depth > 64)
        return ct_fail(err, CT_ERR_DATA, "%s: folders nested more than 64 deep (a link loop?)", path);
    char **names;
    int n;
    ct_status st = list_folder(path, &names, &n, &ix->hidden, err);
    for (int i = 0; i < n && st == CT_OK; i++) {
        char *p = join(path, names[i]);
        if (!p) {
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory indexing %s", path);
            break;
        }
        struct stat sb;
        if (stat(p, &sb) != 0) {
            ix->not_images++;   /* a dangling link */
        } else if (S_ISDIR(sb.st_mode)) {
            st = walk(ix, p, label, depth + 1, err);
        } else {
            long long size;
            if (S_ISREG(sb.st_mode) && sniff_file(p, &size)) {
                st = add_file(ix, p, label, err);
                if (st == CT_OK)
                    ix->entries[ix->count - 1].size = size;
            } else {
                ix->not_images++;
            }
        }
        free(p);
    }
    free_names(names, n);
    return st;
}

ct_status ct_image_index_add_folder(ct_image_index *ix, const char *path, int label, ct_err *err)
{
    return walk(ix, path, label, 0, err);
}

ct_status ct_image_index_add_path(ct_image_index *ix, const char *path, int label, ct_err *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ct_fail(err, CT_ERR_DATA, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return walk(ix, path, label, 0, err);
    /* read when its batch comes, maybe more than once: a pipe would block or be gone, a device never end */
    if (!S_ISREG(sb.st_mode))
        return ct_fail(err, CT_ERR_DATA, "%s: %s, not an image file: give a regular JPEG or PNG file", path,
                       S_ISFIFO(sb.st_mode) ? "a FIFO or pipe" : "a device or other special file");
    long long size;
    if (!sniff_file(path, &size))
        return ct_fail(err, CT_ERR_DATA, "%s is not a JPEG or PNG file (judged by its first bytes)", path);
    ct_status st = add_file(ix, path, label, err);
    if (st == CT_OK)
        ix->entries[ix->count - 1].size = size;
    return st;
}

void ct_image_index_free(ct_image_index *ix)
{
    for (long i = 0; i < ix->count; i++) {
        free(ix->entries[i].path);
        free(ix->entries[i].bytes);
    }
    free(ix->entries);
    memset(ix, 0, sizeof *ix);
}

/* FNV-1a over the bytes, then folded with the size and label through the splitmix finaliser:
 * any change of a relative path, a size or a label changes the hash. */
uint64_t ct_image_index_hash(const ct_image_index *ix, size_t root_len)
{
    uint64_t h = 0x696d616765666f6cULL;   /* "imagefol" */
    for (long i = 0; i < ix->count; i++) {
        const ct_image_entry *e = &ix->entries[i];
        const char *rel = e->path + (strlen(e->path) >= root_len ? root_len : 0);
        uint64_t f = 0xcbf29ce484222325ULL;
        for (const unsigned char *c = (const unsigned char *)rel; *c; c++)
            f = (f ^ *c) * 0x100000001b3ULL;
        h = ct_mix64(h ^ f);
        h = ct_hash3(h, (uint64_t)e->size, (uint64_t)e->label);
    }
    return h;
}
