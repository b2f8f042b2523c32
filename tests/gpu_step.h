/* The training step and the evaluation as the trainer runs them (engine/train/train.c's step
 * work, less its replicas, buckets and scaler), for the GPU tests that drive a backend's run_step
 * themselves: enqueued without reading anything back, so that run_step may capture them. Include
 * inside #ifdef CUTRAIN_HAVE_CUDA, after the engine's graph and backend headers. */
#ifndef CT_GPU_STEP_H
#define CT_GPU_STEP_H

/* What one step's work needs; the step function gets it as its context. */
typedef struct step_ctx {
    ct_graph *g;
    ct_optim_step opt;
    int n;
} step_ctx;

/* Forward (training), loss, backward, optimizer. */
static inline ct_status train_work(void *p, ct_err *err)
{
    step_ctx *c = p;
    ct_graph *g = c->g;
    ct_backend *be = g->be;
    ct_layer *out = ct_graph_output(g);
    ct_status st = ct_graph_forward(g, c->n, 1, err);
    if (st == CT_OK)
        st = be->ops->loss(be, out->y, &g->labels, out->dy, c->n, err);
    if (st == CT_OK)
        st = ct_graph_backward(g, c->n, err);
    if (st == CT_OK)
        st = be->ops->optimizer_step(be, &c->opt, err);
    return st;
}

/* Evaluation: forward with running statistics and no dropout, the loss without a gradient. */
static inline ct_status eval_work(void *p, ct_err *err)
{
    step_ctx *c = p;
    ct_graph *g = c->g;
    ct_status st = ct_graph_forward(g, c->n, 0, err);
    if (st == CT_OK)
        st = g->be->ops->loss(g->be, ct_graph_output(g)->y, &g->labels, NULL, c->n, err);
    return st;
}

#endif
