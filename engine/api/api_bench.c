/* The measuring calls: ct_bench (training steps timed in stream order, train/bench.c),
 * ct_bench_input (the input pipeline alone, data/pipeline.h) and ct_trace_step (one step traced,
 * train/bench.c), each on the prepared run. */
#include <stdio.h>
#include <string.h>

#include "api/handle.h"

/* A measuring call's start: its arguments refused when `bad` (saying `usage`), the run prepared. */
static ct_status begin(ct_net *net, int bad, const char *usage)
{
    if (!net)
        return CT_ERR_USAGE;
    if (bad)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "%s", usage);
    return ct_prepare(net);
}

ct_status ct_bench(ct_net *net, int warmup, long steps, ct_bench_result *out)
{
    ct_status st = begin(net, !out || warmup < 0 || steps <= 0, "ct_bench: needs a result and steps > 0, warmup >= 0");
    return st == CT_OK ? ct_train_bench(&net->run, warmup, steps, out) : st;
}

ct_status ct_bench_input(ct_net *net, long warmup, long batches, ct_input_bench_result *out)
{
    ct_status st = begin(net, !out || warmup < 0 || batches <= 0,
                         "ct_bench_input: needs a result and batches > 0, warmup >= 0");
    if (st != CT_OK)
        return st;
    ct_train_apply_threads(&net->run);
    ct_pipeline_config pc;   /* training's, ring memory included (pinned on the GPU) */
    ct_run_pipeline_config(&net->run, &pc);
    /* augment_on = gpu: the uint8 batches a GPU run ships, also where no device would take them
     * (the CPU backend trains on float32), so that the pipeline is measured as a GPU run feeds it */
    pc.raw_u8 = net->run.cfg.data.augment_on == CT_AUGMENT_ON_GPU;
    /* decode = gpu | auto: the pipeline alone has no device to decode on, so the workers decode */
    if (net->run.cfg.data.decode != CT_DECODE_AT_CPU) {
        size_t used = strlen(net->backend_reason);
        snprintf(net->backend_reason + used, sizeof net->backend_reason - used,
                 "; bench --input-only: the workers decode every image (decode = gpu needs the model's device)");
    }
    ct_pipeline_bench_result r;
    st = ct_pipeline_bench(&pc, warmup, batches, &r, &net->run.err);
    if (st != CT_OK)
        return st;
    *out = (ct_input_bench_result){
        .batches = r.batches, .images = r.images, .images_per_s = r.images_per_s, .seconds = r.seconds,
        .workers = r.workers, .prefetch = r.prefetch, .sync = r.sync,
        .cpu_seconds = r.cpu_seconds, .input_bytes = r.input_bytes,
    };
    return CT_OK;
}

ct_status ct_trace_step(ct_net *net, const char *path)
{
    ct_status st = begin(net, !path, "ct_trace_step: needs a path");
    return st == CT_OK ? ct_train_trace_step(&net->run, path) : st;
}
