/* cutrain doctor: the versions of the driver and the libraries, the mismatches that matter, a
 * pass/fail line per GPU, the all-GPU line and a verdict. Exit 0 only when everything passed;
 * 1 otherwise, and on a machine (or a build) without a GPU. */
#include <stdlib.h>

#include "cli.h"

/* cuBLAS, cuDNN and NCCL versions: major*10000 + minor*100 + patch (cuDNN 8 and NCCL before 2.9:
 * major*1000 + minor*100 + patch). */
static void lib_text(int v, char *buf, size_t n)
{
    if (v <= 0)
        snprintf(buf, n, "-");
    else if (v >= 10000)
        snprintf(buf, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else
        snprintf(buf, n, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}

/* CUDA versions: 1000*major + 10*minor. */
static void cuda_text(int v, char *buf, size_t n)
{
    if (v <= 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
}

static void print_row(const char *name, const char *compiled, const char *loaded)
{
    printf("  %-14s %-10s %s\n", name, compiled, loaded);
}

static void print_versions(const ct_doctor_report *r)
{
    char c[32], l[32];
    printf("%-16s %-10s %s\n", "versions", "compiled", "loaded");
    cuda_text(r->driver_cuda, l, sizeof l);
    print_row("CUDA driver", "-", r->driver_cuda > 0 ? l : "none");
    cuda_text(r->runtime_cuda, c, sizeof c);
    print_row("CUDA runtime", c, c);  /* linked statically: the one it was built with */
    lib_text(r->cublas_compiled, c, sizeof c);
    lib_text(r->cublas_loaded, l, sizeof l);
    print_row("cuBLAS", c, l);
    lib_text(r->cudnn_compiled, c, sizeof c);
    lib_text(r->cudnn_loaded, l, sizeof l);
    print_row("cuDNN", c, l);
    lib_text(r->nccl_compiled, c, sizeof c);
    lib_text(r->nccl_loaded, l, sizeof l);
    print_row("NCCL", c, l);
}

static void print_gpu(const ct_gpu_health *g, int with_nccl)
{
    printf("GPU %d (%s, %.1f GiB, %.1f free): ", g->ordinal, g->name[0] ? g->name : "unknown",
           g->total_mib / 1024.0, g->free_mib / 1024.0);
    if (!g->pass) {
        printf("FAIL: %s\n", g->detail);
        return;
    }
    printf("PASS");
    if (g->gemm_rel_err >= 0.0)
        printf("  gemm %.1e", g->gemm_rel_err);
    if (g->conv_rel_err >= 0.0)
        printf("  conv %.1e", g->conv_rel_err);
    /* a build without NCCL skips the all-reduce: say so rather than claim it passed */
    printf(with_nccl ? "  nccl ok\n" : "  nccl skipped: built without NCCL\n");
}

static int cmd_doctor(const cli_options *opt)
{
    (void)opt;
    ct_doctor_report *r = calloc(1, sizeof *r);  /* about 7 KiB: keep it off the stack */
    if (!r) {
        fprintf(stderr, "cutrain: out of memory\n");
        return CLI_FAILURE;
    }
    ct_status st = ct_doctor(r);
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: doctor could not run its checks (%s)\n", ct_status_name(st));
        free(r);
        return CLI_FAILURE;
    }

    if (r->built_with_cuda)
        print_versions(r);
    for (int i = 0; i < r->n_warnings; i++)
        printf("warning: %s\n", r->warnings[i]);
    fflush(stdout);

    if (r->n_gpus == 0) {
        fprintf(stderr, "cutrain: no GPU to check: %s\n", r->no_gpu_reason[0] ? r->no_gpu_reason : "none visible");
        free(r);
        return CLI_FAILURE;
    }

    int failed = 0;
    for (int i = 0; i < r->n_gpus; i++) {
        print_gpu(&r->gpus[i], r->nccl_compiled != 0);
        failed += !r->gpus[i].pass;
    }
    if (r->together < 0)
        printf("all GPUs together: skipped (%s)\n", r->together_detail[0] ? r->together_detail : "one GPU");
    else if (r->together > 0)
        printf("all GPUs together: PASS  %s\n", r->together_detail);
    else
        printf("all GPUs together: FAIL: %s\n", r->together_detail);

    int rc = r->pass ? CLI_OK : CLI_FAILURE;
    if (r->pass)
        printf("doctor: PASS (%d GPU%s)\n", r->n_gpus, r->n_gpus == 1 ? "" : "s");
    else if (failed)
        printf("doctor: FAIL (%d of %d GPU%s failed)\n", failed, r->n_gpus, r->n_gpus == 1 ? "" : "s");
    else
        printf("doctor: FAIL (the GPUs together)\n");
    free(r);
    return rc;
}

#define NO_CONFIG "doctor takes no config; it checks every visible GPU"

const cli_command cli_cmd_doctor = {
    .name = "doctor",
    .run = cmd_doctor,
    .usage = "doctor",
    .about = "driver and library versions, and a health check of every visible GPU",
    .refusals = (const cli_refusal[]){{CLI_OPT_CONFIG, NO_CONFIG}, {CLI_OPT_SET, NO_CONFIG},
                                      {CLI_OPT_DEVICES, NO_CONFIG}, {0}},
};
