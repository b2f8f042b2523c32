/* An image folder trained on the GPU: with augment_on = gpu the input workers ship the decoded,
 * flipped uint8 samples and the device only normalises; with augment_on = cpu the workers
 * normalise. The batches are the same, so two deterministic fp32 trainings of the same folder must
 * give the same epoch losses, and the network must learn (Fashion-MNIST test images written as PNG
 * class folders at test time). Exits 77 without a GPU or without the CUDA backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include "cutrain.h"
#include "tests/gpu_test.h"
#include "tests/test_image_enc.h"

enum { N_IMAGES = 1200, EPOCHS = 3 };

typedef struct losses {
    double loss[EPOCHS], train_accuracy[EPOCHS];
    int n;
} losses;

static int on_epoch(const ct_epoch_stats *s, void *user)
{
    losses *l = user;
    if (l->n < EPOCHS) {
        l->loss[l->n] = s->loss;
        l->train_accuracy[l->n] = s->train_accuracy;
        l->n++;
    }
    return 0;
}

/* images: (n, 28, 28) uint8 with labels 0..9, as DIR/<label>/<index>.png (grey). */
static void write_folder(const char *dir, const uint8_t *images, const uint8_t *labels, long n)
{
    char p[700];
    mkdir(dir, 0755);
    for (int c = 0; c < 10; c++) {
        snprintf(p, sizeof p, "%s/%d", dir, c);
        mkdir(p, 0755);
    }
    for (long i = 0; i < n; i++) {
        enc_buf b = enc_png(images + i * 784, 28, 28, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL);
        snprintf(p, sizeof p, "%s/%d/%05ld.png", dir, labels[i], i);
        FILE *f = fopen(p, "wb");
        CHECK_MSG(f && fwrite(b.p, 1, b.n, f) == b.n, "cannot write %s", p);
        if (f)
            fclose(f);
        free(b.p);
    }
}

/* Trains the folder with augment_on = `where`; 0 when it could not. */
static int train(const char *dir, const char *where, losses *out)
{
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[data]\nformat = imagefolder\ntrain = %s\nimage_size = 28\nchannels = 1\naugment = flip\n"
             "normalize = 0.2860, 0.3530\naugment_on = %s\nworkers = 2\n"
             "[train]\nepochs = %d\nbatch = 64\noptimizer = adam\nlearning_rate = 0.002\nseed = 7\n"
             "devices = 0\ndeterministic = on\n"
             "[flat]\ntype = flatten\n[fc1]\ntype = dense\nunits = 64\nactivation = relu\n"
             "[out]\ntype = dense\nunits = 10\n",
             dir, where, EPOCHS);
    ct_net *net = NULL;
    memset(out, 0, sizeof *out);
    if (ct_open_string(ini, "gpu_imagefolder.ini", &net) != CT_OK) {
        CHECK_MSG(0, "open (augment_on = %s): %s", where, net ? ct_errmsg(net) : "no net");
        ct_close(net);
        return 0;
    }
    ct_callbacks cb = {.on_epoch = on_epoch, .user = out};
    ct_status st = ct_fit(net, &cb);
    CHECK_MSG(st == CT_OK, "training (augment_on = %s): %s", where, ct_errmsg(net));
    CHECK_MSG(strcmp(ct_backend_name(net), "cuda") == 0, "augment_on = %s trained on %s", where,
              ct_backend_name(net));
    ct_close(net);
    return st == CT_OK && out->n == EPOCHS;
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    char images[600], labels[600], root[] = "/tmp/ct_gpu_imagefolder_XXXXXX", dir[300];
    snprintf(images, sizeof images, "%s/t10k-images-idx3-ubyte.gz", ct_fmnist_dir());
    snprintf(labels, sizeof labels, "%s/t10k-labels-idx1-ubyte.gz", ct_fmnist_dir());
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);
    if (ct_idx_load(&ds, images, labels, N_IMAGES, &err) != CT_OK) {
        fprintf(stderr, "skipped: %s\n", err.msg);
        return 77;
    }
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/train", root);
    write_folder(dir, ds.images, ds.labels, ds.count);
    ct_dataset_free(&ds);

    losses cpu, gpu;
    if (train(dir, "cpu", &cpu) && train(dir, "gpu", &gpu)) {
        for (int e = 0; e < EPOCHS; e++)
            CHECK_MSG(fabs(cpu.loss[e] - gpu.loss[e]) <= 1e-6 * fabs(cpu.loss[e]) + 1e-9,
                      "epoch %d: loss %.9f with augment_on = cpu, %.9f with gpu", e + 1, cpu.loss[e], gpu.loss[e]);
        CHECK_MSG(gpu.train_accuracy[EPOCHS - 1] > 0.7, "train accuracy %.4f after %d epochs",
                  gpu.train_accuracy[EPOCHS - 1], EPOCHS);
        printf("losses cpu %.6f %.6f %.6f, gpu %.6f %.6f %.6f; train accuracy %.4f\n", cpu.loss[0], cpu.loss[1],
               cpu.loss[2], gpu.loss[0], gpu.loss[1], gpu.loss[2], gpu.train_accuracy[EPOCHS - 1]);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", root);
    return ct_test_done();
}

#else
#include "tests/no_cuda_main.h"
#endif
