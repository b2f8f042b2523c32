/* What [data] says, as the data code reads it: the files, normalisation and augmentation, and the
 * input pipeline's settings.
 *
 * It lives with the data code, not the config reader, so that data/ depends on nothing of the
 * engine's but base/: the config reader (engine/config/) fills this struct, and data/ never sees
 * the rest of the config. */
#ifndef CT_DATA_SETTINGS_H
#define CT_DATA_SETTINGS_H

#include "base/types.h"
#include "data/formats.h"

#define CT_MAX_CHANNELS 4

/* [data] augment_on: where crop/flip/normalise run. */
typedef enum ct_augment_on {
    CT_AUGMENT_ON_CPU,       /* the pipeline's workers write float32 batches */
    CT_AUGMENT_ON_GPU        /* uint8 batches are shipped (4x fewer bytes); a kernel augments */
} ct_augment_on;

/* [data] pipeline: how batches are made. */
typedef enum ct_pipeline_mode {
    CT_PIPELINE_PARALLEL,    /* worker threads and a prefetch ring */
    CT_PIPELINE_SYNC         /* the naive mode: one thread, per sample, pageable memory, no prefetch */
} ct_pipeline_mode;

typedef struct ct_data_settings {
    ct_data_format format;   /* a row of CT_DATA_FORMATS; the format's record names its keys below */
    /* Paths resolved against the config file's folder (absolute paths kept). For cifar10 `train`
     * may list several files separated by commas or name a folder holding data_batch_1..5.bin;
     * labels are inside the files there. NULL when absent. */
    char *train, *train_labels, *test, *test_labels;
    float mean[CT_MAX_CHANNELS], std[CT_MAX_CHANNELS];
    int n_normalize;         /* channels given in `normalize` (0: none; 1 applies to all) */
    int crop_pad;            /* augment crop:N, 0 = off */
    int flip;                /* augment flip */
    ct_shape shape;          /* synthetic: h, w, c */
    int classes;             /* synthetic: number of classes */
    long count, test_count;  /* synthetic: samples */
    long train_limit, test_limit;  /* use only the first N samples, 0 = all */
    /* the input pipeline (data/pipeline.h) */
    int workers;             /* workers = auto | N: worker threads, 1..256; 0 = auto */
    int prefetch;            /* prefetch = auto | N: ring depth in batches, 1..64; 0 = auto */
    ct_augment_on augment_on;    /* augment_on = cpu | gpu (default cpu) */
    ct_pipeline_mode pipeline;   /* pipeline = parallel | sync (default parallel) */
    int drop_last;           /* drop_last = on | off: drop each epoch's last partial batch (default off) */
    int line;                /* line of [data], for messages */
} ct_data_settings;

#endif
