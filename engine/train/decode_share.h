/* [data] gpu_decode_cpu_share = auto: the share of each batch the input workers still decode when
 * the device decodes JPEGs (decode = gpu), measured at prepare so that the workers and the device
 * finish a batch together (data/encoded.h's ct_encoded_balanced_share). */
#ifndef CT_TRAIN_DECODE_SHARE_H
#define CT_TRAIN_DECODE_SHARE_H

#include "train/run.h"

typedef struct ct_decode_share {
    double share;            /* what the workers take, 0..1 */
    double cpu_s;            /* seconds per image: read and decoded on one worker thread */
    double handover_s;       /* read, header parsed and left compressed on one worker thread */
    double device_s;         /* decoded by the devices (the first replica's time over the replicas) */
    int workers;             /* the threads counted: [data] workers, or auto's most */
    int images;              /* the images measured (those the device takes, of a spread sample) */
} ct_decode_share;

/* Times the three on up to one batch (at most 128) of images spread over the training set, the
 * same files each way, the best of three rounds (the first warms the files and nvJPEG), with the
 * pipeline config pc the run will use (pc->encoded set). A sample with no image for the device
 * gives share 0. Outside any step: it synchronises with the device. */
ct_status ct_decode_share_measure(ct_run *run, const ct_pipeline_config *pc, ct_decode_share *out, ct_err *err);

#endif
