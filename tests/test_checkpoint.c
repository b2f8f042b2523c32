/* Checkpoint format and files: bit-exact round trips (memory and disk), refusal of every prefix,
 * every flipped byte, newer versions, wrong magic, trailing bytes and lying counts, each with its
 * message; the atomic replace under SIGKILL; a write into a missing folder. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE   /* mkdtemp */
#endif
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint/checkpoint.h"
#include "tests/test_util.h"

#define SRC "small.ckpt"
#define OFF_VERSION 8u
#define OFF_HEADER 12u
#define OFF_LAYERS 16u
#define TAIL_BYTES 64u

/* ---- building checkpoints ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Rewrites the trailing CRC after a deliberate edit, so the check under test is what fails. */
static void recrc(uint8_t *buf, size_t len)
{
    put_u32(buf + len - 4, (uint32_t)crc32(0L, buf, (uInt)(len - 4)));
}

static float *floats(uint64_t n)
{
    return calloc(n ? n : 1, sizeof(float));
}

static void set_layer(ct_checkpoint_layer *l, const char *name, ct_layer_type type, int h, int w, int c,
                      uint64_t wc, uint64_t bc, uint64_t sc)
{
    l->name = strdup(name);
    l->type = type;
    l->h = h;
    l->w = w;
    l->c = c;
    l->w_count = wc;
    l->b_count = bc;
    l->state_count = sc;
}

/* Dense (weights + bias), conv, batchnorm (with running state); floats include -0, NaN with a
 * payload, infinities and a subnormal, which must all survive bit for bit. */
static void make_small(ct_checkpoint *ck, ct_optimizer opt, int with_m, int with_v)
{
    memset(ck, 0, sizeof *ck);
    ck->n_layers = 3;
    ck->layers = calloc(3, sizeof *ck->layers);
    set_layer(&ck->layers[0], "dense1", CT_LAYER_DENSE, 1, 1, 3, 12, 3, 0);
    set_layer(&ck->layers[1], "conv1", CT_LAYER_CONV2D, 4, 4, 2, 18, 2, 0);
    set_layer(&ck->layers[2], "bn1", CT_LAYER_BATCHNORM, 4, 4, 2, 2, 2, 4);
    ck->optimizer = opt;
    ck->n_params = 39;
    ck->n_state = 4;
    ck->params = floats(ck->n_params);
    for (uint64_t i = 0; i < ck->n_params; i++)
        ck->params[i] = (float)i * 0.37f - 3.0f;
    uint32_t nan_bits = 0x7fc01234u;
    memcpy(&ck->params[0], &nan_bits, sizeof nan_bits);
    ck->params[1] = -0.0f;
    ck->params[2] = INFINITY;
    ck->params[3] = -INFINITY;
    ck->params[4] = FLT_MIN / 8.0f;
    ck->params[5] = FLT_MAX;
    if (with_m) {
        ck->m = floats(ck->n_params);
        for (uint64_t i = 0; i < ck->n_params; i++)
            ck->m[i] = (float)i * 1e-3f - 0.01f;
    }
    if (with_v) {
        ck->v = floats(ck->n_params);
        for (uint64_t i = 0; i < ck->n_params; i++)
            ck->v[i] = (float)(i * i) * 1e-6f;
    }
    ck->state = floats(ck->n_state);
    ck->state[0] = 0.5f;
    ck->state[1] = 1.25f;
    ck->state[2] = -0.0f;
    ck->state[3] = 1e-38f;
    ck->epoch = 7;
    ck->step = 123456789012LL;
    ck->seed = 0xDEADBEEFCAFEF00DULL;
    ck->loss_scale = 1.0f;
    ck->has_master = 0;
    ck->test_accuracy = 0.8875;
}

/* One dense layer of n parameters with Adam moments: a few hundred KB; salt makes A differ from B. */
static void make_big(ct_checkpoint *ck, uint64_t n, uint32_t salt)
{
    memset(ck, 0, sizeof *ck);
    ck->n_layers = 1;
    ck->layers = calloc(1, sizeof *ck->layers);
    set_layer(&ck->layers[0], "big", CT_LAYER_DENSE, 1, 1, 10, n - 10, 10, 0);
    ck->optimizer = CT_OPT_ADAM;
    ck->n_params = n;
    ck->params = floats(n);
    ck->m = floats(n);
    ck->v = floats(n);
    ck->state = floats(0);
    for (uint64_t i = 0; i < n; i++) {
        ck->params[i] = (float)(i % 1000) * 0.001f + (float)salt;
        ck->m[i] = (float)salt * 0.5f;
        ck->v[i] = (float)i;
    }
    ck->epoch = (int32_t)salt;
    ck->step = (int64_t)salt * 1000;
    ck->loss_scale = 1.0f;
    ck->test_accuracy = -1.0;
}

static uint8_t *to_bytes(const ct_checkpoint *ck, size_t *len)
{
    *len = ct_checkpoint_size(ck);
    uint8_t *buf = malloc(*len);
    ct_checkpoint_serialize(ck, buf);
    return buf;
}

/* ---- comparing ---- */

/* Empty arrays compare equal whether NULL or not (presence of m and v is checked apart). */
static int same_floats(const float *a, const float *b, uint64_t n)
{
    if (n == 0)
        return 1;
    if (!a || !b)
        return a == b;
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Empty when equal, else the first difference (bitwise for floats and doubles). */
static const char *difference(const ct_checkpoint *a, const ct_checkpoint *b)
{
    if (a->n_layers != b->n_layers) return "n_layers";
    for (uint32_t i = 0; i < a->n_layers; i++) {
        const ct_checkpoint_layer *x = &a->layers[i], *y = &b->layers[i];
        if (strcmp(x->name, y->name) != 0) return "layer name";
        if (x->type != y->type) return "layer type";
        if (x->h != y->h || x->w != y->w || x->c != y->c) return "layer shape";
        if (x->w_count != y->w_count || x->b_count != y->b_count || x->state_count != y->state_count)
            return "layer counts";
    }
    if (a->optimizer != b->optimizer) return "optimizer";
    if (a->n_params != b->n_params || a->n_state != b->n_state) return "counts";
    if (!same_floats(a->params, b->params, a->n_params)) return "params";
    if ((a->m == NULL) != (b->m == NULL) || (a->m && !same_floats(a->m, b->m, a->n_params))) return "m";
    if ((a->v == NULL) != (b->v == NULL) || (a->v && !same_floats(a->v, b->v, a->n_params))) return "v";
    if (!same_floats(a->state, b->state, a->n_state)) return "state";
    if (a->epoch != b->epoch || a->step != b->step || a->seed != b->seed) return "epoch/step/seed";
    if (memcmp(&a->loss_scale, &b->loss_scale, sizeof a->loss_scale) != 0) return "loss scale";
    if (a->has_master != b->has_master) return "has_master";
    if (memcmp(&a->test_accuracy, &b->test_accuracy, sizeof a->test_accuracy) != 0) return "test accuracy";
    if (a->precision != b->precision || a->has_scaler != b->has_scaler) return "precision/has_scaler";
    if (a->clean_steps != b->clean_steps || a->growth_steps != b->growth_steps ||
        a->applied_steps != b->applied_steps || a->skipped_steps != b->skipped_steps) return "scaler";
    if (a->index_hash != b->index_hash) return "index hash";
    if (a->n_classes != b->n_classes) return "class count";
    for (uint32_t i = 0; i < a->n_classes; i++)
        if (strcmp(a->class_names[i], b->class_names[i]) != 0) return "class name";
    return "";
}

static int is_zeroed(const ct_checkpoint *ck)
{
    return !ck->layers && !ck->params && !ck->m && !ck->v && !ck->state && ck->n_layers == 0 &&
           ck->n_params == 0 && ck->n_state == 0 && !ck->class_names && ck->n_classes == 0 && ck->index_hash == 0;
}

/* A training set's record (version 3): an index hash and class names, one of them the longest
 * allowed, one with a comma and a space (a folder may be called anything but NUL and '/'). */
static const char *const set_names[] = {"T-shirt", "trouser, long", "bag"};
#define SET_HASH 0x0123456789abcdefULL

static void add_set_record(ct_checkpoint *ck, uint64_t hash, int with_names)
{
    ck->index_hash = hash;
    if (!with_names)
        return;
    ck->n_classes = 4;
    ck->class_names = calloc(4, sizeof *ck->class_names);
    for (int i = 0; i < 3; i++)
        ck->class_names[i] = strdup(set_names[i]);
    ck->class_names[3] = malloc(256);
    memset(ck->class_names[3], 'z', 255);
    ck->class_names[3][255] = '\0';
}

/* Where the record starts: it ends the header, right before the first parameter float. */
static size_t set_record_at(const ct_checkpoint *ck, const uint8_t *buf)
{
    size_t n = 8u + 4u;
    for (uint32_t i = 0; i < ck->n_classes; i++)
        n += 4u + strlen(ck->class_names[i]);
    return get_u32(buf + OFF_HEADER) - n;
}

static int starts_with_source(const char *msg, const char *src)
{
    size_t n = strlen(src);
    return strncmp(msg, src, n) == 0 && msg[n] == ':';
}

/* Parses an exact-size heap copy (so ASan sees any read past the end) and expects a refusal
 * with `status` and a message containing `words` (NULL: any message). */
static void expect_refusal(const uint8_t *buf, size_t len, ct_status status, const char *words, const char *what)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (len)
        memcpy(copy, buf, len);
    ct_checkpoint ck;
    ct_err err = { 0 };
    ct_status st = ct_checkpoint_parse(copy, len, SRC, &ck, &err);
    CHECK_MSG(st == status, "%s: status %d, expected %d (%s)", what, (int)st, (int)status, err.msg);
    CHECK_MSG(starts_with_source(err.msg, SRC), "%s: message does not name the file: %s", what, err.msg);
    if (words)
        CHECK_MSG(ct_contains(err.msg, words), "%s: message lacks \"%s\": %s", what, words, err.msg);
    CHECK_MSG(is_zeroed(&ck), "%s: checkpoint not zeroed after a refusal", what);
    if (st == CT_OK)
        ct_checkpoint_free(&ck);
    free(copy);
}

/* ---- round trips ---- */

static void round_trip(const ct_checkpoint *in, const char *what)
{
    size_t len;
    uint8_t *buf = to_bytes(in, &len);
    ct_checkpoint out;
    ct_err err = { 0 };
    ct_status st = ct_checkpoint_parse(buf, len, SRC, &out, &err);
    CHECK_MSG(st == CT_OK, "%s: %s", what, err.msg);
    if (st == CT_OK) {
        const char *diff = difference(in, &out);
        CHECK_MSG(diff[0] == '\0', "%s: %s differs after the round trip", what, diff);
        size_t len2;
        uint8_t *buf2 = to_bytes(&out, &len2);
        CHECK_MSG(len2 == len && memcmp(buf, buf2, len) == 0, "%s: re-serialized bytes differ", what);
        free(buf2);
    }
    ct_checkpoint_free(&out);
    CHECK(is_zeroed(&out));
    free(buf);
}

static void test_round_trips(void)
{
    ct_checkpoint ck;
    make_small(&ck, CT_OPT_ADAM, 1, 1);
    round_trip(&ck, "adam");
    ct_checkpoint_free(&ck);
    make_small(&ck, CT_OPT_SGD, 0, 0);
    round_trip(&ck, "sgd");
    ct_checkpoint_free(&ck);
    make_small(&ck, CT_OPT_MOMENTUM, 1, 0);
    round_trip(&ck, "momentum");
    ct_checkpoint_free(&ck);

    /* Negative values, fp16-style flags and a 255-byte name (the longest allowed). */
    make_small(&ck, CT_OPT_ADAMW, 1, 1);
    ck.epoch = -1;
    ck.step = -5;
    ck.has_master = 1;
    ck.loss_scale = 65536.0f;
    ck.test_accuracy = -1.0;
    free(ck.layers[1].name);
    ck.layers[1].name = malloc(256);
    memset(ck.layers[1].name, 'n', 255);
    ck.layers[1].name[255] = '\0';
    round_trip(&ck, "adamw, long name");
    ct_checkpoint_free(&ck);

    /* version 2: an fp16 run with its scaler, and a bf16 one without; fp32 stays version 1 */
    static const uint32_t precisions[] = {CT_PREC_FP16, CT_PREC_BF16, CT_PREC_FP32};
    for (int p = 0; p < 3; p++) {
        make_small(&ck, CT_OPT_ADAM, 1, 1);
        ck.precision = precisions[p];
        ck.has_master = ck.precision != CT_PREC_FP32;
        ck.has_scaler = ck.precision == CT_PREC_FP16;
        if (ck.has_scaler) {
            ck.loss_scale = 4096.0f;
            ck.clean_steps = 17;
            ck.growth_steps = 2000;
            ck.applied_steps = 123456789012LL;
            ck.skipped_steps = 7;
        }
        size_t len;
        uint8_t *bytes = to_bytes(&ck, &len);
        CHECK_MSG(get_u32(bytes + 8) == (ck.precision == CT_PREC_FP32 ? 1u : 2u), "precision %u written as version %u",
                  (unsigned)ck.precision, (unsigned)get_u32(bytes + 8));
        free(bytes);
        round_trip(&ck, ck.precision == CT_PREC_FP16 ? "fp16 with scaler" : ck.precision == CT_PREC_BF16 ? "bf16" : "fp32");
        ct_checkpoint_free(&ck);
    }
    /* a scaler outside the scale's bounds is refused */
    make_small(&ck, CT_OPT_SGD, 0, 0);
    ck.precision = CT_PREC_FP16;
    ck.has_scaler = 1;
    ck.loss_scale = 0.25f;
    {
        size_t len;
        uint8_t *bytes = to_bytes(&ck, &len);
        expect_refusal(bytes, len, CT_ERR_DATA, "bad loss scaler", "scale below 1");
        free(bytes);
    }
    ct_checkpoint_free(&ck);

    /* version 3: a training set's record, with and without names, fp32 and fp16; a hash of 0 and
     * no names say nothing and stay version 1 */
    for (int k = 0; k < 5; k++) {
        make_small(&ck, CT_OPT_ADAM, 1, 1);
        add_set_record(&ck, k == 1 ? 0 : SET_HASH, k != 2 && k != 4);
        if (k == 3) {
            ck.precision = CT_PREC_FP16;
            ck.has_master = 1;
            ck.has_scaler = 1;
            ck.loss_scale = 1024.0f;
        }
        if (k == 4)
            ck.index_hash = 0;
        size_t len;
        uint8_t *bytes = to_bytes(&ck, &len);
        uint32_t want = k == 4 ? 1u : 3u;
        CHECK_MSG(get_u32(bytes + 8) == want, "set record %d written as version %u", k, (unsigned)get_u32(bytes + 8));
        free(bytes);
        char what[64];
        snprintf(what, sizeof what, "training set record %d", k);
        round_trip(&ck, what);
        ct_checkpoint_free(&ck);
    }
    /* a file of an older version is written back as that version (the fuzzer's round trip): an
     * fp32 checkpoint read as version 2, or a version 3 one saying nothing of the set */
    for (uint32_t v = 2; v <= 3; v++) {
        make_small(&ck, CT_OPT_SGD, 0, 0);
        ck.version = v;
        size_t len;
        uint8_t *bytes = to_bytes(&ck, &len);
        CHECK_MSG(get_u32(bytes + 8) == v, "read as version %u, written as %u", (unsigned)v,
                  (unsigned)get_u32(bytes + 8));
        ct_checkpoint back;
        ct_err err = { 0 };
        CHECK_MSG(ct_checkpoint_parse(bytes, len, SRC, &back, &err) == CT_OK, "version %u: %s", (unsigned)v, err.msg);
        CHECK(back.version == v && back.index_hash == 0 && back.n_classes == 0 && !back.class_names);
        ct_checkpoint_free(&back);
        free(bytes);
        ck.version = 0;
        bytes = to_bytes(&ck, &len);
        CHECK(get_u32(bytes + 8) == 1u);
        free(bytes);
        ct_checkpoint_free(&ck);
    }

    memset(&ck, 0, sizeof ck);
    ck.loss_scale = 1.0f;
    round_trip(&ck, "empty");

    ct_checkpoint_free(&ck);                   /* safe on a zeroed struct */
    ct_checkpoint_free(&ck);
    CHECK(is_zeroed(&ck));
}

/* ---- refusals ---- */

static void test_prefixes(const uint8_t *buf, size_t len)
{
    char what[64];
    for (size_t n = 0; n < len; n++) {
        snprintf(what, sizeof what, "prefix of %zu bytes", n);
        expect_refusal(buf, n, CT_ERR_DATA, "truncated", what);
    }
    expect_refusal(buf, 10, CT_ERR_DATA, "truncated (10 bytes, expected at least 88)", "10-byte prefix");
}

/* Every byte, three ways: never accepted; counts how often the CRC is what caught it. */
static void test_flips(const uint8_t *buf, size_t len)
{
    static const uint8_t masks[] = { 0x01, 0x80, 0xff };
    uint8_t *copy = malloc(len);
    int by_crc = 0, total = 0, accepted = 0;
    for (size_t pos = 0; pos < len; pos++) {
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(copy, buf, len);
            copy[pos] ^= masks[k];
            ct_checkpoint ck;
            ct_err err = { 0 };
            ct_status st = ct_checkpoint_parse(copy, len, SRC, &ck, &err);
            total++;
            if (st == CT_OK) {
                accepted++;
                ct_checkpoint_free(&ck);
                fprintf(stderr, "flip 0x%02x at %zu accepted\n", masks[k], pos);
                continue;
            }
            CHECK_MSG(st == CT_ERR_DATA && starts_with_source(err.msg, SRC) && is_zeroed(&ck),
                      "flip at %zu: status %d: %s", pos, (int)st, err.msg);
            by_crc += ct_contains(err.msg, "bad CRC") ? 1 : 0;
        }
    }
    CHECK(accepted == 0);
    CHECK(by_crc > total / 2);
    printf("flipped bytes: %d refused (%d by the CRC)\n", total - accepted, by_crc);
    free(copy);
}

static void test_edits(const uint8_t *buf, size_t len)
{
    uint8_t *copy = malloc(len + 5);

    memcpy(copy, buf, len);
    put_u32(copy + OFF_VERSION, 7);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA,
                   SRC ": written by a newer cutrain (format version 7, this build reads up to 3)", "newer");

    memcpy(copy, buf, len);
    put_u32(copy + OFF_VERSION, 0);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, "version 0", "version 0");

    memcpy(copy, buf, len);
    copy[0] = 'X';
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, SRC ": not a cutrain checkpoint", "wrong magic");
    expect_refusal((const uint8_t *)"hello", 5, CT_ERR_DATA, "not a cutrain checkpoint", "text");

    memcpy(copy, buf, len);
    memset(copy + len, 0xab, 5);
    expect_refusal(copy, len + 5, CT_ERR_DATA, "5 bytes after the end", "trailing bytes");

    /* Lying layer counts: refused from the length alone, nothing sized by them is allocated. */
    static const uint32_t lies[] = { 0xffffffffu, 0x80000000u, 1000u };
    for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
        memcpy(copy, buf, len);
        put_u32(copy + OFF_LAYERS, lies[k]);
        recrc(copy, len);
        expect_refusal(copy, len, CT_ERR_DATA, "truncated", "huge layer count");
    }
    /* One layer too many still fits the bytes: the rest of the file then reads as nonsense. */
    memcpy(copy, buf, len);
    put_u32(copy + OFF_LAYERS, 4);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, NULL, "layer count 4");

    /* The header-size field must agree with the header actually read. */
    memcpy(copy, buf, len);
    put_u32(copy + OFF_HEADER, get_u32(copy + OFF_HEADER) + 4);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, "header size", "header field");

    /* has_m = 2 keeps the layout of has_m = 1, so only the flag check can catch it. */
    size_t tail = get_u32(buf + OFF_HEADER) - TAIL_BYTES;
    memcpy(copy, buf, len);
    put_u32(copy + tail + 20, 2);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, "has_m is 2", "has_m 2");
    free(copy);
}

/* Inconsistent values written by the serializer itself (so sizes and CRC agree). */
static void expect_serialized_refusal(const ct_checkpoint *ck, const char *words, const char *what)
{
    size_t len;
    uint8_t *buf = to_bytes(ck, &len);
    expect_refusal(buf, len, CT_ERR_DATA, words, what);
    free(buf);
}

static void test_bad_values(void)
{
    ct_checkpoint ck;
    make_small(&ck, CT_OPT_ADAM, 1, 1);
    ck.layers[0].w_count++;
    expect_serialized_refusal(&ck, "parameter count 39 does not match the layers' 40", "n_params");
    ck.layers[0].w_count--;

    ck.layers[2].state_count = 3;
    expect_serialized_refusal(&ck, "state count 4 does not match the layers' 3", "n_state");
    ck.layers[2].state_count = 4;

    /* A sum that wraps around to the right total must not pass. */
    ck.layers[0].w_count = UINT64_MAX;
    ck.layers[1].w_count = 18 + 12 + 1;
    expect_serialized_refusal(&ck, "overflow", "wrapping sums");
    ck.layers[0].w_count = 12;
    ck.layers[1].w_count = 18;

    ck.layers[1].type = 99;
    expect_serialized_refusal(&ck, "layer 1: unknown layer type 99", "layer type");
    ck.layers[1].type = CT_LAYER_TYPE_COUNT;
    expect_serialized_refusal(&ck, "unknown layer type", "layer type count");
    ck.layers[1].type = CT_LAYER_CONV2D;

    ck.optimizer = CT_OPT_ADAMW + 1;
    expect_serialized_refusal(&ck, "unknown optimizer", "optimizer");
    ck.optimizer = CT_OPT_ADAM;

    ck.has_master = 2;
    expect_serialized_refusal(&ck, "has_master is 2", "has_master");
    ck.has_master = 0;

    ck.layers[0].h = -1;
    expect_serialized_refusal(&ck, "negative output shape", "shape");
    ck.layers[0].h = 1;

    char *name = ck.layers[2].name;
    ck.layers[2].name = "";
    expect_serialized_refusal(&ck, "layer 2: name length 0", "empty name");
    char long_name[257];
    memset(long_name, 'x', 256);
    long_name[256] = '\0';
    ck.layers[2].name = long_name;
    expect_serialized_refusal(&ck, "name length 256", "long name");
    ck.layers[2].name = name;

    /* A NUL inside a name: same length, patched in the bytes. */
    size_t len;
    uint8_t *buf = to_bytes(&ck, &len);
    buf[OFF_LAYERS + 4 + 4 + 2] = 0;           /* "dense1" -> "de\0se1" */
    recrc(buf, len);
    expect_refusal(buf, len, CT_ERR_DATA, "NUL", "NUL in name");
    free(buf);
    ct_checkpoint_free(&ck);
}

/* Version 3's training set record, truncated or lying: refused with a message, never read past the
 * end, nothing sized by an unchecked count. */
static void test_set_record(void)
{
    ct_checkpoint ck;
    make_small(&ck, CT_OPT_ADAM, 1, 0);
    add_set_record(&ck, SET_HASH, 1);
    size_t len;
    uint8_t *buf = to_bytes(&ck, &len);
    size_t at = set_record_at(&ck, buf);
    CHECK(get_u32(buf + at + 8) == 4u && get_u32(buf + at + 12) == strlen(set_names[0]));
    test_prefixes(buf, len);
    test_flips(buf, len);

    uint8_t *copy = malloc(len);
    /* counts that no file of this length could hold */
    static const uint32_t lies[] = { 0xffffffffu, 0x80000000u, 100000u, 5u };
    for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
        memcpy(copy, buf, len);
        put_u32(copy + at + 8, lies[k]);
        recrc(copy, len);
        expect_refusal(copy, len, CT_ERR_DATA, NULL, "lying class count");
    }
    memcpy(copy, buf, len);
    put_u32(copy + at + 8, 0xffffffffu);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, "truncated", "huge class count");
    /* a name length running past the end */
    memcpy(copy, buf, len);
    put_u32(copy + at + 12, 0x7fffffffu);
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, "truncated", "huge name length");
    /* a NUL inside a name */
    memcpy(copy, buf, len);
    copy[at + 16 + 1] = 0;
    recrc(copy, len);
    expect_refusal(copy, len, CT_ERR_DATA, "class 0: name contains a NUL byte", "NUL in class name");
    /* a flipped bit in the hash: only the CRC can tell */
    memcpy(copy, buf, len);
    copy[at + 3] ^= 0x10;
    expect_refusal(copy, len, CT_ERR_DATA, "bad CRC", "hash bit");
    free(copy);
    free(buf);

    /* values the serializer writes faithfully but the parser refuses */
    char *name = ck.class_names[1];
    ck.class_names[1] = "";
    expect_serialized_refusal(&ck, "class 1: name length 0 (must be 1..255)", "empty class name");
    char long_name[257];
    memset(long_name, 'x', 256);
    long_name[256] = '\0';
    ck.class_names[1] = long_name;
    expect_serialized_refusal(&ck, "class 1: name length 256", "long class name");
    ck.class_names[1] = name;
    ct_checkpoint_free(&ck);

    /* more classes than the format allows, each name fitting: refused by count, not by memory */
    make_small(&ck, CT_OPT_SGD, 0, 0);
    ck.n_classes = CT_CHECKPOINT_MAX_CLASSES + 1u;
    ck.class_names = calloc(ck.n_classes, sizeof *ck.class_names);
    for (uint32_t i = 0; i < ck.n_classes; i++)
        ck.class_names[i] = strdup("c");
    expect_serialized_refusal(&ck, "65537 class names (at most 65536)", "too many classes");
    ck.n_classes = CT_CHECKPOINT_MAX_CLASSES;
    free(ck.class_names[CT_CHECKPOINT_MAX_CLASSES]);
    round_trip(&ck, "the most classes");
    ct_checkpoint_free(&ck);
}

/* ---- files ---- */

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void test_file_round_trip(const char *dir)
{
    char *path = join(dir, "small.ckpt");
    ct_checkpoint ck, back;
    make_small(&ck, CT_OPT_ADAM, 1, 1);
    size_t len;
    uint8_t *buf = to_bytes(&ck, &len);
    ct_err err = { 0 };
    CHECK_MSG(ct_checkpoint_write_file(path, buf, len, &err) == CT_OK, "%s", err.msg);
    /* A second write replaces the first. */
    CHECK_MSG(ct_checkpoint_write_file(path, buf, len, &err) == CT_OK, "%s", err.msg);
    uint8_t *read = NULL;
    size_t read_len = 0;
    CHECK_MSG(ct_checkpoint_read_file(path, 0, &read, &read_len, &err) == CT_OK, "%s", err.msg);
    CHECK(read_len == len && read && memcmp(read, buf, len) == 0);
    if (read && ct_checkpoint_parse(read, read_len, path, &back, &err) == CT_OK) {
        const char *diff = difference(&ck, &back);
        CHECK_MSG(diff[0] == '\0', "file round trip: %s differs", diff);
        ct_checkpoint_free(&back);
    } else {
        CHECK_MSG(0, "file round trip: %s", err.msg);
    }
    free(read);
    unlink(path);

    /* Reading a missing file names it. */
    CHECK(ct_checkpoint_read_file(path, 0, &read, &read_len, &err) == CT_ERR_IO);
    CHECK_MSG(starts_with_source(err.msg, path) && ct_contains(err.msg, strerror(ENOENT)), "%s", err.msg);
    CHECK(read == NULL);

    /* A missing folder: refused, naming the path, and nothing is created. */
    char *missing_dir = join(dir, "missing");
    char *missing = join(missing_dir, "model.ckpt");
    CHECK(ct_checkpoint_write_file(missing, buf, len, &err) == CT_ERR_IO);
    CHECK_MSG(starts_with_source(err.msg, missing), "%s", err.msg);
    struct stat sb;
    CHECK(stat(missing_dir, &sb) != 0 && errno == ENOENT);
    free(missing);
    free(missing_dir);

    free(buf);
    free(path);
    ct_checkpoint_free(&ck);
}

/* Removes (and counts) everything in dir except `keep`, checking that each leftover is a
 * temporary file a ".ckpt" folder scan would not pick up. */
static int remove_leftovers(const char *dir, const char *keep)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (keep && !strcmp(e->d_name, keep)))
            continue;
        size_t len = strlen(e->d_name);
        CHECK_MSG(strncmp(e->d_name, "model.ckpt.tmp", 14) == 0, "unexpected file %s", e->d_name);
        CHECK_MSG(len < 5 || strcmp(e->d_name + len - 5, ".ckpt") != 0, "leftover %s ends in .ckpt", e->d_name);
        char *p = join(dir, e->d_name);
        unlink(p);
        free(p);
        n++;
    }
    closedir(d);
    return n;
}

static uint32_t next_random(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* The writer is killed at random moments; the file must always hold A or B, whole. */
static void test_sigkill(const char *dir)
{
    enum { TRIALS = 500 };
    char *path = join(dir, "model.ckpt");
    ct_checkpoint a, b;
    make_big(&a, 32768, 1);
    make_big(&b, 32768, 2);
    size_t len_a, len_b;
    uint8_t *bytes_a = to_bytes(&a, &len_a), *bytes_b = to_bytes(&b, &len_b);
    ct_err err = { 0 };
    CHECK_MSG(ct_checkpoint_write_file(path, bytes_a, len_a, &err) == CT_OK, "%s", err.msg);

    int seen_a = 0, seen_b = 0, bad = 0, mid_write = 0;
    uint32_t rng = 0x9e3779b9u;
    for (int t = 0; t < TRIALS; t++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (unsigned i = 0;; i++) {
                ct_err e;
                int use_b = (i % 2 == 0);
                if (ct_checkpoint_write_file(path, use_b ? bytes_b : bytes_a, use_b ? len_b : len_a, &e) != CT_OK)
                    _exit(3);
            }
        }
        CHECK(pid > 0);
        if (pid < 0)
            break;
        long delay_us = (long)(next_random(&rng) % 5001u);
        struct timespec ts = { 0, delay_us * 1000L };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int wstatus = 0;
        waitpid(pid, &wstatus, 0);
        CHECK_MSG(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL, "writer exited on its own (%d)", wstatus);

        uint8_t *buf = NULL;
        size_t len = 0;
        ct_checkpoint ck;
        ct_status st = ct_checkpoint_read_file(path, 0, &buf, &len, &err);
        if (st == CT_OK)
            st = ct_checkpoint_parse(buf, len, path, &ck, &err);
        if (st == CT_OK) {
            ct_checkpoint_free(&ck);
            if (len == len_a && memcmp(buf, bytes_a, len) == 0)
                seen_a++;
            else if (len == len_b && memcmp(buf, bytes_b, len) == 0)
                seen_b++;
            else
                bad++;
        } else {
            bad++;
            fprintf(stderr, "trial %d: %s\n", t, err.msg);
        }
        free(buf);
        mid_write += remove_leftovers(dir, "model.ckpt") > 0;
    }
    CHECK(bad == 0);
    CHECK(seen_a + seen_b == TRIALS);
    printf("SIGKILL: %d trials, file held A %d times and B %d times, %d kills left a temporary file\n",
           TRIALS, seen_a, seen_b, mid_write);
    unlink(path);
    free(bytes_a);
    free(bytes_b);
    free(path);
    ct_checkpoint_free(&a);
    ct_checkpoint_free(&b);
}

int main(void)
{
    test_round_trips();

    ct_checkpoint small;
    make_small(&small, CT_OPT_MOMENTUM, 1, 0);
    size_t len;
    uint8_t *buf = to_bytes(&small, &len);
    test_prefixes(buf, len);
    test_flips(buf, len);
    test_edits(buf, len);
    free(buf);
    ct_checkpoint_free(&small);
    test_bad_values();
    test_set_record();

    char dir[] = "/tmp/ct_checkpoint_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_file_round_trip(dir);
    test_sigkill(dir);
    remove_leftovers(dir, NULL);
    CHECK(rmdir(dir) == 0);
    return ct_test_done();
}
