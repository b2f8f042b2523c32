/* Datasets in memory and the batcher that feeds the trainer.
 *
 * Images are kept as uint8 NHWC (what the files hold: 4x fewer bytes than float); a batch is
 * assembled by gathering the epoch's shuffled indices, augmenting (pad + random crop, horizontal
 * flip) and normalising into float32 NHWC. */
#ifndef CT_DATASET_H
#define CT_DATASET_H

#include <stdint.h>

#include "base/status.h"
#include "data/encoded.h"
#include "data/settings.h"

typedef struct ct_dataset {
    uint8_t *images;   /* (count, h, w, c) */
    uint8_t *labels;   /* (count) */
    long count;
    ct_shape shape;
    int classes;       /* 1 + the largest label (10 for the formats here) */
    long top_label_at; /* the index of the first sample with the largest label */
    /* A set decoded on demand (format = imagefolder): images is NULL and the format's record reads
     * each sample (data/format.h); `source` is the format's own state (the file index). */
    void *source;
    /* The class names, classes of them, in label order (NULL for formats without names), and a
     * hash of what the set is made of (the index of files: paths, sizes, labels; 0 when the format
     * has none), which checkpoints keep so that resuming on a changed folder is refused. */
    char **class_names;
    uint64_t index_hash;
    ct_data_format format;   /* whose record reads it when images is NULL */
} ct_dataset;

/* One thread's state for reading a set decoded on demand: the format's decoder and read buffer,
 * grown to the largest file seen (no allocation per image in steady state), and what it read.
 * Each pipeline worker makes one when it starts. For sets in memory a reader is not needed (NULL
 * is accepted everywhere a reader is). */
typedef struct ct_sample_reader ct_sample_reader;
ct_status ct_sample_reader_new(const ct_dataset *ds, ct_sample_reader **out, ct_err *err);
void ct_sample_reader_free(ct_sample_reader *rd);   /* NULL is ignored */
/* Compressed bytes read, and samples replaced (on_bad_image = skip), since the reader was made. */
void ct_sample_reader_counts(const ct_sample_reader *rd, long long *input_bytes, long *bad_images);

/* The file sample `index` comes from (format = imagefolder), NULL for sets held in memory. */
const char *ct_dataset_sample_path(const ct_dataset *ds, long index);
/* Tells the kernel sample `index`'s file will be read soon (posix_fadvise WILLNEED), for sets
 * that read each file when decoding it (cache = none); nothing otherwise. */
void ct_dataset_prefetch_hint(const ct_dataset *ds, long index);
/* Files skipped at open: hidden ones (a leading '.') and those that are not JPEG or PNG by their
 * bytes. Both 0 for sets held in memory. */
void ct_dataset_skipped(const ct_dataset *ds, long *hidden, long *not_images);
/* on_bad_image = skip: the files found bad so far (each once, in index order) into names (up to
 * max of them, pointers into ds); returns how many there are in all. */
long ct_dataset_bad_files(const ct_dataset *ds, const char **names, long max);

/* Image files to predict: each of paths is a JPEG or PNG file, or a folder whose images (found by
 * their bytes, recursively, in sorted path order; hidden files skipped) are taken. The set is
 * unlabelled (labels 0, classes 0), decoded on demand with the evaluation transform of dc
 * (image_size, eval_resize, channels, max_pixels, on_bad_image = error) into
 * (image_h, image_w, channels) samples; files are in the order given, folders expanded in place. */
ct_status ct_image_files_open(const ct_data_settings *dc, const char *const *paths, int n_paths, ct_dataset *ds,
                              ct_err *err);
/* Sample `index` of any set without augmentation, as stored or decoded: x: (h, w, c) uint8. */
ct_status ct_dataset_read_sample_u8(const ct_dataset *ds, long index, uint8_t *x, ct_err *err);

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
/* Where ct_data_probe's class count came from, in words ("label 255 at index 7 of FILE, the
 * largest"), for formats whose count is read off the labels; "" otherwise. */
void ct_data_largest_label(const ct_data_settings *dc, char *text, size_t size);

typedef struct ct_augment {
    int crop_pad;      /* pad by this many zero pixels, then crop back at a random offset */
    int flip;          /* horizontal flip with probability 1/2 */
    float mean[CT_MAX_CHANNELS], std[CT_MAX_CHANNELS];  /* per channel, after scaling to [0,1] */
} ct_augment;

/* Formats that crop and flip while decoding (imagefolder) get crop_pad 0 and flip 0 here: the
 * batcher and the device only normalise their samples. */
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

/* The same for any set, also one decoded on demand (format = imagefolder), where a sample can
 * fail to decode: the first failure is returned (CT_ERR_DATA naming the file). rd: the calling
 * thread's reader (NULL: none needed, or, for ct_read_batch, one made per thread for the call).
 * For sets decoded on demand the crop and flip are drawn at decode from (augment_seed, i, the
 * image's size), and the u8 forms return the decoded, cropped samples; for sets in memory the u8
 * forms are the bytes as stored. */
ct_status ct_read_batch(const ct_dataset *ds, const long *indices, int n, const ct_augment *aug, int augmenting,
                        uint64_t augment_seed, float *x, int32_t *y, ct_err *err);
ct_status ct_read_batch_serial(const ct_dataset *ds, ct_sample_reader *rd, const long *indices, int n,
                               const ct_augment *aug, int augmenting, uint64_t augment_seed, float *x, int32_t *y,
                               ct_err *err);
ct_status ct_read_sample(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, const ct_augment *aug,
                         int augmenting, uint64_t augment_seed, float *x, int32_t *y, ct_err *err);
ct_status ct_read_batch_u8(const ct_dataset *ds, ct_sample_reader *rd, const long *indices, int n, int augmenting,
                           uint64_t augment_seed, uint8_t *x, int32_t *y, ct_err *err);
/* decode = gpu: as ct_read_batch_u8, except that the JPEGs a device decoder takes are left
 * compressed in enc (reset here for n samples) and their x is not written (data/encoded.h), but
 * for the places cpu_share gives the workers (ct_encoded_place_on_cpu), decoded here whatever the
 * file; the set's format must have read_encoded (CT_ERR_USAGE otherwise). */
ct_status ct_read_batch_encoded(const ct_dataset *ds, ct_sample_reader *rd, const long *indices, int n,
                                int augmenting, uint64_t augment_seed, double cpu_share, uint8_t *x, int32_t *y,
                                ct_encoded_batch *enc, ct_err *err);
/* Whether the set's format can leave files compressed for a device decoder. */
int ct_dataset_can_encode(const ct_dataset *ds);
ct_status ct_read_sample_u8(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                            uint64_t augment_seed, uint8_t *x, int32_t *y, ct_err *err);

/* Fisher-Yates permutation of 0..count-1 from (seed, epoch). */
void ct_shuffle_indices(long *indices, long count, uint64_t seed, int epoch);

#endif
