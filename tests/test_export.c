/* ct_export without the Python readers (test_export_readers has those): the protocol buffer writer
 * both the TensorBoard events and ONNX use; the every-layer fixture's version 1 checkpoint
 * (tests/fixtures) exported to safetensors, whose tensors must be the checkpoint's bytes under the
 * documented names and shapes, and to ONNX, whose model must start as a ModelProto and name its
 * input, output, opset and metadata; then the refusals: an opset outside 13..21, a layer changed
 * since the checkpoint, a missing checkpoint and an output folder that does not exist, each with its
 * message, no file written and an existing one unchanged; and ct_predict_probs, what predict --probs
 * prints, against ct_predict. Runs in the sanitizer build (unit).
 * Exits 77 (skipped) when the Fashion-MNIST files are missing (the config probes their shape). */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/protobuf.h"
#include "cutrain.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

#define FIXTURE_DIR CT_SOURCE_DIR "/tests/fixtures"
#define FIXTURE_INI FIXTURE_DIR "/compat_every_layer.ini"
#define FIXTURE_CKPT FIXTURE_DIR "/compat_every_layer_v1.ckpt"

static ct_net *open_fixture(void)
{
    ct_net *net = NULL;
    ct_status st = ct_open_file(FIXTURE_INI, &net);
    if (st == CT_OK)
        st = ct_set_fmnist_data(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    return net;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Nested messages in a growing buffer get their length in front, in as many varint bytes as it
 * needs; a fixed buffer sizes what it cannot hold. */
static void test_protobuf(void)
{
    ct_pb o = ct_pb_growing();
    size_t outer = ct_pb_begin(&o, 7);
    ct_pb_string(&o, 1, "x");
    size_t inner = ct_pb_begin(&o, 2);
    unsigned char big[300];
    memset(big, 0xab, sizeof big);
    ct_pb_bytes(&o, 9, big, sizeof big);
    ct_pb_end(&o, inner);
    ct_pb_end(&o, outer);
    ct_pb_int(&o, 3, -1);
    CHECK(!o.nomem);
    /* 7<<3|2 = 0x3a; outer length = 3 ("x" field) + 1 + 2 + (1 + 2 + 300) = 309 -> b5 02 */
    const unsigned char head[] = {0x3a, 0xb5, 0x02, 0x0a, 0x01, 'x', 0x12, 0xaf, 0x02, 0x4a, 0xac, 0x02};
    CHECK(o.len == 3 + 309 + 11);
    CHECK(o.len >= sizeof head && memcmp(o.buf, head, sizeof head) == 0);
    CHECK(o.buf[o.len - 11] == 0x18 && o.buf[o.len - 1] == 0x01);   /* int64 -1: ten bytes */
    ct_pb_free(&o);

    unsigned char small[4];
    ct_pb f = ct_pb_fixed(small, sizeof small);
    ct_pb_string(&f, 1, "hello");
    CHECK(f.len == 7 && small[0] == 0x0a && small[1] == 5);   /* the key and length fit, the text is sized */
    CHECK(ct_pb_varint_size(127) == 1 && ct_pb_varint_size(128) == 2 && ct_pb_len_field_size(1, 300) == 303);
}

/* The checkpoint's packed parameters (version 1: params start at the header's offset). */
static const unsigned char *ckpt_params(const unsigned char *ck, size_t len)
{
    uint32_t header = le32(ck + 12);
    return header < len ? ck + header : NULL;
}

static void test_safetensors(const char *dir)
{
    ct_net *net = open_fixture();
    char out[512];
    snprintf(out, sizeof out, "%s/every.safetensors", dir);
    ct_export_options o = {.format = CT_EXPORT_SAFETENSORS};
    ct_status st = ct_export(net, FIXTURE_CKPT, out, &o);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    ct_close(net);
    size_t len = 0, cklen = 0;
    unsigned char *buf = read_all(out, &len), *ck = read_all(FIXTURE_CKPT, &cklen);
    CHECK(buf && ck && len > 8);
    if (!buf || !ck || len <= 8) {
        free(buf);
        free(ck);
        return;
    }
    uint64_t n = le64(buf);
    CHECK(n % 8 == 0 && 8 + n < len);
    char *header = strndup((const char *)buf + 8, (size_t)n);
    const unsigned char *data = buf + 8 + n;
    /* c1 is the first layer: its weights (8, 3, 3, 1) then its bias (8) open the checkpoint's
     * parameters, and the file's data */
    CHECK(ct_contains(header, "\"c1.weight\": {\"dtype\": \"F32\", \"shape\": [8, 3, 3, 1], \"data_offsets\": [0, 288]}"));
    CHECK(ct_contains(header, "\"c1.bias\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [288, 320]}"));
    CHECK(ct_contains(header, "\"bn1.running_var\""));
    CHECK(ct_contains(header, "\"fb1.weight\": {\"dtype\": \"F32\", \"shape\": [32, 144]"));
    CHECK(!ct_contains(header, "c2.bias"));   /* bias = off */
    CHECK(ct_contains(header, "\"__metadata__\": {\"format\": \"cutrain\""));
    const unsigned char *params = ckpt_params(ck, cklen);
    CHECK(params && memcmp(data, params, 320) == 0);
    free(header);
    free(buf);
    free(ck);
}

static void test_onnx(const char *dir)
{
    ct_net *net = open_fixture();
    char out[512];
    snprintf(out, sizeof out, "%s/every.onnx", dir);
    ct_export_options o = {.format = CT_EXPORT_ONNX, .opset = 20, .batch = 4};
    ct_status st = ct_export(net, FIXTURE_CKPT, out, &o);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    ct_close(net);
    size_t len = 0;
    unsigned char *buf = read_all(out, &len);
    CHECK(buf && len > 40000);
    if (!buf)
        return;
    /* ModelProto: ir_version (field 1) 9 for opset 20, first */
    CHECK(buf[0] == 0x08 && buf[1] == 9);
    /* the opset import { domain "", version 20 } */
    const unsigned char opset[] = {0x42, 0x04, 0x0a, 0x00, 0x10, 20};
    int found = 0;
    for (size_t i = 0; i + sizeof opset <= len && !found; i++)
        found = memcmp(buf + i, opset, sizeof opset) == 0;
    CHECK(found);
    const char *words[] = {"pixels", "probabilities", "Softmax", "Gelu", "GlobalAveragePool", "c1.weight",
                           "bn1.running_mean", "class", "[c1]"};
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        found = 0;
        for (size_t i = 0; i + strlen(words[w]) <= len && !found; i++)
            found = memcmp(buf + i, words[w], strlen(words[w])) == 0;
        CHECK_MSG(found, "the model does not hold '%s'", words[w]);
    }
    free(buf);
}

/* st and its message, then no file at `out` other than "before". */
static void check_refused(ct_status st, ct_status want, const ct_net *net, const char *message, const char *out)
{
    CHECK_MSG(st == want, "status %d, expected %d: %s", (int)st, (int)want, ct_errmsg(net));
    CHECK_MSG(ct_contains(ct_errmsg(net), message), "'%s' lacks '%s'", ct_errmsg(net), message);
    size_t len = 0;
    unsigned char *buf = read_all(out, &len);
    CHECK(buf && len == 6 && memcmp(buf, "before", 6) == 0);
    free(buf);
}

static void test_refusals(const char *dir)
{
    char out[512];
    snprintf(out, sizeof out, "%s/kept.onnx", dir);
    FILE *f = fopen(out, "wb");
    fputs("before", f);
    fclose(f);

    ct_net *net = open_fixture();
    ct_export_options o = {.opset = 12};
    check_refused(ct_export(net, FIXTURE_CKPT, out, &o), CT_ERR_USAGE, net,
                  "ONNX opset 12 is not one cutrain writes (13 to 21)", out);
    ct_close(net);

    net = open_fixture();
    ct_set(net, "fa1.units", "20");
    check_refused(ct_export(net, FIXTURE_CKPT, out, NULL), CT_ERR_DATA, net,
                  "layer [fa1] expects output 20 with 320 weights and 20 biases, the checkpoint has 16 with 256 and 16",
                  out);
    ct_close(net);

    net = open_fixture();
    char missing[512];
    snprintf(missing, sizeof missing, "%s/none.ckpt", dir);
    check_refused(ct_export(net, missing, out, NULL), CT_ERR_IO, net, "none.ckpt", out);
    ct_close(net);

    net = open_fixture();
    char nofolder[512];
    snprintf(nofolder, sizeof nofolder, "%s/no-such-folder/m.onnx", dir);
    CHECK(ct_export(net, FIXTURE_CKPT, nofolder, NULL) == CT_ERR_IO);
    CHECK(ct_contains(ct_errmsg(net), "no-such-folder"));
    CHECK(access(nofolder, F_OK) != 0);
    CHECK(ct_export(net, NULL, out, NULL) == CT_ERR_USAGE);
    ct_close(net);
}

/* ct_predict_probs: every class's probability, summing to 1, whose largest is ct_predict's class and
 * probability, on the fixture's trained weights and 200 Fashion-MNIST test images. */
static void test_predict_probs(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ct_fmnist_dir(), CT_FMNIST_KEYS[2][1]);
    ct_images images;
    char msg[512];
    CHECK_MSG(ct_read_idx_images(path, &images, msg, sizeof msg) == CT_OK, "%s", msg);
    ct_net *net = open_fixture();
    ct_status st = ct_load(net, FIXTURE_CKPT);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    enum { N = 200, K = 10 };
    int classes[N];
    float best[N];
    float *probs = malloc((size_t)N * K * sizeof *probs);
    CHECK(ct_predict(net, images.pixels, N, classes, best) == CT_OK);
    CHECK(ct_predict_probs(net, images.pixels, N, probs) == CT_OK);
    CHECK(ct_predict_probs(net, images.pixels, N, NULL) == CT_ERR_USAGE);
    int agree = 0, distinct = 0, seen[K] = {0};
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double sum = 0.0;
        int top = 0;
        for (int j = 0; j < K; j++) {
            sum += probs[i * K + j];
            top = probs[i * K + j] > probs[i * K + top] ? j : top;
        }
        worst = fmax(worst, fabs(sum - 1.0));
        agree += top == classes[i] && probs[i * K + top] == best[i];
        distinct += !seen[classes[i]]++;
    }
    CHECK_MSG(agree == N, "the largest probability is ct_predict's for %d of %d images", agree, N);
    CHECK_MSG(worst < 1e-5, "a row sums to 1 +- %g", worst);
    CHECK_MSG(distinct >= 3, "the trained fixture predicts %d classes", distinct);
    free(probs);
    ct_close(net);
    ct_free_images(&images);
}

int main(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ct_fmnist_dir(), CT_FMNIST_KEYS[0][1]);
    if (access(path, R_OK) != 0) {
        printf("skipped: %s is missing (set CT_FMNIST_DIR)\n", path);
        return 77;
    }
    char dir[] = "/tmp/ct_export_XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    test_protobuf();
    test_safetensors(dir);
    test_onnx(dir);
    test_refusals(dir);
    test_predict_probs();
    const char *names[] = {"every.safetensors", "every.onnx", "kept.onnx"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    CHECK_MSG(rmdir(dir) == 0, "%s holds files left behind (a temporary file?)", dir);
    return ct_test_done();
}
