/* The training set's record in checkpoints through the public API: a set without an index hash or
 * class names (synthetic data) keeps writing version 1; ct_resume refuses a checkpoint saved from
 * a set whose hash or class names differ (naming the checkpoint, both hashes and the set) and
 * leaves the network as it was; ct_load takes the class names (ct_class_name) without comparing.
 * The checkpoints with a record are the network's own, re-stamped through the format's code. */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "cutrain.h"
#include "tests/test_util.h"

static const char *NET =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 120\ntest_count = 30\n"
    "[train]\nepochs = 1\nbatch = 30\nlearning_rate = 0.01\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n";

static char dir[64];

static char *path_in(const char *name)
{
    static char buf[4][256];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static ct_net *open_net(void)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(NET, "set.ini", &net) == CT_OK);
    return net;
}

/* Copies checkpoint `from` to `to` with the training set's record given (names: NULL for none). */
static void restamp(const char *from, const char *to, uint64_t hash, const char *const *names, uint32_t n)
{
    long len = 0;
    unsigned char *buf = ct_slurp(from, &len);
    ct_checkpoint ck;
    ct_err err = { 0 };
    CHECK_MSG(buf && ct_checkpoint_parse(buf, (size_t)len, from, &ck, &err) == CT_OK, "%s", err.msg);
    free(buf);
    ck.index_hash = hash;
    ck.n_classes = n;
    ck.class_names = n ? calloc(n, sizeof *ck.class_names) : NULL;
    for (uint32_t i = 0; i < n; i++)
        ck.class_names[i] = strdup(names[i]);
    size_t size = ct_checkpoint_size(&ck);
    uint8_t *out = malloc(size);
    ct_checkpoint_serialize(&ck, out);
    CHECK(out[8] == 3);
    CHECK_MSG(ct_checkpoint_write_file(to, out, size, &err) == CT_OK, "%s", err.msg);
    free(out);
    ct_checkpoint_free(&ck);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ct_resume_set_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    static const char *const names[] = {"cat", "dog", "bird, small"};

    ct_net *net = open_net();
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_class_name_count(net) == 0 && ct_class_name(net, 0) == NULL);
    CHECK_MSG(ct_save(net, path_in("plain.ckpt")) == CT_OK, "%s", ct_errmsg(net));
    long steps = ct_steps_done(net);
    ct_close(net);
    long len = 0;
    unsigned char *plain = ct_slurp(path_in("plain.ckpt"), &len);
    CHECK_MSG(plain && len > 12 && plain[8] == 1, "a set without a record must stay version 1");
    free(plain);

    restamp(path_in("plain.ckpt"), path_in("hashed.ckpt"), 0xabcdef0123ull, names, 3);
    restamp(path_in("plain.ckpt"), path_in("named.ckpt"), 0, names, 3);

    /* resuming from a checkpoint of an indexed folder on a set without an index: refused */
    net = open_net();
    CHECK(ct_resume(net, path_in("hashed.ckpt")) == CT_ERR_DATA);
    const char *msg = ct_errmsg(net);
    CHECK_MSG(ct_contains(msg, path_in("hashed.ckpt")) &&
              ct_contains(msg, ": saved from a training folder whose index hash was 000000abcdef0123") &&
              ct_contains(msg, "no file index") && ct_contains(msg, "train from scratch"), "got: %s", msg);
    CHECK(ct_steps_done(net) == 0 && ct_class_name_count(net) == 0);
    /* class names where the set has none: refused too */
    CHECK(ct_resume(net, path_in("named.ckpt")) == CT_ERR_DATA);
    msg = ct_errmsg(net);
    CHECK_MSG(ct_contains(msg, ": saved from a training set of 3 named classes; ") &&
              ct_contains(msg, "now has 0; train from scratch or restore the folder"), "got: %s", msg);
    CHECK(ct_steps_done(net) == 0);
    /* a checkpoint without a record resumes as before */
    CHECK_MSG(ct_resume(net, path_in("plain.ckpt")) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_steps_done(net) == steps && ct_class_name_count(net) == 0);
    ct_close(net);

    /* loading (eval, predict) does not compare the sets, and takes the names */
    net = open_net();
    CHECK_MSG(ct_load(net, path_in("hashed.ckpt")) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_steps_done(net) == steps);
    CHECK(ct_class_name_count(net) == 3);
    CHECK(ct_class_name(net, 2) && strcmp(ct_class_name(net, 2), "bird, small") == 0);
    CHECK(ct_class_name(net, 3) == NULL && ct_class_name(net, -1) == NULL);
    /* a later load without names forgets them */
    CHECK_MSG(ct_load(net, path_in("plain.ckpt")) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_class_name_count(net) == 0 && ct_class_name(net, 0) == NULL);
    ct_close(net);

    CHECK(ct_class_name_count(NULL) == 0 && ct_class_name(NULL, 0) == NULL);
    CHECK(ct_resume(NULL, "x") == CT_ERR_USAGE);
    const char *files[] = {"plain.ckpt", "hashed.ckpt", "named.ckpt"};
    for (int i = 0; i < 3; i++)
        unlink(path_in(files[i]));
    CHECK(rmdir(dir) == 0);
    return ct_test_done();
}
