/* The many-small-layers check (launch_cost.h): a roofline per layer against its launches. */
#include <stdio.h>
#include <string.h>

#include "graph/launch_cost.h"

void ct_gpu_model_h100(ct_gpu_model *m)
{
    *m = (ct_gpu_model){
        .sms = 132, .clock_ghz = 1.98, .bandwidth = 3.35e12,
        .fp32_flops = 67e12,   /* 132 SMs x 128 lanes x 2 x 1.98 GHz */
        .tf32_flops = 495e12,  /* half the fp16 rate */
        .half_flops = 990e12,  /* dense, fp32 accumulation (sparsity doubles it; we use none) */
        .measured = 0,
    };
    snprintf(m->name, sizeof m->name, "an H100-class GPU (model)");
}

/* Per SM and clock: fp32 lanes, and dense fp16 tensor-core FLOPs with fp32 accumulation (the
 * data-center parts; GeForce parts halve the latter from 8.6 on, so on those a half layer's
 * products look twice as fast as they are, and the check errs towards launch-bound). */
static void arch_rates(int major, int minor, int *fp32_lanes, int *half_per_clock)
{
    if (major < 7) {            /* no tensor cores: half runs on the CUDA cores, two lanes each */
        *fp32_lanes = 64;
        *half_per_clock = 0;
    } else if (major == 7) {    /* Volta, Turing */
        *fp32_lanes = 64;
        *half_per_clock = 1024;
    } else if (major == 8 && minor == 0) {  /* A100 */
        *fp32_lanes = 64;
        *half_per_clock = 2048;
    } else if (major == 8) {    /* Ampere GA10x, Ada */
        *fp32_lanes = 128;
        *half_per_clock = 1024;
    } else if (major == 9) {    /* Hopper */
        *fp32_lanes = 128;
        *half_per_clock = 4096;
    } else if (major == 12) {   /* Blackwell workstation and GeForce parts */
        *fp32_lanes = 128;
        *half_per_clock = 1024;
    } else {                    /* data-center Blackwell (10.x), and what comes after */
        *fp32_lanes = 128;
        *half_per_clock = 8192;
    }
}

void ct_gpu_model_from_properties(ct_gpu_model *m, const char *name, int sms, int clock_khz, int mem_clock_khz,
                                  int bus_bits, int major, int minor)
{
    int lanes = 0, half = 0;
    arch_rates(major, minor, &lanes, &half);
    double hz = (double)clock_khz * 1e3;
    *m = (ct_gpu_model){.sms = sms, .clock_ghz = hz / 1e9, .measured = 1};
    snprintf(m->name, sizeof m->name, "%s", name ? name : "GPU");
    m->bandwidth = 2.0 * (double)mem_clock_khz * 1e3 * (double)bus_bits / 8.0;
    m->fp32_flops = (double)sms * lanes * 2.0 * hz;
    m->half_flops = half ? (double)sms * half * hz : 2.0 * m->fp32_flops;
    /* TF32 (from 8.0) runs at half the fp16 rate; before it, fp32 products use the CUDA cores */
    m->tf32_flops = major >= 8 ? m->half_flops / 2.0 : m->fp32_flops;
}

/* The peak a layer's arithmetic can reach: matrix products on the tensor cores in half runs,
 * convolutions in TF32 in fp32 runs (cuDNN is allowed it), dense products in plain fp32
 * (cuBLASLt is not, as PyTorch's default); everything else is elementwise, on the CUDA cores. */
static double peak_flops(const ct_layer *l, const ct_gpu_model *m)
{
    if (l->type != CT_LAYER_DENSE && l->type != CT_LAYER_CONV2D)
        return m->fp32_flops;
    if (ct_dtype_is_half(l->dtype))
        return m->half_flops;
    return l->type == CT_LAYER_CONV2D ? m->tf32_flops : m->fp32_flops;
}

/* Input k gets a gradient from this layer where its producer learns (what ct_graph_bind binds as
 * dx[k]). */
static int gives_dx(const ct_layer *l, int k)
{
    return l->wants_dx[k];
}

static int dx_count(const ct_layer *l)
{
    int n = 0;
    for (int k = 0; k < l->n_in; k++)
        n += gives_dx(l, k);
    return n;
}

/* Kernels the CUDA backend launches for the layer, forward and backward, counted from its ops
 * (engine/cuda/<type>.c) and rounded: a cuBLASLt product or a cuDNN call counts one, though
 * either may run a split reduction as a second kernel. */
static int layer_kernels(const ct_layer *l)
{
    int act = l->def->fused_activation && l->act != CT_ACT_LINEAR;  /* its gradient is one kernel */
    int dx = dx_count(l);
    switch (l->type) {
    case CT_LAYER_DENSE: {
        /* relu and linear ride the product's epilogue; the others are a kernel of their own */
        int fwd = 1 + (act && l->act != CT_ACT_RELU);
        return fwd + act + dx + 1 /* dw */ + (l->b_count ? 1 : 0);
    }
    case CT_LAYER_CONV2D:   /* convolution, bias + activation; filter and data gradients, bias sums */
        return 2 + act + 1 + dx + (l->b_count ? 1 : 0);
    case CT_LAYER_BATCHNORM: /* cuDNN's training forward and its backward (which always makes dx);
                              * bf16 takes the backend's own kernels: mean, variance (a sum and its
                              * finish each), coefficients and the normalising pass; backward's sums
                              * (two), coefficients and dx */
        return l->dtype == CT_DTYPE_BF16 ? 10 : 2;
    case CT_LAYER_ADD:
        return 1 + act + act + dx;
    case CT_LAYER_CONCAT:    /* one copy per input each way */
        return l->n_in + dx;
    case CT_LAYER_FLATTEN:   /* aliasing: nothing; over the network's input: one copy */
        return l->in[0] == CT_INPUT_NODE ? 1 : 0;
    default:                 /* pools, dropout, activation: one kernel each way */
        return 1 + dx;
    }
}

/* Bytes a layer moves at batch n, forward and backward (roughly, for a roofline):
 *   forward:  read x, read the parameters, write y
 *   backward: read dy, read x (or what stands for it: y, a mask, argmax), read the parameters and
 *             write their gradient, write dx for each input that gets one
 * that is 2 x + 3 p + 2 y + dx, activations in the layer's dtype, parameters fp32 (the masters
 * and their gradients; a half layer's weights are read as half, which this overstates). */
static double layer_bytes(const ct_layer *l, int n)
{
    if (l->def->aliases_input && l->in[0] != CT_INPUT_NODE)
        return 0.0;
    double elem = (double)ct_dtype_size(l->dtype);
    double x = 0.0, dx = 0.0;
    for (int k = 0; k < l->n_in; k++) {
        double bytes = (double)n * (double)ct_shape_size(l->in_shapes[k]) * elem;
        x += bytes;
        if (gives_dx(l, k))
            dx += bytes;
    }
    double y = (double)n * (double)ct_shape_size(l->out) * elem;
    double p = (double)(l->w_count + l->b_count) * 4.0;
    return 2.0 * x + 3.0 * p + 2.0 * y + dx;
}

static double roofline_us(double flops, double bytes, double peak, double bandwidth)
{
    double compute = peak > 0.0 ? flops / peak : 0.0;
    double memory = bandwidth > 0.0 ? bytes / bandwidth : 0.0;
    return 1e6 * (compute > memory ? compute : memory);
}

void ct_layer_cost_estimate(const ct_graph *g, int i, int batch, const ct_gpu_model *m, double per_launch_us,
                            ct_layer_cost *out)
{
    const ct_layer *l = &g->layers[i];
    ct_layer_cost c = {.kernels = layer_kernels(l)};
    c.flops = 3.0 * l->def->flops(l) * (double)batch;
    c.bytes = layer_bytes(l, batch);
    c.kernel_us = c.kernels ? roofline_us(c.flops, c.bytes, peak_flops(l, m), m->bandwidth) : 0.0;
    c.launch_us = c.kernels * per_launch_us;
    c.launch_bound = c.kernels > 0 && c.kernel_us < c.launch_us;
    *out = c;
}

void ct_step_cost_estimate(const ct_graph *g, int batch, ct_optimizer opt, const ct_gpu_model *m,
                           double per_launch_us, ct_layer_cost *per_layer, ct_step_cost *out)
{
    ct_step_cost s = {0};
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer_cost c;
        ct_layer_cost_estimate(g, i, batch, m, per_launch_us, &c);
        if (per_layer)
            per_layer[i] = c;
        if (c.kernels == 0)
            continue;
        s.layers++;
        s.launch_bound += c.launch_bound;
        s.launches += c.kernels;
        s.kernel_us += c.kernel_us;
    }
    /* Beyond the layers: the input batch's conversion from bytes, the loss, the optimizer's one
     * pass over the flat parameters, and in fp16 the loss scaler's unscale, check and update. */
    int fp16 = g->precision == CT_PREC_FP16;
    s.launches += 3 + (fp16 ? 3 : 0);
    double input = (double)batch * (double)ct_shape_size(g->input) * (1.0 + 4.0);
    double logits = (double)batch * (double)g->classes * 4.0 * 2.0;
    /* weights and gradients read, weights written, each moment read and written */
    int moments = opt == CT_OPT_SGD ? 0 : opt == CT_OPT_MOMENTUM ? 1 : 2;
    double update = (double)g->param_span * 4.0 * (3.0 + 2.0 * moments + (fp16 ? 2.0 : 0.0));
    s.kernel_us += roofline_us(0.0, input + logits + update, 0.0, m->bandwidth);
    s.launch_us = (double)s.launches * per_launch_us;
    s.warn = s.layers > 0 && 2 * s.launch_bound > s.layers;
    *out = s;
}
