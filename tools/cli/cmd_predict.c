/* cutrain predict: for each image, the most likely class and its probability, as CSV. The images
 * are an IDX file (index,class,probability) or JPEG / PNG files and folders of them
 * (path,class,probability), told apart by the first path's bytes. The class is its name when the
 * checkpoint (or the training folder) has names, else its index. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Whether path is an IDX file: a regular file starting 0x00 0x00 0x08 (the IDX magic's type byte
 * for uint8), or gzip (1f 8b), which is how IDX files are shipped; images are never gzipped. */
static int is_idx(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    unsigned char head[3] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    return (n == 3 && head[0] == 0 && head[1] == 0 && head[2] == 8) || (n >= 2 && head[0] == 0x1f && head[1] == 0x8b);
}

/* One CSV field, quoted (RFC 4180) when it holds a comma, a quote or a line break. */
static void csv_field(FILE *out, const char *text)
{
    if (!strpbrk(text, ",\"\r\n")) {
        fputs(text, out);
        return;
    }
    fputc('"', out);
    for (const char *p = text; *p; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

/* The class as printed: its name when the network has names, else its index. */
static void csv_class(FILE *out, ct_net *net, int cls)
{
    const char *name = ct_class_name(net, cls);
    if (name)
        csv_field(out, name);
    else
        fprintf(out, "%d", cls);
}

/* files: the image files predicted (NULL: an IDX file, rows named by index). probs (count, k):
 * every class's probability as columns p_0 .. p_<k-1>, or NULL. */
static int write_csv(FILE *out, ct_net *net, const ct_image_files *files, const int *classes,
                     const float *probabilities, long count, const float *probs, int k)
{
    fprintf(out, "%s,class,probability", files ? "path" : "index");
    for (int j = 0; probs && j < k; j++)
        fprintf(out, ",p_%d", j);
    fputc('\n', out);
    for (long i = 0; i < count; i++) {
        if (files)
            csv_field(out, ct_image_files_path(files, i));
        else
            fprintf(out, "%ld", i);
        fputc(',', out);
        csv_class(out, net, classes[i]);
        fprintf(out, ",%.6f", probabilities[i]);
        for (int j = 0; probs && j < k; j++)
            fprintf(out, ",%.9g", probs[(size_t)i * k + j]);   /* 9 digits: the float exactly */
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}

/* The predictions to standard output. */
static int print_predictions(ct_net *net, const ct_image_files *files, const int *classes, const float *probabilities,
                             long count, const float *probs, int k)
{
    if (write_csv(stdout, net, files, classes, probabilities, count, probs, k) != 0 || fflush(stdout) != 0) {
        fprintf(stderr, "cutrain: cannot write standard output: %s\n", strerror(errno));
        return CLI_FAILURE;
    }
    return CLI_OK;
}

/* The predictions to --out: written whole to a temporary file beside it, then renamed over it, as
 * checkpoints are, so that a full disk or an error leaves the file as it was (or absent), never a
 * part of it. The temporary name does not end in .csv, so a glob for the results never takes it. */
static int write_predictions(const cli_options *opt, ct_net *net, const ct_image_files *files, const int *classes,
                             const float *probabilities, long count, const float *probs, int k)
{
    if (!opt->out || strcmp(opt->out, "-") == 0)
        return print_predictions(net, files, classes, probabilities, count, probs, k);
    size_t size = strlen(opt->out) + 32;
    char *tmp = malloc(size);
    if (!tmp) {
        fprintf(stderr, "cutrain: cannot write %s: out of memory\n", opt->out);
        return CLI_FAILURE;
    }
    snprintf(tmp, size, "%s.tmp.%ld", opt->out, (long)getpid());
    const char *step = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    int saved = errno;
    if (fd >= 0 && !out)
        close(fd);
    if (out) {
        step = "write";
        int failed = write_csv(out, net, files, classes, probabilities, count, probs, k) != 0 || fflush(out) != 0;
        if (!failed && (step = "sync", fsync(fileno(out)) != 0))
            failed = 1;
        saved = errno;
        if (fclose(out) != 0 && !failed) {
            failed = 1;
            step = "write";
            saved = errno;
        }
        if (!failed && (step = "rename", rename(tmp, opt->out) != 0)) {
            failed = 1;
            saved = errno;
        }
        if (!failed) {
            free(tmp);
            return CLI_OK;
        }
    }
    if (fd >= 0)
        unlink(tmp);
    fprintf(stderr, "cutrain: cannot write %s (%s of %s failed: %s); %s\n", opt->out, step, tmp, strerror(saved),
            access(opt->out, F_OK) == 0 ? "the file there is unchanged" : "nothing was written");
    free(tmp);
    return CLI_FAILURE;
}

/* IDX images, as the data files hold them: loaded whole, then predicted. */
static int predict_idx(const cli_options *opt, ct_net *net, const char *path)
{
    int h, w, c;
    ct_input_shape(net, &h, &w, &c, NULL);
    ct_images images;
    char msg[1024];
    if (ct_read_idx_images(path, &images, msg, sizeof msg) != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", msg);
        return CLI_FAILURE;
    }
    if (images.h != h || images.w != w || images.c != c) {
        fprintf(stderr, "cutrain: %s holds %dx%dx%d images but the network takes %dx%dx%d\n", path, images.h,
                images.w, images.c, h, w, c);
        ct_free_images(&images);
        return CLI_FAILURE;
    }
    int k = 0;
    ct_input_shape(net, NULL, NULL, NULL, &k);
    size_t rows = (size_t)(images.count ? images.count : 1);
    int *classes = malloc(rows * sizeof *classes);
    float *probabilities = malloc(rows * sizeof *probabilities);
    float *probs = opt->probs ? malloc(rows * (size_t)k * sizeof *probs) : NULL;
    ct_status st = CT_ERR_NOMEM;
    if (classes && probabilities && (probs || !opt->probs))
        st = probs ? ct_predict_probs(net, images.pixels, images.count, probs)
                   : ct_predict(net, images.pixels, images.count, classes, probabilities);
    /* with every probability: the class and its probability from them, as ct_predict makes them */
    for (long i = 0; st == CT_OK && probs && i < images.count; i++) {
        const float *p = probs + (size_t)i * k;
        classes[i] = 0;
        for (int j = 1; j < k; j++)
            if (p[j] > p[classes[i]])
                classes[i] = j;
        probabilities[i] = p[classes[i]];
    }
    int rc = CLI_OK;
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", !classes || !probabilities || (opt->probs && !probs) ? "out of memory"
                                                                                              : ct_errmsg(net));
        rc = cli_exit_code(st);
    } else {
        rc = write_predictions(opt, net, NULL, classes, probabilities, images.count, probs, k);
    }
    free(probs);
    free(classes);
    free(probabilities);
    ct_free_images(&images);
    return rc;
}

/* JPEG and PNG files and folders, decoded through the config's [data] as evaluation decodes. */
static int predict_files(const cli_options *opt, ct_net *net)
{
    ct_image_files *files = NULL;
    ct_status st = ct_open_image_files(net, opt->images, opt->n_images, &files);
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", ct_errmsg(net));
        return cli_exit_code(st);
    }
    long count = ct_image_files_count(files);
    int *classes = malloc((size_t)(count ? count : 1) * sizeof *classes);
    float *probabilities = malloc((size_t)(count ? count : 1) * sizeof *probabilities);
    st = classes && probabilities ? ct_predict_files(net, files, classes, probabilities) : CT_ERR_NOMEM;
    int rc = CLI_OK;
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", !classes || !probabilities ? "out of memory" : ct_errmsg(net));
        rc = cli_exit_code(st);
    } else {
        rc = write_predictions(opt, net, files, classes, probabilities, count, NULL, 0);
    }
    free(classes);
    free(probabilities);
    ct_close_image_files(files);
    return rc;
}

static int cmd_predict(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open_inference(opt, &net);  /* predict needs --weights (its record says so) */
    if (rc != CLI_OK)
        return rc;
    rc = is_idx(opt->images[0]) ? predict_idx(opt, net, opt->images[0]) : predict_files(opt, net);
    ct_close(net);
    return rc;
}

/* An IDX file is predicted alone: mixed with image paths it would be taken for a bad image. */
static int check_predict(const cli_options *opt)
{
    if (opt->probs && !is_idx(opt->images[0])) {
        fprintf(stderr, "cutrain: predict: --probs takes an IDX file (--images IDX)\n");
        return CLI_USAGE;
    }
    for (int i = 0; opt->n_images > 1 && i < opt->n_images; i++)
        if (is_idx(opt->images[i])) {
            fprintf(stderr, "cutrain: predict: %s is an IDX file; give it alone (one --images IDX), or only image "
                    "files and folders\n", opt->images[i]);
            return CLI_USAGE;
        }
    return CLI_OK;
}

const cli_command cli_cmd_predict = {
    .name = "predict",
    .run = cmd_predict,
    .usage = "predict --config FILE --weights CKPT --images IDX [--out CSV] [--probs]\n"
             "--config FILE --weights CKPT [--images] IMAGE|FOLDER... [--out CSV]",
    .about = "class and probability for each image of an IDX file, or of\n"
             "JPEG / PNG files and folders, as CSV (class names when the\n"
             "checkpoint has them)",
    .takes = CLI_OPTS_CONFIG | CLI_OPTS_RUN | CLI_OPT(WEIGHTS) | CLI_OPT(IMAGES) | CLI_OPT(OUT_CSV) | CLI_OPT(PROBS),
    .needs = CLI_OPT(CONFIG) | CLI_OPT(WEIGHTS) | CLI_OPT(IMAGES),
    .check = check_predict,
    .positional = CLI_OPT(IMAGES),
};
