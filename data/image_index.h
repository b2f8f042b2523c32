/* The index of a folder of image files (image_index.c): the files, their sizes and labels, in the
 * order samples are numbered; format = imagefolder and the image files to predict are made of it. */
#ifndef CT_IMAGE_INDEX_H
#define CT_IMAGE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct ct_image_entry {
    char *path;            /* as opened: the root given joined with the path below it */
    long long size;        /* bytes, at open */
    int label;
    uint8_t *bytes;        /* cache = bytes: the whole file; NULL otherwise */
} ct_image_entry;

typedef struct ct_image_index {
    ct_image_entry *entries;
    long count, cap;
    long hidden;           /* skipped: a leading '.' (files and folders) */
    long not_images;       /* skipped: not JPEG or PNG by their first bytes */
} ct_image_index;

/* The subfolders of root (not hidden), sorted by bytes. A root that is missing or not a folder
 * fails naming it. Free with ct_image_names_free. */
ct_status ct_image_subfolders(const char *root, char ***names, int *n, ct_err *err);
void ct_image_names_free(char **names, int n);

/* Appends every image under folder `path` (recursively, sorted), labelled `label`. */
ct_status ct_image_index_add_folder(ct_image_index *ix, const char *path, int label, ct_err *err);
/* Appends one file (which must be a JPEG or PNG by its bytes) or a whole folder. */
ct_status ct_image_index_add_path(ct_image_index *ix, const char *path, int label, ct_err *err);
void ct_image_index_free(ct_image_index *ix);
/* 64-bit hash of (path below the root, size, label) of every entry in order; root_len: the
 * length of the root's prefix of each path, left out so that a moved folder hashes the same. */
uint64_t ct_image_index_hash(const ct_image_index *ix, size_t root_len);

#endif
