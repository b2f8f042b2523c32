/* cutrain predict: for each image of an IDX file, the most likely class and its probability, as
 * CSV (index,class,probability). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int write_csv(FILE *out, const int *classes, const float *probabilities, long count)
{
    fprintf(out, "index,class,probability\n");
    for (long i = 0; i < count; i++)
        fprintf(out, "%ld,%d,%.6f\n", i, classes[i], probabilities[i]);
    return ferror(out) ? -1 : 0;
}

static int cmd_predict(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open_inference(opt, &net);  /* predict needs --weights (its record says so) */
    if (rc != CLI_OK)
        return rc;
    int h, w, c;
    ct_input_shape(net, &h, &w, &c, NULL);
    ct_images images;
    char msg[1024];
    if (ct_read_idx_images(opt->images, &images, msg, sizeof msg) != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", msg);
        ct_close(net);
        return CLI_FAILURE;
    }
    if (images.h != h || images.w != w || images.c != c) {
        fprintf(stderr, "cutrain: %s holds %dx%dx%d images but the network takes %dx%dx%d\n", opt->images,
                images.h, images.w, images.c, h, w, c);
        ct_free_images(&images);
        ct_close(net);
        return CLI_FAILURE;
    }
    int *classes = malloc((size_t)(images.count ? images.count : 1) * sizeof *classes);
    float *probabilities = malloc((size_t)(images.count ? images.count : 1) * sizeof *probabilities);
    ct_status st = classes && probabilities ? ct_predict(net, images.pixels, images.count, classes, probabilities)
                                            : CT_ERR_NOMEM;
    rc = CLI_OK;
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", st == CT_ERR_NOMEM && !classes ? "out of memory" : ct_errmsg(net));
        rc = cli_exit_code(st);
    } else {
        int to_stdout = !opt->out || strcmp(opt->out, "-") == 0;
        FILE *out = to_stdout ? stdout : fopen(opt->out, "w");
        int failed = !out || write_csv(out, classes, probabilities, images.count) != 0;
        if (out && !to_stdout && fclose(out) != 0)
            failed = 1;
        if (failed) {
            fprintf(stderr, "cutrain: cannot write %s: %s\n", to_stdout ? "standard output" : opt->out,
                    strerror(errno));
            rc = CLI_FAILURE;
        }
    }
    free(classes);
    free(probabilities);
    ct_free_images(&images);
    ct_close(net);
    return rc;
}

const cli_command cli_cmd_predict = {
    .name = "predict",
    .run = cmd_predict,
    .usage = "predict --config FILE --weights CKPT --images IDX [--out CSV]",
    .about = "class and probability for each image of an IDX file, as CSV",
    .takes = CLI_OPTS_CONFIG | CLI_OPTS_RUN | CLI_OPT(WEIGHTS) | CLI_OPT(IMAGES) | CLI_OPT(OUT_CSV),
    .needs = CLI_OPT(CONFIG) | CLI_OPT(WEIGHTS) | CLI_OPT(IMAGES),
};
