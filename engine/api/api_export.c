/* ct_export: the handle's network and a checkpoint out to ONNX or safetensors (export/). */
#include <stdlib.h>

#include "api/handle.h"
#include "export/export.h"

static ct_status check_options(ct_net *net, const ct_export_options *o)
{
    if (o->format != CT_EXPORT_ONNX && o->format != CT_EXPORT_SAFETENSORS)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_export: unknown format %d", (int)o->format);
    if (o->batch < 0)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_export: batch %d (0 for a dynamic batch)", o->batch);
    if (o->opset && (o->opset < CT_EXPORT_OPSET_MIN || o->opset > CT_EXPORT_OPSET_MAX))
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ONNX opset %d is not one cutrain writes (%d to %d)", o->opset,
                       CT_EXPORT_OPSET_MIN, CT_EXPORT_OPSET_MAX);
    return CT_OK;
}

ct_status ct_export(ct_net *net, const char *weights, const char *path, const ct_export_options *options)
{
    if (!net)
        return CT_ERR_USAGE;
    if (!weights || !path)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_export: %s is NULL", !weights ? "weights" : "path");
    ct_export_options o = options ? *options : (ct_export_options){.format = CT_EXPORT_ONNX};
    ct_status st = check_options(net, &o);
    if (st == CT_OK)
        st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    const ct_graph *g = &net->run.graph;
    ct_checkpoint ck = {0};
    size_t *packed_off = malloc((size_t)g->n_layers * sizeof *packed_off);
    char *text = ct_export_config_text(&net->ini);
    if (!packed_off || !text)
        st = ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory exporting %s", weights);
    if (st == CT_OK)
        st = ct_net_read_checkpoint(net, weights, &ck);
    if (st == CT_OK)
        st = ct_export_check(g, &ck, weights, packed_off, &net->run.err);
    ct_pb out = ct_pb_growing();
    if (st == CT_OK) {
        ct_export_net en = {.graph = g, .data = &net->run.cfg.data, .ck = &ck, .config_text = text,
                            .source = weights, .packed_off = packed_off};
        ct_export_spec spec = {.opset = o.opset ? o.opset : CT_EXPORT_OPSET_DEFAULT, .batch = o.batch, .fp16 = o.fp16};
        st = o.format == CT_EXPORT_ONNX ? ct_export_onnx(&en, &spec, &out, &net->run.err)
                                        : ct_export_safetensors(&en, o.fp16, &out, &net->run.err);
    }
    if (st == CT_OK)
        st = ct_checkpoint_write_file(path, out.buf, out.len, &net->run.err);
    ct_pb_free(&out);
    ct_checkpoint_free(&ck);
    free(packed_off);
    free(text);
    return st;
}
