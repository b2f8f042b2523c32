/* What the processes of one launch must agree on before they train together (run.h,
 * ct_run_agreement): everything that decides what is trained, as lines of "key = value" that the
 * join (world.h) compares across ranks. Left out: the config's keys that may differ per process
 * (where the files are, which device, how many threads, the timeouts: ct_config_value.per_process);
 * the files' content is compared instead, by the data's counts, shapes and checksums. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "train/run.h"

typedef struct text {
    char *buf;
    size_t len, cap;
    int failed;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap ? 2 * t->cap : 4096) + (size_t)n;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->failed = 1;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

/* A set's size, shape and content: the bytes of a set held in memory, the file index of one
 * decoded on demand (paths, sizes, labels). */
static void add_set(text *t, const char *name, const ct_dataset *ds)
{
    add(t, "the %s set = %ld images of %dx%dx%d, %d classes\n", name, ds->count, ds->shape.h, ds->shape.w,
        ds->shape.c, ds->classes);
    if (ds->images) {
        size_t bytes = (size_t)ds->count * (size_t)ds->shape.h * (size_t)ds->shape.w * (size_t)ds->shape.c;
        add(t, "the %s set's checksum = images crc32c %08x, labels crc32c %08x\n", name,
            (unsigned)ct_crc32c(ds->images, bytes), (unsigned)ct_crc32c(ds->labels, (size_t)ds->count));
    } else {
        add(t, "the %s set's checksum = file index %016llx\n", name, (unsigned long long)ds->index_hash);
    }
}

ct_status ct_run_agreement(const ct_run *run, const char *version, const char *resumed, char **out, ct_err *err)
{
    text t = {0};
    add(&t, "cutrain version = %s\n", version);
    /* [data] and [train] first, wherever each file puts them; the layers in their order */
    static const char *const passes[] = {"data.", "train."};
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < run->cfg.n_values; i++) {
            const ct_config_value *v = &run->cfg.values[i];
            int in_pass = pass < 2 ? strncmp(v->key, passes[pass], strlen(passes[pass])) == 0
                                   : strncmp(v->key, "data.", 5) != 0 && strncmp(v->key, "train.", 6) != 0;
            if (in_pass && !v->per_process)
                add(&t, "%s = %s\n", v->key, v->value);
        }
    add_set(&t, "training", &run->train);
    if (run->test.count > 0)
        add_set(&t, "test", &run->test);
    add(&t, "the global batch = %d\n", run->batch);
    add(&t, "the parameter count = %ld\n", run->n_replicas > 0 ? (long)run->replicas[0].graph.n_params : 0L);
    add(&t, "the checkpoint resumed from = %s\n", resumed && *resumed ? resumed : "none (a fresh start)");
    if (t.failed) {
        free(t.buf);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for what the processes must agree on");
    }
    *out = t.buf;
    return CT_OK;
}
