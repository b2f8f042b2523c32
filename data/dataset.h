/* Datasets in memory and the batcher that feeds the trainer.
 *
 * Images are kept as uint8 NHWC (what the files hold: 4x fewer bytes than float); a batch is
 * assembled by gathering the epoch's shuffled indices, augmenting (pad + random crop, horizontal
 * flip) and normalising into float32 NHWC. */
#ifndef CT_DATASET_H
#define CT_DATASET_H

#include <stdint.h>

#include "base/status.h"
#include "data/settings.h"

typedef struct ct_dataset {
    uint8_t *images;   /* (count, h, w, c) */
    uint8_t *labels;   /* (count) */
    long count;
    ct_shape shape;
    int classes;       /* 1 + the largest label (10 for the formats here) */
    /* A set decoded on demand (format = imagefolder): images is NULL and the format's record reads
     * each sample (data/format.h); `source` is the format's own state (the file index). */
    void *source;
    /* The class names, classes of them, in label order (NULL for formats without names), and a
     * hash of what the set is made of (the index of files: paths, sizes, labels; 0 when the format
     * has none), which checkpoints keep so that resuming on a changed folder is refused. */
    char **class_names;
    uint64_t index_hash;
} ct_dataset;

/* IDX images (magic 0x00000803) and labels (0x00000801), raw or gzip (detected by content).
 * labels_path may be NULL (images to predict): labels are then 0 and classes 0.
 * Errors name the file: missing, truncated, wrong magic, count mismatch, label >= 256. */
ct_status ct_idx_load(ct_dataset *ds, const char *images_path, const char *labels_path, long limit, ct_err *err);
/* Reads only the image header (for shapes without loading). */
ct_status ct_idx_probe(const char *images_path, ct_shape *shape, ct_err *err);
/* CIFAR-10 binary batches: records of 1 label byte + 3072 bytes (3 planes of 32x32, CHW in the
 * file, converted to HWC here). `paths` is a comma list of files or one folder holding
 * data_batch_1.bin .. data_batch_5.bin (or test_batch.bin when `test` is set). */
ct_status ct_cifar10_load(ct_dataset *ds, const char *paths, int test, long limit, ct_err *err);
/* Deterministic synthetic data: each class has a random template image; samples are the
 * template plus noise, so a network can learn it. */
ct_status ct_synthetic_make(ct_dataset *ds, ct_shape shape, int classes, long count, uint64_t seed);
void ct_dataset_free(ct_dataset *ds);

/* Loads train and test sets as the config says. test->count is 0 when there is no test set. */
ct_status ct_data_load(const ct_data_settings *dc, uint64_t seed, ct_dataset *train, ct_dataset *test, ct_err *err);
/* The per-sample input shape and class count, without loading everything. */
ct_status ct_data_probe(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err);

typedef struct ct_augment {
    int crop_pad;      /* pad by this many zero pixels, then crop back at a random offset */
    int flip;          /* horizontal flip with probability 1/2 */
    float mean[CT_MAX_CHANNELS], std[CT_MAX_CHANNELS];  /* per channel, after scaling to [0,1] */
} ct_augment;

void ct_augment_from_config(ct_augment *aug, const ct_data_settings *dc, int channels);
/* ((p / 255) - mean) / std folded into p * norm_scale + norm_bias per channel (CT_MAX_CHANNELS each): the
 * one place these floats are computed, so the device's augmentation gets the same bits. */
void ct_augment_fold(const ct_augment *aug, float *norm_scale, float *norm_bias);

/* Builds one batch.
 * x: (n, h, w, c) float32 out; y: (n) int32 out.
 * indices: which samples; `augment_seed` makes crops and flips a pure function of
 * (seed, sample position in epoch), so batches do not depend on threads. Passing aug->crop_pad 0
 * and flip 0 (evaluation) only normalises. */
void ct_make_batch(const ct_dataset *ds, const long *indices, int n, const ct_augment *aug,
                   int augmenting, uint64_t augment_seed, float *x, int32_t *y);
/* The same batch on the calling thread only (no OpenMP team): for the pipeline's workers, which
 * are threads of their own. Output identical to ct_make_batch. */
void ct_make_batch_serial(const ct_dataset *ds, const long *indices, int n, const ct_augment *aug,
                          int augmenting, uint64_t augment_seed, float *x, int32_t *y);
/* One sample of a batch: sample `index` of ds at position i of the batch (i picks its crop and flip
 * draws, see batch.c). x: (h, w, c) float32 out; y: one label out. A batch made sample by sample
 * equals ct_make_batch's. */
void ct_make_sample(const ct_dataset *ds, long index, int i, const ct_augment *aug, int augmenting,
                    uint64_t augment_seed, float *x, int32_t *y);
/* Raw gather for augmentation on the device: the samples' bytes as stored, (n, h, w, c) uint8,
 * neither augmented nor normalised (a kernel does both from the batch's augment_seed). */
void ct_make_batch_u8(const ct_dataset *ds, const long *indices, int n, uint8_t *x, int32_t *y);
void ct_make_sample_u8(const ct_dataset *ds, long index, uint8_t *x, int32_t *y);

/* Fisher-Yates permutation of 0..count-1 from (seed, epoch). */
void ct_shuffle_indices(long *indices, long count, uint64_t seed, int epoch);

#endif
