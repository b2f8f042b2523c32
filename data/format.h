/* What a data format provides: one record per row of CT_DATA_FORMATS (data/formats.h), defined in
 * the format's own file.
 *
 * The record names the [data] keys the format takes (the config reader turns them into rows of its
 * key tables, so a key of another format is reported as such) and the functions the loader calls.
 * A format either opens a set into memory whole (idx, cifar10, synthetic: `read` is NULL and
 * ds->images holds every sample), or opens an index of its samples and decodes one at a time with
 * `read`, straight into a batch slot (a folder of image files). */
#ifndef CT_DATA_FORMAT_H
#define CT_DATA_FORMAT_H

#include "data/dataset.h"
#include "data/encoded.h"

/* The kinds of value a format's key may take; the config reader parses each. */
typedef enum ct_data_key_kind {
    CT_DATA_KEY_PATH,    /* char *: one file or folder, resolved against the config's folder */
    CT_DATA_KEY_PATHS,   /* char *: a comma list of them, each resolved, joined by commas */
    CT_DATA_KEY_INT,     /* int */
    CT_DATA_KEY_LONG,    /* long */
    CT_DATA_KEY_SHAPE,   /* ct_shape, from "H, W, C" (C at most CT_MAX_CHANNELS) */
    CT_DATA_KEY_FLOAT,   /* float */
    CT_DATA_KEY_RANGE,   /* float[2], from "lo, hi" (0 < lo <= hi) */
    CT_DATA_KEY_SIZE,    /* int[2] (h, w), from "H, W" or "N" (both N) */
    CT_DATA_KEY_ENUM,    /* int, one of `names` */
    CT_DATA_KEY_WORDS,   /* char *: a comma list of words, kept as given (trimmed) */
    CT_DATA_KEY_SHARE    /* float: auto (-1) or a fraction 0..1 */
} ct_data_key_kind;

enum {
    CT_DATA_KEY_REQUIRED = 1 << 0,
    CT_DATA_KEY_HAS_MIN = 1 << 1,
    CT_DATA_KEY_HAS_MAX = 1 << 2,
};

/* One [data] key of a format. Several formats may have a key of the same name (each its own row,
 * its own kind or default); only the rows of the format in use apply. */
typedef struct ct_data_key {
    const char *name;
    ct_data_key_kind kind;
    size_t offset;         /* offsetof(ct_data_settings, the field) */
    const char *def;       /* the default, parsed like a given value; NULL: none */
    unsigned flags;
    long min, max;         /* with CT_DATA_KEY_HAS_MIN / _HAS_MAX */
    const char *with;      /* a path key that goes with this one, both or neither (idx: test_labels, test) */
    const char *note;      /* why the key does not apply to other formats, for that message */
    const char *const *names;  /* CT_DATA_KEY_ENUM: the words, NULL-terminated */
} ct_data_key;

/* Which set of [data] to open. */
typedef enum ct_data_split { CT_DATA_TRAIN, CT_DATA_TEST } ct_data_split;

typedef struct ct_data_format_def {
    const ct_data_key *keys;
    int n_keys;
    /* Checks beyond the keys' own (required paths are checked from the keys); NULL: none. Runs
     * before any file is touched. */
    ct_status (*check)(const ct_data_settings *dc, ct_err *err);
    /* Opens one set into ds (zeroed by the caller): count, shape, classes and labels, and the
     * pixels (ds->images) unless the format reads them on demand. A split the settings do not
     * name (no test set) leaves ds empty and returns CT_OK. `seed`: the run's seed. Frees what
     * it allocated on failure. */
    ct_status (*open)(const ct_data_settings *dc, ct_data_split split, uint64_t seed, ct_dataset *ds, ct_err *err);
    /* The per-sample shape and class count of the training set, reading as little as it can. */
    ct_status (*probe)(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err);
    /* Where the class count came from, for a network whose output disagrees with it (NULL: the
     * format's count needs no explaining): the label file, index and value of the largest label. */
    void (*largest_label)(const ct_data_settings *dc, char *text, size_t size);
    /* Formats that decode on demand (NULL for formats whose open loads every sample): one thread's
     * reading state (reader_new, made by each worker when it starts; reader_free), and the
     * decode of sample `index` of a set it opened at position i of a batch into x: (h, w, c)
     * uint8, a slot of the batch being made. augmenting: draw the crop and flip from
     * (augment_seed, i, the image's size); otherwise the evaluation transform. *y: the label of
     * what it wrote (a replaced sample's is its replacement's; 0 for a set without labels).
     * Counts what it reads into rd->input_bytes and replaced samples into rd->bad_images. */
    void (*source_free)(void *source);   /* ds->source, at ct_dataset_free */
    ct_status (*reader_new)(const ct_dataset *ds, void **state, ct_err *err);
    void (*reader_free)(void *state);
    ct_status (*read)(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                      uint64_t augment_seed, uint8_t *x, int32_t *y, ct_err *err);
    /* Formats whose files a device decoder can take ([data] decode = gpu; NULL for the others):
     * as read, except that a file the device decoder takes (a baseline JPEG of 1 or 3 components)
     * is not decoded: its bytes, source region and flip (drawn exactly as read draws them) go into
     * enc as sample i (data/encoded.h), and x is left alone. Other files are decoded into x as read
     * does. enc has been reset for the batch by the caller. */
    ct_status (*read_encoded)(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                              uint64_t augment_seed, uint8_t *x, int32_t *y, ct_encoded_batch *enc, ct_err *err);
} ct_data_format_def;

/* What a reader is (dataset.h): the format's state and the figures every format keeps. */
struct ct_sample_reader {
    const ct_data_format_def *def;
    void *state;
    long long input_bytes;
    long bad_images;
};

/* A record's key list: `.keys` and `.n_keys` of a whole array of rows. */
#define CT_DATA_KEYS(rows) .keys = (rows), .n_keys = (int)(sizeof(rows) / sizeof *(rows))

/* The record of format f (NULL for a value outside the list). */
const ct_data_format_def *ct_data_format_of(ct_data_format f);
/* `format = <name>` for messages ("?" outside the list). */
const char *ct_data_format_name(ct_data_format f);

#endif
