/* The CPU backend's convolutions on oneDNN (Debian's libdnnl-dev), where the build found it
 * (CUTRAIN_ONEDNN): oneDNN's JIT kernels read NHWC directly, with no im2col copy of the batch,
 * fuse the bias and a relu / leaky activation into the output pass, and give the bias gradient
 * from the weight-gradient pass; 3x3 stride-1 convolutions of channels in sixteens may run its
 * Winograd kernels (ct_cpu_dnnl_conv.winograd), through blocked copies in the workspace. It is to this backend what cuDNN is to the CUDA one; builds
 * without it (the GPU machine's) keep the im2col + GEMM path of conv2d.c, which also takes any
 * convolution oneDNN declines.
 *
 * Primitives are made once per shape and kept (a batch's last, smaller step gets its own); their
 * scratchpad, the weights in the layout the kernels want and the temporary of an accumulated
 * input gradient all live in the backend's shared workspace, so nothing is allocated in a step
 * and the memory plan counts them (ct_cpu_dnnl_conv2d_workspace). */
#ifndef CT_CPU_ONEDNN_H
#define CT_CPU_ONEDNN_H

#include <stddef.h>

#include "base/status.h"
#include "base/types.h"
#include "base/window.h"

/* One backend's oneDNN engine, stream and primitive cache; NULL where the build has no oneDNN. */
typedef struct ct_cpu_dnnl ct_cpu_dnnl;

/* A convolution as the oneDNN path sees it. */
typedef struct ct_cpu_dnnl_conv {
    ct_window_geom g;
    int bias;                /* the layer has a bias */
    ct_activation act;       /* fused into the output when relu or leaky, else the caller applies it */
    int input_grad;          /* the layer computes dx (its input is not the data) */
    int winograd;            /* 1: a 3x3 stride-1 convolution with channels in sixteens may run
                              * Winograd's F(4x4, 3x3) ([train] winograd) */
} ct_cpu_dnnl_conv;

#ifdef CUTRAIN_HAVE_ONEDNN

/* *out = NULL with CT_OK when oneDNN cannot make a CPU engine here: the im2col path runs. */
ct_status ct_cpu_dnnl_create(ct_cpu_dnnl **out, ct_err *err);
void ct_cpu_dnnl_destroy(ct_cpu_dnnl *d);

/* 1 when oneDNN takes convolution c, with *bytes of workspace for its forward and backward at
 * c->g.n; 0 when it does not (the im2col path then). Makes and caches its primitive descriptors. */
int ct_cpu_dnnl_conv2d_workspace(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, size_t *bytes);
/* 1 when the fused activation (relu, leaky) is applied by the convolution's output pass. */
int ct_cpu_dnnl_fuses(ct_activation act);
/* "winograd" or "direct": the algorithm of c's forward as the plan made it; NULL when oneDNN
 * does not take c. */
const char *ct_cpu_dnnl_conv2d_algorithm(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c);

// x: (n, h, w, c); w: (f, kh, kw, c); b: (f) or NULL; y: (n, oh, ow, f) = conv + b, then the
// activation where ct_cpu_dnnl_fuses; ws: ws_bytes of workspace
ct_status ct_cpu_dnnl_conv2d_forward(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x, const float *w,
                                     const float *b, float *y, void *ws, size_t ws_bytes, ct_err *err);
// dz: (n, oh, ow, f), the gradient at the pre-activation; dx: (n, h, w, c) written or, with
// accumulate, added to (NULL: none); dw: (f, kh, kw, c) and db: (f) written (NULL: none)
ct_status ct_cpu_dnnl_conv2d_backward(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x, const float *w,
                                      const float *dz, float *dx, float *dw, float *db, int accumulate, void *ws,
                                      size_t ws_bytes, ct_err *err);

#else

static inline ct_status ct_cpu_dnnl_create(ct_cpu_dnnl **out, ct_err *err)
{
    (void)err;
    *out = NULL;
    return CT_OK;
}
static inline void ct_cpu_dnnl_destroy(ct_cpu_dnnl *d) { (void)d; }
static inline int ct_cpu_dnnl_conv2d_workspace(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, size_t *bytes)
{
    (void)d; (void)c;
    *bytes = 0;
    return 0;
}
static inline int ct_cpu_dnnl_fuses(ct_activation act)
{
    (void)act;
    return 0;
}
static inline const char *ct_cpu_dnnl_conv2d_algorithm(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c)
{
    (void)d; (void)c;
    return NULL;
}
static inline ct_status ct_cpu_dnnl_conv2d_forward(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x,
                                                   const float *w, const float *b, float *y, void *ws,
                                                   size_t ws_bytes, ct_err *err)
{
    (void)d; (void)c; (void)x; (void)w; (void)b; (void)y; (void)ws; (void)ws_bytes;
    return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: this build has no oneDNN");
}
static inline ct_status ct_cpu_dnnl_conv2d_backward(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x,
                                                    const float *w, const float *dz, float *dx, float *dw,
                                                    float *db, int accumulate, void *ws, size_t ws_bytes,
                                                    ct_err *err)
{
    (void)d; (void)c; (void)x; (void)w; (void)dz; (void)dx; (void)dw; (void)db; (void)accumulate; (void)ws;
    (void)ws_bytes;
    return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: this build has no oneDNN");
}

#endif

#endif
