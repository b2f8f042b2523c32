/* Captured steps by key (step_cache.h): a small table, searched linearly, least recently used out. */
#include <string.h>

#include "step_cache.h"

int ct_step_key_equal(const ct_step_key *a, const ct_step_key *b)
{
    return a->fn == b->fn && a->net == b->net && a->n == b->n;
}

static void drop(ct_step_entry *e, ct_step_release release)
{
    if (e->exec && release)
        release(e->exec);
    e->exec = NULL;
}

ct_step_action ct_step_cache_next(ct_step_cache *c, const ct_step_key *key, ct_step_entry **entry,
                                  ct_step_release release)
{
    ct_step_entry *e = NULL;
    for (int i = 0; i < c->count && !e; i++)
        if (ct_step_key_equal(&c->entries[i].key, key))
            e = &c->entries[i];
    if (!e && c->count < CT_STEP_CACHE_ENTRIES) {
        e = &c->entries[c->count++];
        *e = (ct_step_entry){.key = *key};
    } else if (!e) {
        e = &c->entries[0];
        for (int i = 1; i < CT_STEP_CACHE_ENTRIES; i++)
            if (c->entries[i].used < e->used)
                e = &c->entries[i];
        drop(e, release);
        *e = (ct_step_entry){.key = *key};
    }
    e->used = ++c->clock;
    *entry = e;
    if (e->exec)
        return CT_STEP_REPLAY;
    return e->runs++ == 0 ? CT_STEP_DIRECT : CT_STEP_CAPTURE;
}

void ct_step_cache_forget(ct_step_cache *c, const void *net, ct_step_release release)
{
    int kept = 0;
    for (int i = 0; i < c->count; i++) {
        ct_step_entry *e = &c->entries[i];
        if (net && e->key.net != net) {
            c->entries[kept++] = *e;
            continue;
        }
        drop(e, release);
    }
    /* the dropped entries' slots are free again, their keys forgotten */
    memset(&c->entries[kept], 0, (size_t)(c->count - kept) * sizeof c->entries[0]);
    c->count = kept;
}
