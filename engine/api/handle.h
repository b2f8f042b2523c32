/* The ct_net handle behind the public API: the run it prepares and trains (train/run.h), and what
 * only the API keeps: the config's text as parsed and set, how the open went, the GPUs `devices`
 * names and why the devices were chosen. Internal to api/ (and the tests): below the API, code
 * takes the run. */
#ifndef CT_HANDLE_H
#define CT_HANDLE_H

#include "checkpoint/checkpoint.h"
#include "train/run.h"

struct ct_net {
    ct_run run;              /* its err is the handle's message (ct_errmsg) */
    ct_status open_status;   /* a failed open leaves only ct_errmsg and ct_close usable */
    ct_ini ini;
    int prepared;            /* data loaded, memory bound */
    int gpu_ordinals[CT_MAX_REPLICAS];  /* the GPUs devices names, resolved when the run opens */
    int n_gpus;              /* 0 on the CPU */
    char backend_reason[1024];
    ct_alloc_fault alloc_fault;  /* handed to the devices as they are created */
    /* the class names of the checkpoint last loaded (ct_load, ct_resume), n_class_names of them;
     * NULL when it had none */
    char **class_names;
    int n_class_names;
    char resume_note[512];   /* ct_resume_note: what the last ct_resume means beyond the state it restored */
};

/* Frees the loaded checkpoint's class names (ct_close, and a load that replaces them). */
void ct_net_forget_class_names(ct_net *net);

/* Loads the config and builds the graph (shapes only, data probed not loaded). */
ct_status ct_net_build_graph(ct_net *net);

/* Reads and parses a whole checkpoint file into ck, reading no more than a checkpoint of this
 * network can hold (an endless stream stops there); ct_checkpoint_free(ck) after. */
ct_status ct_net_read_checkpoint(ct_net *net, const char *path, ct_checkpoint *ck);

#endif
