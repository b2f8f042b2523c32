/* [train] devices as a GPU list and [train] comm, read without a GPU: a list counts its replicas;
 * a list whose count does not split the batch, a GPU listed twice, a batch search over several
 * GPUs, comm = nccl on CPU replicas and a misspelt comm are config errors naming their line. */
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "tests/test_util.h"

/* A minimal network with [train] lines `train` (line 5 onwards). */
static ct_status load(const char *train, ct_config *cfg, ct_err *err)
{
    char text[1024];
    snprintf(text, sizeof text,
             "[data]\n"             /* 1 */
             "format = synthetic\n" /* 2 */
             "shape = 4, 4, 1\n"    /* 3 */
             "[train]\n"            /* 4 */
             "%s"                   /* 5 ... */
             "[out]\ntype = dense\nunits = 3\n", train);
    ct_ini ini;
    ct_err_clear(err);
    ct_status st = ct_ini_parse(&ini, text, "gpus.ini", err);
    if (st == CT_OK)
        st = ct_config_load(cfg, &ini, err);
    ct_ini_free(&ini);
    return st;
}

static void expect_error(const char *train, const char *where, const char *words)
{
    ct_config cfg;
    ct_err err;
    ct_status st = load(train, &cfg, &err);
    CHECK_MSG(st == CT_ERR_CONFIG, "[train] %s: status %d (%s)", train, (int)st, err.msg);
    if (st == CT_OK) {
        ct_config_free(&cfg);
        return;
    }
    CHECK_MSG(ct_contains(err.msg, where), "[train] %s: '%s' does not name %s", train, err.msg, where);
    CHECK_MSG(ct_contains(err.msg, words), "[train] %s: '%s' does not say '%s'", train, err.msg, words);
}

static void expect_replicas(const char *train, const char *devices, int replicas, ct_comm_kind comm)
{
    ct_config cfg;
    ct_err err;
    ct_status st = load(train, &cfg, &err);
    CHECK_MSG(st == CT_OK, "[train] %s: %s", train, err.msg);
    if (st != CT_OK)
        return;
    CHECK_MSG(strcmp(cfg.train.devices, devices) == 0, "devices stored as %s", cfg.train.devices);
    CHECK_MSG(cfg.train.replicas == replicas, "%s: %d replicas", train, cfg.train.replicas);
    CHECK(cfg.train.comm == comm);
    ct_config_free(&cfg);
}

int main(void)
{
    expect_replicas("batch = 128\ndevices = 0, 1, 2, 3\n", "0,1,2,3", 4, CT_COMM_AUTO);
    expect_replicas("batch = 30\ndevices = 1,3,5\n", "1,3,5", 3, CT_COMM_AUTO);
    expect_replicas("batch = 7\ndevices = 0\ncomm = nccl\n", "0", 1, CT_COMM_NCCL);
    expect_replicas("batch = 7\ndevices = all\n", "all", 1, CT_COMM_AUTO);  /* counted when the run opens */
    expect_replicas("batch = 8\ndevices = cpu:2\n", "cpu", 2, CT_COMM_AUTO);
    /* the batch error names batch's line, or devices' when batch is the default */
    expect_error("batch = 100\ndevices = 0,1,2\n", "gpus.ini:5", "does not split evenly over the 3 replicas of "
                                                                 "devices = 0,1,2");
    expect_error("batch = 100\ndevices = 0,1,2\n", "gpus.ini:5", "use 99 or 102");
    expect_error("devices = 0,1,2\n", "gpus.ini:5", "devices = 0,1,2");
    expect_error("batch = 1\ndevices = 0,1\n", "gpus.ini:5", "does not split evenly");
    expect_error("devices = 0,2,0\n", "gpus.ini:5", "device 0 is listed twice");
    expect_error("batch = max\ndevices = 0,1\n", "gpus.ini:5", "the batch search runs one device");
    expect_error("batch = 8\ndevices = cpu:2\ncomm = nccl\n", "gpus.ini:7", "NCCL reduces over GPUs only");
    expect_error("batch = 8\ndevices = 0\ncomm = ncl\n", "gpus.ini:7", "nccl");
    return ct_test_done();
}
