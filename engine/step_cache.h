/* The bookkeeping of captured steps behind run_step (backend.h), apart from CUDA so that it is
 * tested on the CPU (tests/test_step_cache.c): for a step key, whether to run the step directly,
 * capture it or replay its capture; and which captures to drop when a network's buffers go away.
 * A capture is an opaque handle (the CUDA backend's cudaGraphExec_t) that the backend makes and
 * that the cache hands back to a release function when it drops it. */
#ifndef CT_STEP_CACHE_H
#define CT_STEP_CACHE_H

#include "backend.h"

/* The full batch, the last partial one, evaluation, and a few more. */
enum { CT_STEP_CACHE_ENTRIES = 8 };

typedef struct ct_step_entry {
    ct_step_key key;
    int runs;                /* direct runs so far: the first run of a key is never captured */
    long used;               /* recency, for eviction */
    void *exec;              /* the capture, NULL until made */
} ct_step_entry;

typedef struct ct_step_cache {
    ct_step_entry entries[CT_STEP_CACHE_ENTRIES];
    int count;
    long clock;
} ct_step_cache;

typedef enum ct_step_action {
    CT_STEP_DIRECT,          /* run the step as it is */
    CT_STEP_CAPTURE,         /* capture it into the entry's exec (and run that) */
    CT_STEP_REPLAY           /* launch the entry's exec */
} ct_step_action;

/* Gives a capture back to the backend that made it. */
typedef void (*ct_step_release)(void *exec);

/* 1 when a and b name the same work on the same buffers: step function, network and batch size. */
int ct_step_key_equal(const ct_step_key *a, const ct_step_key *b);

/* What to do for key, and its entry in *entry: the first time a key is seen run it directly (so
 * that setup-time work, cuDNN's algorithm search and cuBLASLt's plans, happens outside any
 * capture), the second capture it, then replay the capture. An absent key gets an entry, evicting
 * the least recently used one when the cache is full (its capture goes to release). */
ct_step_action ct_step_cache_next(ct_step_cache *c, const ct_step_key *key, ct_step_entry **entry,
                                  ct_step_release release);

/* Drops every entry of network `net` (NULL: every entry), its capture going to release: those
 * hold the addresses of the network's buffers, which are being freed or replaced. */
void ct_step_cache_forget(ct_step_cache *c, const void *net, ct_step_release release);

#endif
