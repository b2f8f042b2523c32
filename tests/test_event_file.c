/* TensorBoard event files: CRC-32C against published vectors, TFRecord framing, the Event
 * encoding byte for byte, the writer's files and its refusals, and which epoch figures become
 * scalars. TensorBoard's own reader checks the files of a real run in tensorboard_check.py. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/event_file.h"
#include "test_util.h"
#include "train/tensorboard.h"

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void test_crc32c(void)
{
    /* "123456789" is the CRC catalogue's check value; the 32-byte ones are RFC 3720's (iSCSI) */
    CHECK(ct_crc32c("123456789", 9) == 0xE3069283u);
    CHECK(ct_crc32c("", 0) == 0);
    unsigned char zeros[32] = {0}, ones[32], up[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        up[i] = (unsigned char)i;
    CHECK(ct_crc32c(zeros, 32) == 0x8A9136AAu);
    CHECK(ct_crc32c(ones, 32) == 0x62A8AB43u);
    CHECK(ct_crc32c(up, 32) == 0x46DD794Eu);
    CHECK(ct_crc32c_mask(0) == 0xa282ead8u);
    CHECK(ct_crc32c_mask(0xE3069283u) == 0xc78ab0e5u);
}

static void test_framing(void)
{
    unsigned char header[CT_TFRECORD_HEADER], footer[CT_TFRECORD_FOOTER];
    ct_tfrecord_frame("abc", 3, header, footer);
    CHECK(le64(header) == 3);
    CHECK(le32(header + 8) == 0x0e4999b0u); /* masked CRC-32C of 03 00 00 00 00 00 00 00 */
    CHECK(le32(footer) == 0x21f1576eu);     /* masked CRC-32C of "abc" */
}

static void test_encoding(void)
{
    /* Event{wall_time 1.5, step 300, summary{value{tag "a", simple_value 1}}} */
    static const unsigned char want[] = {
        0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, /* 1: double 1.5 */
        0x10, 0xac, 0x02,                   /* 2: varint 300 */
        0x2a, 0x0a,                         /* 5: Summary, 10 bytes */
        0x0a, 0x08,                         /*   1: Value, 8 bytes */
        0x0a, 0x01, 'a',                    /*     1: tag "a" */
        0x15, 0, 0, 0x80, 0x3f,             /*     2: float 1.0 */
    };
    ct_scalar a = {"a", 1.0f};
    unsigned char buf[64];
    CHECK(ct_event_encode(NULL, 0, 1.5, 300, NULL, &a, 1) == sizeof want);
    size_t n = ct_event_encode(buf, sizeof buf, 1.5, 300, NULL, &a, 1);
    CHECK(n == sizeof want && memcmp(buf, want, sizeof want) == 0);

    static const unsigned char version[] = {0x10, 0x00, 0x1a, 13, 'b', 'r', 'a', 'i', 'n', '.', 'E', 'v', 'e', 'n',
                                            't', ':', '2'};
    n = ct_event_encode(buf, sizeof buf, 0.0, 0, CT_EVENT_FILE_VERSION, NULL, 0);
    CHECK(n == 9 + sizeof version && buf[0] == 0x09 && memcmp(buf + 9, version, sizeof version) == 0);

    /* a short buffer is not written past */
    memset(buf, 0xee, sizeof buf);
    CHECK(ct_event_encode(buf, 4, 1.5, 300, NULL, &a, 1) == sizeof want);
    CHECK(buf[4] == 0xee && buf[10] == 0xee);
}

/* Checks the record at *off of file (len bytes) and moves past it; returns its data or NULL. */
static const unsigned char *next_record(const unsigned char *file, long len, long *off, size_t *n)
{
    if (*off + CT_TFRECORD_HEADER > len)
        return NULL;
    const unsigned char *p = file + *off;
    uint64_t size = le64(p);
    if (le32(p + 8) != ct_crc32c_mask(ct_crc32c(p, 8)) || *off + 16 + (long)size > len)
        return NULL;
    const unsigned char *data = p + CT_TFRECORD_HEADER;
    if (le32(data + size) != ct_crc32c_mask(ct_crc32c(data, size)))
        return NULL;
    *off += CT_TFRECORD_HEADER + (long)size + CT_TFRECORD_FOOTER;
    *n = size;
    return data;
}

static void test_writer(const char *tmp)
{
    char dir[512], file_path[600];
    snprintf(dir, sizeof dir, "%s/runs/a", tmp); /* two levels missing */
    ct_err err = {0};
    ct_event_file *f = NULL;
    CHECK_MSG(ct_event_file_open(dir, &f, &err) == CT_OK, "%s", err.msg);
    if (!f)
        return;
    const char *path = ct_event_file_path(f);
    snprintf(file_path, sizeof file_path, "%s/events.out.tfevents.", dir);
    CHECK_MSG(strncmp(path, file_path, strlen(file_path)) == 0, "%s", path);
    ct_scalar s[2] = {{"train/loss", 0.25f}, {"util/cpu", 1.5f}};
    CHECK(ct_event_file_write(f, 7, s, 2, &err) == CT_OK);
    /* flushed: readable while the file is open */
    long len = 0, off = 0;
    unsigned char *bytes = ct_slurp(path, &len);
    CHECK(bytes != NULL);
    size_t n = 0;
    const unsigned char *rec = bytes ? next_record(bytes, len, &off, &n) : NULL;
    CHECK(rec && n == 9 + 2 + 2 + 13 && memcmp(rec + n - 13, "brain.Event:2", 13) == 0);
    rec = rec ? next_record(bytes, len, &off, &n) : NULL;
    unsigned char want[128];
    size_t want_n = ct_event_encode(want, sizeof want, 0.0, 7, NULL, s, 2);
    /* all but the wall time, which is the clock's */
    CHECK(rec && n == want_n && memcmp(rec + 9, want + 9, n - 9) == 0);
    CHECK(off == len);
    free(bytes);

    /* a second file in the same folder within the same second gets a name of its own */
    ct_event_file *g = NULL;
    CHECK(ct_event_file_open(dir, &g, &err) == CT_OK);
    CHECK(g && strcmp(ct_event_file_path(g), path) != 0);
    ct_event_file_close(g);
    ct_event_file_close(f);

    /* refusals name the folder */
    char afile[512], bad[600];
    snprintf(afile, sizeof afile, "%s/afile", tmp);
    FILE *fp = fopen(afile, "w");
    CHECK(fp != NULL);
    if (fp)
        fclose(fp);
    snprintf(bad, sizeof bad, "%s/sub", afile);
    f = NULL;
    CHECK(ct_event_file_open(bad, &f, &err) == CT_ERR_IO && f == NULL);
    CHECK_MSG(ct_contains(err.msg, bad), "%s", err.msg);
    CHECK(ct_event_file_open(afile, &f, &err) == CT_ERR_IO && f == NULL);
    CHECK_MSG(ct_contains(err.msg, "TensorBoard folder") && ct_contains(err.msg, afile), "%s", err.msg);
    CHECK(ct_event_file_open("", &f, &err) != CT_OK);
}

/* The public call on an open network: refused at once, before anything is prepared. */
static void test_api(const char *tmp)
{
    ct_net *net = NULL;
    CHECK(ct_open_file(CT_SOURCE_DIR "/models/fmnist_mlp.ini", &net) == CT_OK);
    CHECK(ct_tensorboard_path(net) == NULL);
    char bad[600], good[600];
    snprintf(bad, sizeof bad, "%s/afile/x", tmp);
    CHECK(ct_tensorboard_open(net, bad) == CT_ERR_IO);
    CHECK_MSG(ct_contains(ct_errmsg(net), bad), "%s", ct_errmsg(net));
    CHECK(ct_tensorboard_path(net) == NULL);
    snprintf(good, sizeof good, "%s/api", tmp);
    CHECK(ct_tensorboard_open(net, good) == CT_OK);
    CHECK(ct_contains(ct_tensorboard_path(net), good));
    CHECK(access(ct_tensorboard_path(net), R_OK) == 0);
    CHECK(ct_tensorboard_open(NULL, good) == CT_ERR_USAGE);
    CHECK(ct_tensorboard_open(net, NULL) == CT_ERR_USAGE);
    ct_close(net);
}

static const ct_scalar *find(const ct_scalar *s, int n, const char *tag)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].tag, tag) == 0)
            return &s[i];
    return NULL;
}

static void test_epoch_scalars(void)
{
    /* unknown figures (the CPU, no test set, no loss scaler) are left out */
    ct_epoch_stats es = {.epoch = 1, .step = 10, .loss = 0.5, .train_accuracy = 0.75, .test_loss = -1,
                         .test_accuracy = -1, .images_per_s = 1000, .learning_rate = 0.01, .loss_scale = -1,
                         .skipped_steps = -1, .gpu_util = -1, .gpu_mem_mib = -1, .power_w = -1,
                         .sm_clock_mhz = -1, .cpu_util = 1.25, .cpu_util_machine = -1,
                         .time_split = {.compute = 1, .device_busy = -1}};
    ct_scalar s[CT_EPOCH_SCALARS_MAX];
    int n = ct_epoch_scalars(&es, s);
    CHECK(n == 10);
    CHECK(find(s, n, "train/loss") && find(s, n, "train/loss")->value == 0.5f);
    CHECK(find(s, n, "util/cpu") && find(s, n, "util/cpu")->value == 1.25f);
    CHECK(find(s, n, "train/learning_rate") && find(s, n, "train/learning_rate")->value == 0.01f);
    CHECK(!find(s, n, "test/accuracy") && !find(s, n, "util/gpu") && !find(s, n, "amp/loss_scale") &&
          !find(s, n, "util/cpu_machine") && !find(s, n, "time/device_busy"));
    /* everything known: every tag once */
    es.test_loss = 0.6, es.test_accuracy = 0.7, es.gpu_util = 15, es.gpu_mem_mib = 900, es.power_w = 80;
    es.sm_clock_mhz = 1900, es.cpu_util_machine = 40, es.time_split.device_busy = 0.2;
    es.loss_scale = 65536, es.skipped_steps = 3;
    n = ct_epoch_scalars(&es, s);
    CHECK(n == 20 && n <= CT_EPOCH_SCALARS_MAX);
    CHECK(find(s, n, "test/accuracy") && find(s, n, "test/accuracy")->value == 0.7f);
    CHECK(find(s, n, "test/loss") && find(s, n, "test/loss")->value == 0.6f);
    CHECK(find(s, n, "util/gpu") && find(s, n, "util/gpu")->value == 15.0f);
    CHECK(find(s, n, "amp/loss_scale") && find(s, n, "amp/loss_scale")->value == 65536.0f);
    CHECK(find(s, n, "amp/skipped_steps") && find(s, n, "amp/skipped_steps")->value == 3.0f);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            CHECK_MSG(strcmp(s[i].tag, s[j].tag) != 0, "%s twice", s[i].tag);
}

int main(void)
{
    char tmp[] = "/tmp/ct_event_file_XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_crc32c();
    test_framing();
    test_encoding();
    test_writer(tmp);
    test_api(tmp);
    test_epoch_scalars();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return ct_test_done();
}
