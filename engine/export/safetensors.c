/* Safetensors files (docs/export.md): a little-endian u64 header length, a JSON header naming each
 * tensor's dtype, shape and byte range, then the tensors' bytes. The weights' file has one tensor
 * per parameter and batch-norm statistic, named "<layer>.weight", ".bias", ".running_mean",
 * ".running_var", in cutrain's own layouts: dense (units, in) with `in` in NHWC flattening order,
 * conv2d (filters, kh, kw, c), so that each is the checkpoint's bytes (fp32) unchanged. The writer
 * itself takes any fp32 tensors (the PyTorch crosscheck's helper writes activations with it). */
#include "export/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"

/* The tensors of layer l, at most 4, into t; returns how many. */
static int layer_tensors(const ct_export_net *net, int i, ct_st_tensor *t)
{
    const ct_layer *l = &net->graph->layers[i];
    const float *w = net->ck->params + net->packed_off[i], *b = w + l->w_count;
    int n = 0;
    if (l->type == CT_LAYER_DENSE && l->w_count)
        t[n++] = (ct_st_tensor){.data = w, .count = l->w_count,
                                .shape = {l->out.c, (int64_t)ct_shape_size(l->in_shape)}, .nd = 2};
    else if (l->type == CT_LAYER_CONV2D && l->w_count)
        t[n++] = (ct_st_tensor){.data = w, .count = l->w_count, .shape = {l->out.c, l->kh, l->kw, l->in_shape.c},
                                .nd = 4};
    else if (l->w_count)
        t[n++] = (ct_st_tensor){.data = w, .count = l->w_count, .shape = {(int64_t)l->w_count}, .nd = 1};
    if (n)
        snprintf(t[n - 1].name, sizeof t[n - 1].name, "%s.weight", l->cfg->name);
    if (l->b_count) {
        t[n] = (ct_st_tensor){.data = b, .count = l->b_count, .shape = {(int64_t)l->b_count}, .nd = 1};
        snprintf(t[n++].name, sizeof t->name, "%s.bias", l->cfg->name);
    }
    if (l->state_count) {
        /* batch norm's state: the running mean, then the running variance */
        size_t half = l->state_count / 2;
        const float *s = net->ck->state + l->state_off;
        t[n] = (ct_st_tensor){.data = s, .count = half, .shape = {(int64_t)half}, .nd = 1};
        snprintf(t[n++].name, sizeof t->name, "%s.running_mean", l->cfg->name);
        t[n] = (ct_st_tensor){.data = s + half, .count = half, .shape = {(int64_t)half}, .nd = 1};
        snprintf(t[n++].name, sizeof t->name, "%s.running_var", l->cfg->name);
    }
    return n;
}

static void header_entry(ct_pb *h, const ct_st_tensor *t, const char *dtype, size_t begin, size_t end)
{
    char text[160];
    ct_pb_raw(h, ", ", 2);
    ct_export_json_string(h, t->name);
    snprintf(text, sizeof text, ": {\"dtype\": \"%s\", \"shape\": [", dtype);
    ct_pb_raw(h, text, strlen(text));
    for (int d = 0; d < t->nd; d++) {
        snprintf(text, sizeof text, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        ct_pb_raw(h, text, strlen(text));
    }
    snprintf(text, sizeof text, "], \"data_offsets\": [%zu, %zu]}", begin, end);
    ct_pb_raw(h, text, strlen(text));
}

static void metadata_entry(ct_pb *h, const char *key, const char *value, int first)
{
    if (!first)
        ct_pb_raw(h, ", ", 2);
    ct_export_json_string(h, key);
    ct_pb_raw(h, ": ", 2);
    ct_export_json_string(h, value);
}

ct_status ct_safetensors_write(const ct_st_tensor *t, size_t n, const char *const *meta, size_t n_meta, int fp16,
                               ct_pb *out, ct_err *err)
{
    size_t esize = fp16 ? 2 : 4;
    ct_pb h = ct_pb_growing();
    ct_pb_raw(&h, "{\"__metadata__\": {", 18);
    for (size_t i = 0; i < n_meta; i++)
        metadata_entry(&h, meta[2 * i], meta[2 * i + 1], i == 0);
    ct_pb_raw(&h, "}", 1);
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        header_entry(&h, &t[k], fp16 ? "F16" : "F32", off, off + t[k].count * esize);
        off += t[k].count * esize;
    }
    ct_pb_raw(&h, "}", 1);
    while (h.len % 8)   /* the data 8-byte aligned, as the format recommends */
        ct_pb_raw(&h, " ", 1);
    ct_pb_le64(out, h.len);
    ct_pb_raw(out, h.buf, h.len);
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < t[k].count; j++) {
            if (fp16) {
                uint16_t v = ct_f16_from_f32(t[k].data[j]);
                unsigned char le[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
                ct_pb_raw(out, le, 2);
            } else {
                ct_pb_le32(out, ct_f32_bits(t[k].data[j]));
            }
        }
    int nomem = h.nomem || out->nomem;
    ct_pb_free(&h);
    if (nomem)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory writing the safetensors file");
    return CT_OK;
}

ct_status ct_export_safetensors(const ct_export_net *net, int fp16, ct_pb *out, ct_err *err)
{
    const ct_graph *g = net->graph;
    ct_st_tensor *t = malloc(((size_t)g->n_layers * 4 + 1) * sizeof *t);
    char *names = ct_export_class_names_json(net->ck);
    if (!t) {
        free(names);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory writing the safetensors file");
    }
    size_t n = 0;
    for (int i = 0; i < g->n_layers; i++)
        n += (size_t)layer_tensors(net, i, t + n);
    const char *meta[10] = {"format", "cutrain", "precision", fp16 ? "fp16" : "fp32", "layout",
                            "dense.weight (units, in), in in NHWC flattening order; conv2d.weight "
                            "(filters, kh, kw, c): OHWI, permute to (0, 3, 1, 2) for OIHW"};
    size_t n_meta = 3;
    if (names) {
        meta[2 * n_meta] = "class_names";
        meta[2 * n_meta++ + 1] = names;
    }
    meta[2 * n_meta] = "config";
    meta[2 * n_meta++ + 1] = net->config_text;
    ct_status st = ct_safetensors_write(t, n, meta, n_meta, fp16, out, err);
    free(names);
    free(t);
    return st;
}
