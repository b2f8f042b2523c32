/* The public calls that predict: classes for images in memory (ct_predict) and for image files
 * opened through the network's config (ct_open_image_files, ct_predict_files). Both run the
 * network's evaluation path on a set, so a file is decoded and normalised as evaluation would. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"

/* The set behind the public handle: image files decoded on demand (data/imagefolder.c). */
struct ct_image_files {
    ct_dataset set;
};

/* logits: (n, k) -> the argmax and its softmax probability per row, and every class's
 * probability (probs: (n, k), may be NULL) */
static void best_classes(const float *logits, int n, int k, int *classes, float *probabilities, float *probs)
{
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        int best = 0;
        for (int j = 1; j < k; j++)
            if (z[j] > z[best])
                best = j;
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - z[best]);
        if (classes)
            classes[i] = best;
        if (probabilities)
            probabilities[i] = (float)(1.0 / sum);
        for (int j = 0; probs && j < k; j++)
            probs[(size_t)i * k + j] = (float)(exp((double)z[j] - z[best]) / sum);
    }
}

/* Every sample of ds through the first replica, batch by batch.
 * ds: (count, h, w, c) samples of the network's input shape; classes, probabilities: (count) out;
 * probs: (count, classes) out. Any of them may be NULL. */
static ct_status predict_set(ct_net *net, const ct_dataset *ds, int *classes, float *probabilities, float *probs)
{
    /* predictions need no agreement between replicas: the first one makes them */
    ct_replica *r = &net->run.replicas[0];
    ct_graph *g = &r->graph;
    int k = g->classes;
    ct_status st = r->dev->ops->activate(r->dev, &net->run.err);
    float *logits = malloc((size_t)g->batch * (size_t)k * sizeof *logits);
    if (!logits)
        return ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory for predictions");
    for (long start = 0; start < ds->count && st == CT_OK; start += g->batch) {
        int n = (int)(ds->count - start < g->batch ? ds->count - start : g->batch);
        for (int i = 0; i < n; i++)
            net->run.eval_order[i] = start + i;
        st = ct_train_stage_batch(&net->run, r, ds, net->run.eval_order, n, 0, 0, &net->run.err);
        if (st == CT_OK)
            st = ct_graph_forward(g, n, 0, &net->run.err);
        if (st == CT_OK)
            st = r->dev->ops->download(r->dev, logits, ct_graph_output(g)->y->data,
                                       ct_tensor_rows_bytes(ct_graph_output(g)->y, n), &net->run.err);
        if (st == CT_OK)
            best_classes(logits, n, k, classes ? classes + start : NULL,
                         probabilities ? probabilities + start : NULL, probs ? probs + (size_t)start * k : NULL);
    }
    free(logits);
    return st;
}

/* images: (count, h, w, c) uint8 as the data files hold them, predicted as a set viewed in place */
static ct_status predict_images(ct_net *net, const char *call, const unsigned char *images, long count, int *classes,
                                float *probabilities, float *probs)
{
    if (!net || (!images && count > 0) || count < 0)
        return net ? ct_fail(&net->run.err, CT_ERR_USAGE, "%s: bad arguments", call) : CT_ERR_USAGE;
    ct_status st = ct_prepare_inference(net);
    if (st != CT_OK)
        return st;
    /* a view of the caller's images as a dataset, so batches are made as for evaluation */
    ct_dataset view = {.images = (uint8_t *)images, .labels = NULL, .count = count, .shape = net->run.graph.input};
    return predict_set(net, &view, classes, probabilities, probs);
}

ct_status ct_predict(ct_net *net, const unsigned char *images, long count, int *classes, float *probabilities)
{
    return predict_images(net, "ct_predict", images, count, classes, probabilities, NULL);
}

ct_status ct_predict_probs(ct_net *net, const unsigned char *images, long count, float *probs)
{
    if (net && !probs)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_predict_probs: probs is NULL");
    return predict_images(net, "ct_predict_probs", images, count, NULL, NULL, probs);
}

ct_status ct_open_image_files(ct_net *net, const char *const *paths, int n_paths, ct_image_files **out)
{
    if (out)
        *out = NULL;
    if (!net || !out || !paths || n_paths < 1)
        return net ? ct_fail(&net->run.err, CT_ERR_USAGE, "ct_open_image_files: %s", !out ? "out is NULL"
                                                                                : "no paths given")
                   : CT_ERR_USAGE;
    for (int i = 0; i < n_paths; i++)
        if (!paths[i])
            return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_open_image_files: path %d is NULL", i);
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    /* the evaluation transform of [data]; a config without image keys (a network trained on IDX
     * or CIFAR-10) takes the network's input shape, so its images are resized to what it reads */
    const ct_shape in = net->run.graph.input;
    ct_data_settings dc = net->run.cfg.data;
    if (dc.image_h <= 0 || dc.image_w <= 0) {
        dc.image_h = in.h;
        dc.image_w = in.w;
    }
    if (dc.channels <= 0)
        dc.channels = in.c;
    ct_image_files *files = calloc(1, sizeof *files);
    if (!files)
        return ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory opening images");
    st = ct_image_files_open(&dc, paths, n_paths, &files->set, &net->run.err);
    if (st == CT_OK && (files->set.shape.h != in.h || files->set.shape.w != in.w || files->set.shape.c != in.c)) {
        char got[48], want[48];
        ct_shape_text(files->set.shape, got, sizeof got);
        ct_shape_text(in, want, sizeof want);
        st = ct_fail(&net->run.err, CT_ERR_CONFIG, "%s: [data] decodes %s into %s images but the network "
                     "takes %s", net->run.cfg.file, paths[0], got, want);
    }
    if (st != CT_OK) {
        ct_close_image_files(files);
        return st;
    }
    *out = files;
    return CT_OK;
}

long ct_image_files_count(const ct_image_files *files)
{
    return files ? files->set.count : 0;
}

const char *ct_image_files_path(const ct_image_files *files, long index)
{
    return files ? ct_dataset_sample_path(&files->set, index) : NULL;
}

ct_status ct_predict_files(ct_net *net, const ct_image_files *files, int *classes, float *probabilities)
{
    if (!net || !files)
        return net ? ct_fail(&net->run.err, CT_ERR_USAGE, "ct_predict_files: files is NULL") : CT_ERR_USAGE;
    ct_status st = ct_prepare_inference(net);
    if (st != CT_OK)
        return st;
    return predict_set(net, &files->set, classes, probabilities, NULL);
}

void ct_close_image_files(ct_image_files *files)
{
    if (!files)
        return;
    ct_dataset_free(&files->set);
    free(files);
}
