/* ct_doctor and `cutrain doctor`: on a machine without a GPU (the build machine, CI) the report
 * says why, passes nothing and the command exits 1 with the reason; where a GPU is visible,
 * every check must pass and the command exits 0. A CUDA build without NCCL reports NCCL 0 and
 * its all-reduce checks as skipped, which must not fail the doctor. */
#define _DEFAULT_SOURCE
#include "cutrain.h"
#include "tests/cli_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "cuda/cuda_device.h"
#include "cuda/cuda_doctor.h"
#endif

int main(void)
{
    int gpus = 0, nccl = 0;
#ifdef CUTRAIN_HAVE_CUDA
    char why[256] = "";
    if (ct_cuda_devices(&gpus, why, sizeof why) != CT_OK)
        gpus = 0;
    nccl = ct_cuda_doctor_has_nccl();
#endif

    CHECK(ct_doctor(NULL) == CT_ERR_USAGE);

    static ct_doctor_report rep;
    CHECK(ct_doctor(&rep) == CT_OK);
    CHECK(rep.n_warnings >= 0 && rep.n_warnings <= CT_DOCTOR_MAX_WARNINGS);
    for (int i = 0; i < rep.n_warnings; i++)
        printf("warning: %s\n", rep.warnings[i]);
#ifdef CUTRAIN_HAVE_CUDA
    CHECK(rep.built_with_cuda == 1);
    CHECK_MSG(rep.runtime_cuda > 0, "runtime %d", rep.runtime_cuda);
    CHECK_MSG(rep.cublas_compiled > 0 && rep.cudnn_compiled > 0, "compiled cuBLAS %d cuDNN %d", rep.cublas_compiled,
              rep.cudnn_compiled);
    /* the libraries are linked, so their versions can be read with or without a GPU */
    CHECK_MSG(rep.cublas_loaded > 0 && rep.cudnn_loaded > 0, "loaded cuBLAS %d cuDNN %d", rep.cublas_loaded,
              rep.cudnn_loaded);
    printf("NCCL: %s (compiled %d, loaded %d)\n", nccl ? "built with it" : "built without it", rep.nccl_compiled,
           rep.nccl_loaded);
    if (nccl) {
        CHECK_MSG(rep.nccl_compiled > 0 && rep.nccl_loaded > 0, "NCCL compiled %d loaded %d", rep.nccl_compiled,
                  rep.nccl_loaded);
    } else {
        CHECK_MSG(rep.nccl_compiled == 0 && rep.nccl_loaded == 0, "NCCL compiled %d loaded %d without NCCL",
                  rep.nccl_compiled, rep.nccl_loaded);
        int said = 0;
        for (int i = 0; i < rep.n_warnings; i++)
            said |= ct_contains(rep.warnings[i], "skipped: built without NCCL");
        CHECK_MSG(said, "no warning says the NCCL checks are skipped");
    }
#else
    CHECK(rep.built_with_cuda == 0);
#endif

    if (!make_scratch("ct_doctor"))
        return 1;
    (void)write_file;
    if (gpus == 0) {
        CHECK(rep.pass == 0);
        CHECK(rep.n_gpus == 0);
        CHECK(rep.together == -1);
        CHECK_MSG(rep.no_gpu_reason[0] != '\0', "no reason given");
        printf("no GPU: %s\n", rep.no_gpu_reason);
        int rc = run("doctor");
        CHECK_MSG(rc == 1 && ct_contains(out, rep.no_gpu_reason), "exit %d, got: %s", rc, out);
    } else {
        CHECK_MSG(rep.n_gpus == (gpus < CT_DOCTOR_MAX_GPUS ? gpus : CT_DOCTOR_MAX_GPUS), "n_gpus %d of %d",
                  rep.n_gpus, gpus);
        for (int i = 0; i < rep.n_gpus; i++) {
            const ct_gpu_health *g = &rep.gpus[i];
            printf("GPU %d (%s): %s, gemm %.2e conv %.2e: %s\n", g->ordinal, g->name, g->pass ? "pass" : "FAIL",
                   g->gemm_rel_err, g->conv_rel_err, g->detail);
            CHECK_MSG(g->pass == 1, "GPU %d: %s", i, g->detail);
            CHECK(g->gemm_rel_err >= 0.0 && g->gemm_rel_err < 1e-3);
            CHECK(g->conv_rel_err >= 0.0 && g->conv_rel_err < 1e-3);
            CHECK(g->total_mib > 0.0 && g->free_mib > 0.0 && g->free_mib <= g->total_mib);
            CHECK_MSG(ct_contains(g->detail, nccl ? "NCCL all-reduce correct" : "skipped: built without NCCL"),
                      "GPU %d: %s", i, g->detail);
        }
        CHECK_MSG(rep.together == (rep.n_gpus >= 2 && nccl ? 1 : -1), "together %d: %s", rep.together,
                  rep.together_detail);
        if (rep.n_gpus >= 2 && !nccl)
            CHECK_MSG(ct_contains(rep.together_detail, "skipped: built without NCCL"), "together: %s",
                      rep.together_detail);
        CHECK_MSG(rep.pass == 1, "the doctor did not pass");
        int rc = run("doctor");
        CHECK_MSG(rc == 0 && ct_contains(out, "PASS") && ct_contains(out, "GPU 0 ("), "exit %d, got: %s", rc, out);
    }
    if (rep.built_with_cuda && !nccl)  /* the command says it too, GPU or not */
        CHECK_MSG(ct_contains(out, "skipped: built without NCCL"), "got: %s", out);
    remove_scratch();
    return ct_test_done();
}
