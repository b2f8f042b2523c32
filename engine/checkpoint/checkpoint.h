/* Checkpoints (docs/checkpoint-format.md): a versioned little-endian binary file.
 *
 *   magic "CUTRAIN\x1a" (8 bytes), u32 format version (CT_CHECKPOINT_VERSION), u32 header bytes
 *       (the offset of the first parameter float)
 *   u32 layer count; per layer: u32 name length + name bytes (no NUL), u32 type (ct_layer_type),
 *       i32 out h, w, c, u64 weight count, u64 bias count, u64 state count
 *   u32 optimizer (ct_optimizer), u64 parameter count, u64 state count, u32 has_m, u32 has_v
 *   i32 epoch (completed), i64 step, u64 seed, f32 loss scale, u32 has master weights,
 *   f64 test accuracy at save (-1: none)
 *   version 2 and later: u32 precision (ct_precision: 0 fp32, 1 fp16, 2 bf16), u32 has scaler (fp16's
 *       loss scaler, whose scale is the f32 loss scale above), i32 clean steps, i32 growth steps
 *       (0: a fixed scale), i64 applied steps (Adam's t), i64 skipped steps
 *   version 3 only (with version 2's block before it): the training set's record: u64 index hash
 *       (0: none), u32 class count, per class u32 name length (1..255) + name bytes (no NUL)
 *   f32 params[parameter count], then m and v when present, then state[state count]
 *   u32 CRC-32 (zlib's crc32) of every byte before it.
 *
 * params, m and v hold every layer's weights then its biases, in layer order, packed: the
 * parameter count is the sum of the layers' weight and bias counts. In memory each of those
 * tensors starts 256-byte aligned with padding between them (graph.h, CT_TENSOR_ALIGN); the
 * network packs and unpacks them per tensor (snapshot.c), so the file does not depend on the
 * alignment, and aligning them in memory left the format, version 1, as it was.
 *
 * Pure functions over memory (serialize / parse) are kept apart from the file I/O so the parser
 * can be fuzzed; ct_checkpoint_write_file replaces a file atomically (temporary file in the same
 * folder, fsync, rename, fsync of the folder): a crash leaves the old file or the new one, whole.
 *
 * Mixed precision (version 2): params are the fp32 master weights (has master weights = 1 in an
 * fp16 or bf16 run); the half copy is not stored, it is rounded from them at load. Any precision
 * loads into any other (an fp16-trained checkpoint evaluates in fp32 and the reverse); the scaler
 * is restored only into an fp16 run, and an fp16 run from a checkpoint without one starts its
 * scaler from the config. A checkpoint with nothing of version 2 to say (fp32) is written as
 * version 1, byte for byte as before, so older builds keep reading fp32 checkpoints.
 *
 * The training set's record (version 3): the hash of the file index of the set the run trained on
 * and its class names (an image folder's class folders), so that resuming on a folder that has
 * changed is refused (ct_run_check_dataset) and predictions can print names. Written only when
 * there is something to say (a hash or names): a set without them (IDX, CIFAR-10, synthetic)
 * keeps writing version 1 or 2 as before.
 *
 * Compatibility: this is format version 3; version 1 files are read as fp32, versions 1 and 2 as
 * saying nothing of the training set. tests/fixtures/compat_every_layer_v1.ckpt is a version 1
 * file written by the build before the restructure (0331922), and test_checkpoint_compat loads it
 * and expects that build's evaluation. Any change to the layout, or to what a field means (layer
 * type numbers included), bumps CT_CHECKPOINT_VERSION and keeps reading every older version. */
#ifndef CT_CHECKPOINT_H
#define CT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/types.h"

#define CT_CHECKPOINT_VERSION 3u
/* Bounds of the training set's record: a class name's bytes, and the classes. */
#define CT_CHECKPOINT_MAX_NAME 255u
#define CT_CHECKPOINT_MAX_CLASSES 65536u
#define CT_CHECKPOINT_MAGIC "CUTRAIN\x1a"

typedef struct ct_checkpoint_layer {
    char *name;
    uint32_t type;
    int32_t h, w, c;
    uint64_t w_count, b_count, state_count;
} ct_checkpoint_layer;

typedef struct ct_checkpoint {
    ct_checkpoint_layer *layers;
    uint32_t n_layers;
    uint32_t optimizer;
    uint64_t n_params, n_state;
    float *params;             /* (n_params) */
    float *m, *v;              /* (n_params) each, or NULL */
    float *state;              /* (n_state) */
    int32_t epoch;
    int64_t step;
    uint64_t seed;
    float loss_scale;          /* 1 without fp16's scaler */
    uint32_t has_master;       /* 1: params are the fp32 masters of an fp16 / bf16 run */
    double test_accuracy;      /* -1 when unknown */
    /* As read. The writer writes the lowest version that says everything (1 for fp32, 2 for mixed
     * precision, 3 with a training set's record) but never lower than this, so a parsed file
     * serializes back to its own bytes; 0 when built in memory. */
    uint32_t version;
    uint32_t precision;        /* ct_precision of the run that saved it */
    uint32_t has_scaler;       /* fp16: the loss scaler's state below (and loss_scale) */
    int32_t clean_steps, growth_steps;
    int64_t applied_steps, skipped_steps;
    /* version 3: the training set's file index hash (0: none) and its class names in label
     * order (n_classes of them, each malloc'd; NULL when n_classes is 0) */
    uint64_t index_hash;
    uint32_t n_classes;
    char **class_names;
} ct_checkpoint;

/* Bytes of the serialized form. */
size_t ct_checkpoint_size(const ct_checkpoint *ck);
/* Writes exactly ct_checkpoint_size(ck) bytes into buf. */
void ct_checkpoint_serialize(const ct_checkpoint *ck, uint8_t *buf);
/* Parses and validates a whole file image: magic, version (a newer one is refused by number),
 * sizes that agree with the length (no allocation sized by an unchecked field), CRC. `source`
 * names the file in messages. On failure *ck is zeroed; on success free with ct_checkpoint_free. */
ct_status ct_checkpoint_parse(const uint8_t *buf, size_t len, const char *source, ct_checkpoint *ck, ct_err *err);
void ct_checkpoint_free(ct_checkpoint *ck);

/* Atomic replace of `path` with `len` bytes (see above). */
ct_status ct_checkpoint_write_file(const char *path, const uint8_t *buf, size_t len, ct_err *err);
/* The most bytes a checkpoint of a network with these counts can take (every name at its longest,
 * both optimizer moments, `classes` class names): the bound a read of its checkpoint stops at. */
size_t ct_checkpoint_bound(uint32_t n_layers, uint64_t n_params, uint64_t n_state, uint32_t classes);
/* Reads a whole file (malloc'd into *buf). `limit`: the most bytes read (ct_checkpoint_bound; 0:
 * none), past which the file is refused as not a checkpoint; a pipe is read only with a limit, and
 * a folder or a device never (file.h). */
ct_status ct_checkpoint_read_file(const char *path, size_t limit, uint8_t **buf, size_t *len, ct_err *err);

#endif
