/* cutrain export: a checkpoint with its config out to ONNX (the inference network) or safetensors
 * (the weights alone), through ct_export (docs/export.md). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* --format, --batch and --precision into options; prints the problem and returns CLI_USAGE. */
static int read_options(const cli_options *opt, ct_export_options *o)
{
    memset(o, 0, sizeof *o);
    if (opt->format && strcmp(opt->format, "safetensors") == 0)
        o->format = CT_EXPORT_SAFETENSORS;
    else if (opt->format && strcmp(opt->format, "onnx") != 0) {
        fprintf(stderr, "cutrain: export: --format %s: expected onnx or safetensors\n", opt->format);
        return CLI_USAGE;
    }
    if (o->format == CT_EXPORT_SAFETENSORS && (opt->given & (CLI_OPT(OPSET) | CLI_OPT(EXPORT_BATCH)))) {
        fprintf(stderr, "cutrain: export: --%s applies to ONNX, not to --format safetensors\n",
                opt->given & CLI_OPT(OPSET) ? "opset" : "batch");
        return CLI_USAGE;
    }
    o->opset = (int)opt->opset;
    if (opt->export_batch && strcmp(opt->export_batch, "dynamic") != 0) {
        char *end = NULL;
        long b = strtol(opt->export_batch, &end, 10);
        if (!*opt->export_batch || *end || b < 1 || b > 1000000) {
            fprintf(stderr, "cutrain: export: --batch %s: expected a number from 1 or dynamic\n", opt->export_batch);
            return CLI_USAGE;
        }
        o->batch = (int)b;
    }
    if (opt->export_precision && strcmp(opt->export_precision, "fp16") == 0)
        o->fp16 = 1;
    else if (opt->export_precision && strcmp(opt->export_precision, "fp32") != 0) {
        fprintf(stderr, "cutrain: export: --precision %s: expected fp32 or fp16\n", opt->export_precision);
        return CLI_USAGE;
    }
    return CLI_OK;
}

static int cmd_export(const cli_options *opt)
{
    ct_export_options o;
    int rc = read_options(opt, &o);
    if (rc != CLI_OK)
        return rc;
    ct_net *net = NULL;
    if ((rc = cli_open(opt, &net)) != CLI_OK)
        return rc;
    ct_status st = ct_export(net, opt->weights, opt->out, &o);
    if (st != CT_OK)
        return cli_fail(net, st);
    struct stat sb;
    if (!opt->quiet && stat(opt->out, &sb) == 0) {
        if (o.format == CT_EXPORT_ONNX)
            printf("exported %s: ONNX opset %d, %s weights, batch %s, %lld bytes\n", opt->out, o.opset ? o.opset : CT_EXPORT_OPSET_DEFAULT,
                   o.fp16 ? "fp16" : "fp32", o.batch ? opt->export_batch : "dynamic", (long long)sb.st_size);
        else
            printf("exported %s: safetensors, %s weights, %lld bytes\n", opt->out, o.fp16 ? "fp16" : "fp32",
                   (long long)sb.st_size);
    }
    ct_close(net);
    return CLI_OK;
}

const cli_command cli_cmd_export = {
    .name = "export",
    .run = cmd_export,
    .usage = "export --config FILE --weights CKPT --out FILE [--format onnx|safetensors]\n"
             "[--opset N] [--batch N|dynamic] [--precision fp32|fp16]",
    .about = "the network and a checkpoint's weights as an ONNX model (for\n"
             "onnxruntime, TensorRT, OpenVINO), or the weights as safetensors",
    .takes = CLI_OPTS_CONFIG | CLI_OPT(WEIGHTS) | CLI_OPT(OUT_FILE) | CLI_OPT(FORMAT) | CLI_OPT(OPSET) |
             CLI_OPT(EXPORT_BATCH) | CLI_OPT(EXPORT_PRECISION),
    .needs = CLI_OPT(CONFIG) | CLI_OPT(WEIGHTS) | CLI_OPT(OUT_FILE),
};
