/* Checkpoint encoding, validation and atomic file replacement (format in checkpoint.h).
 *
 * The "header bytes" field holds the offset of the first parameter float, i.e. the size of
 * everything from the magic through the test accuracy; the parser requires it to match.
 *
 * Parsing runs in two passes so that nothing is allocated or trusted before it is known to fit:
 *   1. layout: walk the header with a bounds-checked cursor, only to learn where the float data
 *      starts and how long the file must be; a file shorter than that is "truncated", a longer
 *      one has "bytes after the end". No allocation, no interpretation of values.
 *   2. after the CRC has been checked (so a corrupted file reads as "bad CRC" rather than as some
 *      odd value), walk it again validating every value and copying into the struct.
 * Pass 2 still uses the bounds-checked cursor: a CRC collision must not cause an out-of-bounds
 * read, only a refusal. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/file.h"
#include "checkpoint/checkpoint.h"

#define MAGIC_BYTES 8u
#define CRC_BYTES 4u
/* magic, version, header bytes, layer count */
#define FIXED_HEAD_BYTES (MAGIC_BYTES + 4u + 4u + 4u)
/* name length, type, out h/w/c, weight/bias/state counts (name bytes come on top) */
#define LAYER_FIXED_BYTES (4u + 4u + 3u * 4u + 3u * 8u)
/* optimizer, parameter count, state count, has_m, has_v, epoch, step, seed, loss scale,
 * has master, test accuracy */
#define TAIL_BYTES (4u + 8u + 8u + 4u + 4u + 4u + 8u + 8u + 4u + 4u + 8u)
#define MIN_FILE_BYTES (FIXED_HEAD_BYTES + TAIL_BYTES + CRC_BYTES)
/* version 2's mixed-precision block after the tail: precision, has scaler, clean steps, growth
 * steps, applied steps, skipped steps */
#define MIXED_BYTES (4u + 4u + 4u + 4u + 8u + 8u)
#define MAX_NAME_BYTES 255u
/* version 3's training set record: index hash, class count (the names come on top) */
#define DATASET_FIXED_BYTES (8u + 4u)

/* ---- little-endian encoding, byte by byte so it does not depend on the host ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Two's complement back to signed without relying on implementation-defined conversions. */
static int32_t to_i32(uint32_t u)
{
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : -(int32_t)(UINT32_MAX - u) - 1;
}

static int64_t to_i64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(UINT64_MAX - u) - 1;
}

/* Floats travel as their bit patterns (memcpy), so NaN payloads and -0 survive unchanged. */
static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* zlib's crc32 takes a uInt length: feed buffers over 4 GiB in pieces. */
static uint32_t crc_of(const uint8_t *buf, size_t len)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (len > 0) {
        uInt piece = len > (1u << 30) ? (1u << 30) : (uInt)len;
        crc = crc32(crc, buf, piece);
        buf += piece;
        len -= piece;
    }
    return (uint32_t)crc;
}

/* ---- serialization ---- */

static size_t name_bytes(const char *name)
{
    return name ? strlen(name) : 0;
}

static uint64_t float_count(const ct_checkpoint *ck)
{
    uint64_t per_param = 1u + (ck->m != NULL) + (ck->v != NULL);
    return ck->n_params * per_param + ck->n_state;
}

/* The version a checkpoint is written as: the lowest that says everything it holds (2 for mixed
 * precision, 3 for a training set's record), so an fp32 checkpoint of a set without an index keeps
 * version 1's bytes and older builds keep reading it; never below the version it was parsed as,
 * so a file read and written again is the same bytes. */
static uint32_t write_version(const ct_checkpoint *ck)
{
    uint32_t needed = ck->index_hash != 0 || ck->n_classes > 0 ? 3u
                      : ck->precision != CT_PREC_FP32 || ck->has_scaler ? 2u : 1u;
    uint32_t read_as = ck->version <= CT_CHECKPOINT_VERSION ? ck->version : CT_CHECKPOINT_VERSION;
    return needed > read_as ? needed : read_as;
}

static size_t dataset_bytes(const ct_checkpoint *ck)
{
    size_t n = DATASET_FIXED_BYTES;
    for (uint32_t i = 0; i < ck->n_classes; i++)
        n += 4u + name_bytes(ck->class_names[i]);
    return n;
}

/* Offset of the first parameter float: the value of the "header bytes" field. */
static size_t header_size(const ct_checkpoint *ck)
{
    uint32_t version = write_version(ck);
    size_t n = FIXED_HEAD_BYTES + TAIL_BYTES + (version >= 2u ? MIXED_BYTES : 0u) +
               (version >= 3u ? dataset_bytes(ck) : 0u);
    for (uint32_t i = 0; i < ck->n_layers; i++)
        n += LAYER_FIXED_BYTES + name_bytes(ck->layers[i].name);
    return n;
}

size_t ct_checkpoint_size(const ct_checkpoint *ck)
{
    return header_size(ck) + (size_t)float_count(ck) * 4u + CRC_BYTES;
}

typedef struct writer {
    uint8_t *p;
} writer;

static void w_u32(writer *w, uint32_t v) { put_u32(w->p, v); w->p += 4; }
static void w_u64(writer *w, uint64_t v) { put_u64(w->p, v); w->p += 8; }
static void w_f32(writer *w, float v) { w_u32(w, f32_bits(v)); }

static void w_floats(writer *w, const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        w_f32(w, x[i]);
}

/* u32 length + bytes, no NUL */
static void w_name(writer *w, const char *name)
{
    size_t len = name_bytes(name);
    w_u32(w, (uint32_t)len);
    if (len)
        memcpy(w->p, name, len);
    w->p += len;
}

static void w_layer(writer *w, const ct_checkpoint_layer *l)
{
    w_name(w, l->name);
    w_u32(w, l->type);
    w_u32(w, (uint32_t)l->h);
    w_u32(w, (uint32_t)l->w);
    w_u32(w, (uint32_t)l->c);
    w_u64(w, l->w_count);
    w_u64(w, l->b_count);
    w_u64(w, l->state_count);
}

void ct_checkpoint_serialize(const ct_checkpoint *ck, uint8_t *buf)
{
    writer w = { buf };
    uint32_t version = write_version(ck);
    memcpy(w.p, CT_CHECKPOINT_MAGIC, MAGIC_BYTES);
    w.p += MAGIC_BYTES;
    w_u32(&w, version);
    w_u32(&w, (uint32_t)header_size(ck));
    w_u32(&w, ck->n_layers);
    for (uint32_t i = 0; i < ck->n_layers; i++)
        w_layer(&w, &ck->layers[i]);
    w_u32(&w, ck->optimizer);
    w_u64(&w, ck->n_params);
    w_u64(&w, ck->n_state);
    w_u32(&w, ck->m != NULL);
    w_u32(&w, ck->v != NULL);
    w_u32(&w, (uint32_t)ck->epoch);
    w_u64(&w, (uint64_t)ck->step);
    w_u64(&w, ck->seed);
    w_f32(&w, ck->loss_scale);
    w_u32(&w, ck->has_master);
    w_u64(&w, f64_bits(ck->test_accuracy));
    if (version >= 2u) {
        w_u32(&w, ck->precision);
        w_u32(&w, ck->has_scaler);
        w_u32(&w, (uint32_t)ck->clean_steps);
        w_u32(&w, (uint32_t)ck->growth_steps);
        w_u64(&w, (uint64_t)ck->applied_steps);
        w_u64(&w, (uint64_t)ck->skipped_steps);
    }
    if (version >= 3u) {
        w_u64(&w, ck->index_hash);
        w_u32(&w, ck->n_classes);
        for (uint32_t i = 0; i < ck->n_classes; i++)
            w_name(&w, ck->class_names[i]);
    }
    w_floats(&w, ck->params, ck->n_params);
    if (ck->m)
        w_floats(&w, ck->m, ck->n_params);
    if (ck->v)
        w_floats(&w, ck->v, ck->n_params);
    w_floats(&w, ck->state, ck->n_state);
    put_u32(w.p, crc_of(buf, (size_t)(w.p - buf)));
}

/* ---- parsing ---- */

/* A read position that can never move past the end of the buffer. */
typedef struct cursor {
    const uint8_t *buf;
    size_t len, pos;
} cursor;

static int has(const cursor *c, uint64_t n)
{
    return n <= (uint64_t)(c->len - c->pos);
}

/* Callers check has() first; these only advance. */
static uint32_t r_u32(cursor *c) { uint32_t v = get_u32(c->buf + c->pos); c->pos += 4; return v; }
static uint64_t r_u64(cursor *c) { uint64_t v = get_u64(c->buf + c->pos); c->pos += 8; return v; }

/* What pass 1 learns: enough to know the file's exact expected length. */
typedef struct layout {
    uint32_t version;
    uint32_t header_field;     /* the "header bytes" field as stored */
    uint32_t n_layers;
    size_t layers_at;          /* offset of the first layer record */
    size_t tail_at;            /* offset of the optimizer field */
    size_t floats_at;          /* end of the header: first parameter float */
    uint64_t n_params, n_state;
    uint32_t has_m, has_v;
    uint64_t total;            /* bytes the whole file must have */
} layout;

static ct_status truncated(ct_err *err, const char *src, size_t len, uint64_t need)
{
    return ct_fail(err, CT_ERR_DATA, "%s: truncated (%zu bytes, expected at least %llu)",
                   src, len, (unsigned long long)need);
}

/* Bytes still needed after the current layer record for `later` more layers, the tail, the CRC.
 * At most 2^32 * 44 + 68: cannot overflow. */
static uint64_t min_rest(uint64_t later)
{
    return later * LAYER_FIXED_BYTES + TAIL_BYTES + CRC_BYTES;
}

/* Skips the layer records, checking each fits before stepping over it. */
static ct_status scan_layers(cursor *c, layout *lo, const char *src, ct_err *err)
{
    /* Every layer needs at least LAYER_FIXED_BYTES: refuses a huge count before the loop. */
    if (!has(c, min_rest(lo->n_layers)))
        return truncated(err, src, c->len, c->pos + min_rest(lo->n_layers));
    for (uint32_t i = 0; i < lo->n_layers; i++) {
        uint64_t later = min_rest(lo->n_layers - 1u - i);
        uint32_t name_len = get_u32(c->buf + c->pos);
        uint64_t record = (uint64_t)LAYER_FIXED_BYTES + name_len;
        if (!has(c, record + later))
            return truncated(err, src, c->len, c->pos + record + later);
        c->pos += (size_t)record;
    }
    return CT_OK;
}

/* Skips version 3's training set record (the cursor at it, its fixed bytes known to fit), checking
 * each class name fits before stepping over it; the count is bounded by the file's length first. */
static ct_status scan_dataset(cursor *c, const char *src, ct_err *err)
{
    c->pos += 8u;                             /* index hash */
    uint32_t n = r_u32(c);
    if (!has(c, (uint64_t)n * 4u + CRC_BYTES))
        return truncated(err, src, c->len, c->pos + (uint64_t)n * 4u + CRC_BYTES);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t record = 4u + (uint64_t)get_u32(c->buf + c->pos);
        uint64_t later = (uint64_t)(n - 1u - i) * 4u + CRC_BYTES;
        if (!has(c, record + later))
            return truncated(err, src, c->len, c->pos + record + later);
        c->pos += (size_t)record;
    }
    return CT_OK;
}

/* Pass 1: offsets and the expected length; nothing is interpreted beyond that. */
static ct_status scan_layout(const uint8_t *buf, size_t len, const char *src, layout *lo, ct_err *err)
{
    cursor c = { buf, len, MAGIC_BYTES };
    lo->version = r_u32(&c);
    lo->header_field = r_u32(&c);
    lo->n_layers = r_u32(&c);
    lo->layers_at = c.pos;
    ct_status st = scan_layers(&c, lo, src, err);
    if (st != CT_OK)
        return st;
    lo->tail_at = c.pos;
    c.pos += 4u;                              /* optimizer */
    lo->n_params = r_u64(&c);
    lo->n_state = r_u64(&c);
    lo->has_m = r_u32(&c);
    lo->has_v = r_u32(&c);
    /* at most len + MIXED_BYTES: the layer scan left TAIL_BYTES + CRC_BYTES from tail_at */
    size_t after_tail = lo->tail_at + TAIL_BYTES + (lo->version >= 2u ? MIXED_BYTES : 0u);
    lo->floats_at = after_tail;
    if (lo->version >= 3u) {
        if ((uint64_t)after_tail + DATASET_FIXED_BYTES + CRC_BYTES > len)
            return truncated(err, src, len, (uint64_t)after_tail + DATASET_FIXED_BYTES + CRC_BYTES);
        c.pos = after_tail;
        ct_status st = scan_dataset(&c, src, err);
        if (st != CT_OK)
            return st;
        lo->floats_at = c.pos;
    }
    if (lo->floats_at + CRC_BYTES > len)
        return truncated(err, src, len, lo->floats_at + CRC_BYTES);

    /* total = floats_at + 4 * (n_params * (1 + has_m + has_v) + n_state) + CRC, overflow-checked */
    uint64_t per_param = 1u + (lo->has_m != 0) + (lo->has_v != 0);
    uint64_t room = (UINT64_MAX - lo->floats_at - CRC_BYTES) / 4u;
    if (lo->n_params > room / per_param || lo->n_state > room - lo->n_params * per_param)
        return ct_fail(err, CT_ERR_DATA, "%s: malformed: %llu parameters and %llu state values "
                       "cannot fit in any file", src, (unsigned long long)lo->n_params,
                       (unsigned long long)lo->n_state);
    lo->total = lo->floats_at + 4u * (lo->n_params * per_param + lo->n_state) + CRC_BYTES;
    return CT_OK;
}

/* Magic, minimum length, version: what must hold before the layout can even be read. */
static ct_status check_head(const uint8_t *buf, size_t len, const char *src, ct_err *err)
{
    size_t cmp = len < MAGIC_BYTES ? len : MAGIC_BYTES;
    if (memcmp(buf, CT_CHECKPOINT_MAGIC, cmp) != 0)
        return ct_fail(err, CT_ERR_DATA, "%s: not a cutrain checkpoint", src);
    if (len >= MAGIC_BYTES + 4u) {
        /* Before the length check: a newer format may well be laid out differently. */
        uint32_t version = get_u32(buf + MAGIC_BYTES);
        if (version > CT_CHECKPOINT_VERSION)
            return ct_fail(err, CT_ERR_DATA, "%s: written by a newer cutrain (format version %u, "
                           "this build reads up to %u)", src, (unsigned)version,
                           (unsigned)CT_CHECKPOINT_VERSION);
        if (version == 0)
            return ct_fail(err, CT_ERR_DATA, "%s: unsupported format version 0", src);
    }
    if (len < MIN_FILE_BYTES)
        return truncated(err, src, len, MIN_FILE_BYTES);
    return CT_OK;
}

/* Length against the layout, then the CRC over everything before it. */
static ct_status check_length_and_crc(const uint8_t *buf, size_t len, const layout *lo,
                                      const char *src, ct_err *err)
{
    if ((uint64_t)len < lo->total)
        return ct_fail(err, CT_ERR_DATA, "%s: truncated (%zu bytes, expected %llu)",
                       src, len, (unsigned long long)lo->total);
    if ((uint64_t)len > lo->total)
        return ct_fail(err, CT_ERR_DATA, "%s: %llu bytes after the end of the checkpoint "
                       "(%llu bytes)", src, (unsigned long long)(len - lo->total),
                       (unsigned long long)lo->total);
    if (crc_of(buf, len - CRC_BYTES) != get_u32(buf + len - CRC_BYTES))
        return ct_fail(err, CT_ERR_DATA, "%s: bad CRC: the file is corrupt", src);
    return CT_OK;
}

/* Pass 2, one layer record: validated values copied into *l (name allocated). */
static ct_status read_layer(cursor *c, uint32_t index, const char *src, ct_checkpoint_layer *l,
                            ct_err *err)
{
    if (!has(c, LAYER_FIXED_BYTES))
        return truncated(err, src, c->len, c->pos + LAYER_FIXED_BYTES);
    uint32_t name_len = r_u32(c);
    if (name_len == 0 || name_len > MAX_NAME_BYTES)
        return ct_fail(err, CT_ERR_DATA, "%s: layer %u: name length %u (must be 1..%u)",
                       src, (unsigned)index, (unsigned)name_len, MAX_NAME_BYTES);
    if (!has(c, (uint64_t)name_len + LAYER_FIXED_BYTES - 4u))
        return truncated(err, src, c->len, c->pos + name_len + LAYER_FIXED_BYTES - 4u);
    /* A NUL inside would silently shorten the C string the caller sees. */
    if (memchr(c->buf + c->pos, 0, name_len))
        return ct_fail(err, CT_ERR_DATA, "%s: layer %u: name contains a NUL byte", src, (unsigned)index);
    l->name = malloc((size_t)name_len + 1u);
    if (!l->name)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory", src);
    memcpy(l->name, c->buf + c->pos, name_len);
    l->name[name_len] = '\0';
    c->pos += name_len;
    l->type = r_u32(c);
    l->h = to_i32(r_u32(c));
    l->w = to_i32(r_u32(c));
    l->c = to_i32(r_u32(c));
    l->w_count = r_u64(c);
    l->b_count = r_u64(c);
    l->state_count = r_u64(c);
    if (l->type >= CT_LAYER_TYPE_COUNT)
        return ct_fail(err, CT_ERR_DATA, "%s: layer %u: unknown layer type %u",
                       src, (unsigned)index, (unsigned)l->type);
    if (l->h < 0 || l->w < 0 || l->c < 0)
        return ct_fail(err, CT_ERR_DATA, "%s: layer %u: negative output shape %dx%dx%d",
                       src, (unsigned)index, (int)l->h, (int)l->w, (int)l->c);
    return CT_OK;
}

/* a += b, refusing overflow (a lying file could make the sum wrap back to the right total). */
static int add_u64(uint64_t *a, uint64_t b)
{
    if (b > UINT64_MAX - *a)
        return 0;
    *a += b;
    return 1;
}

static ct_status read_layers(cursor *c, const char *src, ct_checkpoint *ck, ct_err *err)
{
    /* n_layers * LAYER_FIXED_BYTES <= len was established by the layout pass. */
    ck->layers = calloc(ck->n_layers ? ck->n_layers : 1u, sizeof *ck->layers);
    if (!ck->layers)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory", src);
    uint64_t params = 0, state = 0;
    for (uint32_t i = 0; i < ck->n_layers; i++) {
        ct_checkpoint_layer *l = &ck->layers[i];
        ct_status st = read_layer(c, i, src, l, err);
        if (st != CT_OK)
            return st;
        if (!add_u64(&params, l->w_count) || !add_u64(&params, l->b_count) ||
            !add_u64(&state, l->state_count))
            return ct_fail(err, CT_ERR_DATA, "%s: layer %u: parameter counts overflow", src, (unsigned)i);
    }
    if (params != ck->n_params)
        return ct_fail(err, CT_ERR_DATA, "%s: parameter count %llu does not match the layers' %llu",
                       src, (unsigned long long)ck->n_params, (unsigned long long)params);
    if (state != ck->n_state)
        return ct_fail(err, CT_ERR_DATA, "%s: state count %llu does not match the layers' %llu",
                       src, (unsigned long long)ck->n_state, (unsigned long long)state);
    return CT_OK;
}

static ct_status check_flag(uint32_t v, const char *what, const char *src, ct_err *err)
{
    if (v > 1)
        return ct_fail(err, CT_ERR_DATA, "%s: %s is %u (must be 0 or 1)", src, what, (unsigned)v);
    return CT_OK;
}

/* Pass 2, the fields after the layers (the counts were read by pass 1). */
static ct_status read_tail(cursor *c, const layout *lo, const char *src, ct_checkpoint *ck, ct_err *err)
{
    if (!has(c, TAIL_BYTES))
        return truncated(err, src, c->len, c->pos + TAIL_BYTES);
    ck->optimizer = r_u32(c);
    c->pos += 8u + 8u + 4u + 4u;              /* counts and m/v flags: taken from the layout */
    ck->epoch = to_i32(r_u32(c));
    ck->step = to_i64(r_u64(c));
    ck->seed = r_u64(c);
    ck->loss_scale = bits_f32(r_u32(c));
    ck->has_master = r_u32(c);
    ck->test_accuracy = bits_f64(r_u64(c));
    if (ck->optimizer > CT_OPT_ADAMW)
        return ct_fail(err, CT_ERR_DATA, "%s: unknown optimizer %u", src, (unsigned)ck->optimizer);
    ct_status st = check_flag(lo->has_m, "has_m", src, err);
    if (st == CT_OK)
        st = check_flag(lo->has_v, "has_v", src, err);
    if (st == CT_OK)
        st = check_flag(ck->has_master, "has_master", src, err);
    if (st != CT_OK || lo->version < 2u) {
        ck->precision = CT_PREC_FP32;      /* version 1 is fp32 throughout */
        return st;
    }
    if (!has(c, MIXED_BYTES))
        return truncated(err, src, c->len, c->pos + MIXED_BYTES);
    ck->precision = r_u32(c);
    ck->has_scaler = r_u32(c);
    ck->clean_steps = to_i32(r_u32(c));
    ck->growth_steps = to_i32(r_u32(c));
    ck->applied_steps = to_i64(r_u64(c));
    ck->skipped_steps = to_i64(r_u64(c));
    if (ck->precision > CT_PREC_BF16)
        return ct_fail(err, CT_ERR_DATA, "%s: unknown precision %u", src, (unsigned)ck->precision);
    st = check_flag(ck->has_scaler, "has_scaler", src, err);
    if (st == CT_OK && ck->has_scaler &&
        (!(ck->loss_scale >= 1.0f && ck->loss_scale <= 0x1p24f) || ck->clean_steps < 0 || ck->growth_steps < 0 ||
         ck->applied_steps < 0 || ck->skipped_steps < 0))
        st = ct_fail(err, CT_ERR_DATA, "%s: bad loss scaler (scale %g, %d clean steps, growth %d, %lld applied, "
                     "%lld skipped)", src, (double)ck->loss_scale, (int)ck->clean_steps, (int)ck->growth_steps,
                     (long long)ck->applied_steps, (long long)ck->skipped_steps);
    return st;
}

/* Pass 2, version 3's training set record: the hash and the class names, each validated. */
static ct_status read_dataset(cursor *c, const char *src, ct_checkpoint *ck, ct_err *err)
{
    if (!has(c, DATASET_FIXED_BYTES))
        return truncated(err, src, c->len, c->pos + DATASET_FIXED_BYTES);
    ck->index_hash = r_u64(c);
    uint32_t n = r_u32(c);
    if (n > CT_CHECKPOINT_MAX_CLASSES)
        return ct_fail(err, CT_ERR_DATA, "%s: %u class names (at most %u)", src, (unsigned)n,
                       (unsigned)CT_CHECKPOINT_MAX_CLASSES);
    if (!has(c, (uint64_t)n * 4u))            /* established by the layout pass */
        return truncated(err, src, c->len, c->pos + (uint64_t)n * 4u);
    if (n == 0)
        return CT_OK;
    ck->class_names = calloc(n, sizeof *ck->class_names);
    if (!ck->class_names)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory", src);
    ck->n_classes = n;
    for (uint32_t i = 0; i < n; i++) {
        if (!has(c, 4u))
            return truncated(err, src, c->len, c->pos + 4u);
        uint32_t len = r_u32(c);
        if (len == 0 || len > CT_CHECKPOINT_MAX_NAME)
            return ct_fail(err, CT_ERR_DATA, "%s: class %u: name length %u (must be 1..%u)", src, (unsigned)i,
                           (unsigned)len, (unsigned)CT_CHECKPOINT_MAX_NAME);
        if (!has(c, len))
            return truncated(err, src, c->len, c->pos + len);
        if (memchr(c->buf + c->pos, 0, len))
            return ct_fail(err, CT_ERR_DATA, "%s: class %u: name contains a NUL byte", src, (unsigned)i);
        char *name = malloc((size_t)len + 1u);
        if (!name)
            return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory", src);
        memcpy(name, c->buf + c->pos, len);
        name[len] = '\0';
        c->pos += len;
        ck->class_names[i] = name;
    }
    return CT_OK;
}

/* Allocates n floats (at least one, so a present-but-empty array stays non-NULL) and decodes. */
static ct_status read_floats(cursor *c, uint64_t n, const char *src, float **out, ct_err *err)
{
    if (!has(c, n * 4u))                      /* n * 4 <= len: established by the layout pass */
        return truncated(err, src, c->len, c->pos + n * 4u);
    float *x = malloc(n ? (size_t)n * sizeof *x : sizeof *x);
    if (!x)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory for %llu floats", src, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        x[i] = bits_f32(r_u32(c));
    *out = x;
    return CT_OK;
}

static ct_status read_body(const uint8_t *buf, size_t len, const layout *lo, const char *src,
                           ct_checkpoint *ck, ct_err *err)
{
    if (lo->header_field != lo->floats_at)
        return ct_fail(err, CT_ERR_DATA, "%s: header size field is %u, the header is %zu bytes",
                       src, (unsigned)lo->header_field, lo->floats_at);
    ck->n_layers = lo->n_layers;
    ck->n_params = lo->n_params;
    ck->n_state = lo->n_state;
    cursor c = { buf, len - CRC_BYTES, lo->layers_at };
    ck->version = lo->version;
    ct_status st = read_layers(&c, src, ck, err);
    if (st == CT_OK)
        st = read_tail(&c, lo, src, ck, err);
    if (st == CT_OK && lo->version >= 3u)
        st = read_dataset(&c, src, ck, err);
    if (st == CT_OK)
        st = read_floats(&c, ck->n_params, src, &ck->params, err);
    if (st == CT_OK && lo->has_m)
        st = read_floats(&c, ck->n_params, src, &ck->m, err);
    if (st == CT_OK && lo->has_v)
        st = read_floats(&c, ck->n_params, src, &ck->v, err);
    if (st == CT_OK)
        st = read_floats(&c, ck->n_state, src, &ck->state, err);
    if (st == CT_OK && c.pos != c.len)       /* the layout pass guarantees this; belt and braces */
        st = ct_fail(err, CT_ERR_DATA, "%s: %zu bytes after the end", src, c.len - c.pos);
    return st;
}

ct_status ct_checkpoint_parse(const uint8_t *buf, size_t len, const char *source, ct_checkpoint *ck, ct_err *err)
{
    const char *src = source ? source : "checkpoint";
    memset(ck, 0, sizeof *ck);
    if (!buf && len)
        return ct_fail(err, CT_ERR_USAGE, "%s: no buffer", src);
    ct_status st = check_head(buf ? buf : (const uint8_t *)"", len, src, err);
    if (st != CT_OK)
        return st;
    layout lo = { 0 };
    st = scan_layout(buf, len, src, &lo, err);
    if (st == CT_OK)
        st = check_length_and_crc(buf, len, &lo, src, err);
    if (st == CT_OK)
        st = read_body(buf, len, &lo, src, ck, err);
    if (st != CT_OK)
        ct_checkpoint_free(ck);
    return st;
}

void ct_checkpoint_free(ct_checkpoint *ck)
{
    if (!ck)
        return;
    if (ck->layers)
        for (uint32_t i = 0; i < ck->n_layers; i++)
            free(ck->layers[i].name);
    free(ck->layers);
    if (ck->class_names)
        for (uint32_t i = 0; i < ck->n_classes; i++)
            free(ck->class_names[i]);
    free(ck->class_names);
    free(ck->params);
    free(ck->m);
    free(ck->v);
    free(ck->state);
    memset(ck, 0, sizeof *ck);
}

/* ---- files ---- */

/* write() until done: it may write less than asked, or be interrupted by a signal. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        size_t piece = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = write(fd, buf, piece);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;                  /* no progress and no error: do not spin */
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int fsync_retry(int fd)
{
    int rc;
    do
        rc = fsync(fd);
    while (rc != 0 && errno == EINTR);
    return rc;
}

/* The folder holding path ("." when path has no slash), malloc'd. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 1u : slash == path ? 1u : (size_t)(slash - path);
    char *dir = malloc(n + 1u);
    if (!dir)
        return NULL;
    if (!slash)
        memcpy(dir, ".", 1u);
    else
        memcpy(dir, slash == path ? "/" : path, n);
    dir[n] = '\0';
    return dir;
}

/* Makes the rename itself durable: without this a crash could bring back the old entry. */
static ct_status fsync_folder(const char *path, ct_err *err)
{
    char *dir = folder_of(path);
    if (!dir)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory", path);
    int flags = O_RDONLY;
#ifdef O_DIRECTORY
    flags |= O_DIRECTORY;
#endif
    ct_status st = CT_OK;
    int fd = open(dir, flags);
    if (fd < 0) {
        st = ct_fail(err, CT_ERR_IO, "%s: saved, but cannot open folder %s to sync it: %s",
                     path, dir, strerror(errno));
    } else {
        /* EINVAL: the file system cannot sync folders; there is nothing more to do then. */
        if (fsync_retry(fd) != 0 && errno != EINVAL)
            st = ct_fail(err, CT_ERR_IO, "%s: saved, but syncing folder %s failed: %s",
                         path, dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return st;
}

/* Creates the temporary file exclusively. A leftover with the same name can only come from a
 * dead process that had our pid (or a racing thread of ours, whose rename will then fail
 * harmlessly): remove it and try once more. */
static int create_temp(const char *tmp)
{
    int fd;
    for (int attempt = 0; attempt < 2; attempt++) {
        do
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        while (fd < 0 && errno == EINTR);
        if (fd >= 0 || errno != EEXIST || attempt == 1)
            break;
        unlink(tmp);
    }
    return fd;
}

/* Writes, syncs and closes the temporary file; on failure it is closed but left for the caller
 * to remove. */
static ct_status fill_temp(int fd, const char *path, const char *tmp, const uint8_t *buf, size_t len,
                           ct_err *err)
{
    const char *what = NULL;
    if (write_all(fd, buf, len) != 0)
        what = "writing";
    else if (fsync_retry(fd) != 0)
        what = "syncing";
    int saved = errno;
    /* close() can report a delayed write error (NFS); EINTR leaves the fd closed on Linux. */
    if (close(fd) != 0 && errno != EINTR && !what) {
        what = "closing";
        saved = errno;
    }
    if (what)
        return ct_fail(err, CT_ERR_IO, "%s: %s temporary file %s failed: %s",
                       path, what, tmp, strerror(saved));
    return CT_OK;
}

ct_status ct_checkpoint_write_file(const char *path, const uint8_t *buf, size_t len, ct_err *err)
{
    if (!path || (!buf && len))
        return ct_fail(err, CT_ERR_USAGE, "ct_checkpoint_write_file: %s is NULL", path ? "buf" : "path");
    /* Same folder as path, so rename() stays within one file system and is atomic. The suffix
     * keeps the ".ckpt" extension off the end, so a folder scan never picks up a half file. */
    size_t tmp_size = strlen(path) + 32u;
    char *tmp = malloc(tmp_size);
    if (!tmp)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());

    ct_status st = CT_OK;
    int fd = create_temp(tmp);
    if (fd < 0) {
        st = ct_fail(err, CT_ERR_IO, "%s: cannot create temporary file %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return st;
    }
    st = fill_temp(fd, path, tmp, buf, len, err);
    if (st == CT_OK && rename(tmp, path) != 0)
        st = ct_fail(err, CT_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (st != CT_OK) {
        unlink(tmp);                          /* path itself was not touched */
        free(tmp);
        return st;
    }
    free(tmp);
    return fsync_folder(path, err);
}

/* Class names have no length cap in the format: a generous one per name keeps the bound finite. */
#define BOUND_CLASS_NAME_BYTES 4096u

size_t ct_checkpoint_bound(uint32_t n_layers, uint64_t n_params, uint64_t n_state, uint32_t classes)
{
    uint64_t head = (uint64_t)FIXED_HEAD_BYTES + TAIL_BYTES + MIXED_BYTES + DATASET_FIXED_BYTES +
                    (uint64_t)n_layers * (LAYER_FIXED_BYTES + MAX_NAME_BYTES) +
                    (uint64_t)classes * (4u + BOUND_CLASS_NAME_BYTES) + CRC_BYTES;
    /* parameters, both moments, the state: at most 4 * (3 * n_params + n_state) bytes */
    if (n_params > UINT64_MAX / 16u || n_state > UINT64_MAX / 8u)
        return SIZE_MAX;
    uint64_t floats = 4u * (3u * n_params + n_state), total = head + floats;
    return total < head || total > SIZE_MAX ? SIZE_MAX : (size_t)total;
}

ct_status ct_checkpoint_read_file(const char *path, size_t limit, uint8_t **buf, size_t *len, ct_err *err)
{
    *buf = NULL;
    *len = 0;
    if (!path)
        return ct_fail(err, CT_ERR_USAGE, "ct_checkpoint_read_file: path is NULL");
    const char *what = limit ? "a cutrain checkpoint of this network" : "a cutrain checkpoint";
    return ct_file_read(path, CT_FILE_STREAM, limit, what, buf, len, err);
}
