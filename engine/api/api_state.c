/* The public calls that move state in and out of a network: checkpoints, the training position, the
 * class names a checkpoint carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "base/crc32c.h"
#include "checkpoint/snapshot.h"

static ct_status read_checkpoint_crc(ct_net *net, const char *path, ct_checkpoint *ck, uint32_t *crc);

ct_status ct_save(ct_net *net, const char *path)
{
    if (!net || !path)
        return net ? ct_fail(&net->run.err, CT_ERR_USAGE, "ct_save: path is NULL") : CT_ERR_USAGE;
    ct_status st = ct_prepare(net);
    if (st != CT_OK)
        return st;
    ct_checkpoint ck;
    st = ct_run_snapshot(&net->run, net->run.last_test_accuracy, &ck, &net->run.err);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == CT_OK) {
        len = ct_checkpoint_size(&ck);
        buf = malloc(len);
        if (!buf)
            st = ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory writing %s (%zu bytes)", path, len);
    }
    if (st == CT_OK) {
        ct_checkpoint_serialize(&ck, buf);
        st = ct_checkpoint_write_file(path, buf, len, &net->run.err);
    }
    free(buf);
    ct_checkpoint_free(&ck);
    return st;
}

void ct_net_forget_class_names(ct_net *net)
{
    for (int i = 0; i < net->n_class_names; i++)
        free(net->class_names[i]);
    free(net->class_names);
    net->class_names = NULL;
    net->n_class_names = 0;
}

/* What resuming from ck means beyond its state, for ct_resume_note: another optimizer's moments are
 * dropped (ct_run_restore starts the config's from zero), and a checkpoint at or past the config's
 * last epoch leaves nothing to train. */
static void note_resume(ct_net *net, const ct_checkpoint *ck, const char *path)
{
    const ct_train_config *t = &net->run.cfg.train;
    char *note = net->resume_note;
    size_t size = sizeof net->resume_note, used = 0;
    note[0] = '\0';
    if (ck->optimizer != (uint32_t)t->optimizer)
        used += (size_t)snprintf(note, size, "%s was trained with optimizer = %s and this config trains with %s: "
                                 "the checkpoint's optimizer state is dropped and %s's starts from zero",
                                 path, ct_optimizer_name(ck->optimizer), ct_optimizer_name((unsigned)t->optimizer),
                                 ct_optimizer_name((unsigned)t->optimizer));
    if (ck->epoch >= t->epochs && used < size)
        snprintf(note + used, size - used, "%s%s is at epoch %d and [train] epochs = %d: nothing is left to train "
                 "(raise epochs, e.g. --set train.epochs=%d, to train on)", used ? "; " : "", path, ck->epoch,
                 t->epochs, ck->epoch + 1);
}

const char *ct_resume_note(const ct_net *net)
{
    return net ? net->resume_note : "";
}

/* ct_resume before the run is prepared: the checkpoint is read first (after the processes' world
 * opens, before the data loads), so that under mpirun / srun the join compares what every process
 * resumes from. */
static ct_status read_before_prepare(ct_net *net, const char *path, ct_checkpoint *ck)
{
    uint32_t crc = 0;
    ct_status st = ct_net_build_graph(net);
    if (st == CT_OK)
        st = read_checkpoint_crc(net, path, ck, &crc);
    if (st != CT_OK)
        return st;
    snprintf(net->run.resumed, sizeof net->run.resumed, "step %llu (epoch %d), crc32c %08x",
             (unsigned long long)ck->step, (int)ck->epoch, (unsigned)crc);
    st = ct_prepare(net);
    net->run.resumed[0] = '\0';
    return st;
}

/* ct_load and ct_resume: the checkpoint into the network, after (resuming) the check that it was
 * saved from this training set; nothing changes on a refusal. */
static ct_status load_checkpoint(ct_net *net, const char *path, int resuming)
{
    if (!net || !path)
        return net ? ct_fail(&net->run.err, CT_ERR_USAGE, "%s: path is NULL", resuming ? "ct_resume" : "ct_load")
                   : CT_ERR_USAGE;
    ct_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ct_status st;
    if (resuming)
        net->resume_note[0] = '\0';
    if (resuming && !net->prepared) {
        st = read_before_prepare(net, path, &ck);
    } else if (resuming && net->run.world) {
        st = ct_fail(&net->run.err, CT_ERR_USAGE,
                     "ct_resume %s: in one of several processes (mpirun, srun), resume before the run is prepared "
                     "(call ct_resume instead of ct_prepare), so that the processes' join compares the checkpoint "
                     "each resumes from", path);
    } else {
        st = ct_prepare(net);
        if (st == CT_OK)
            st = ct_net_read_checkpoint(net, path, &ck);
    }
    if (st == CT_OK && resuming)
        st = ct_run_check_dataset(&net->run, &ck, path, &net->run.err);
    if (st == CT_OK)
        st = ct_run_restore(&net->run, &ck, path, &net->run.err);
    if (st == CT_OK && resuming)
        note_resume(net, &ck, path);
    if (st == CT_OK) {
        net->run.last_test_accuracy = ck.test_accuracy;
        /* the names move to the handle (what predictions are printed with) */
        ct_net_forget_class_names(net);
        net->class_names = ck.class_names;
        net->n_class_names = (int)ck.n_classes;
        ck.class_names = NULL;
        ck.n_classes = 0;
    }
    ct_checkpoint_free(&ck);
    return st;
}

ct_status ct_load(ct_net *net, const char *path)
{
    return load_checkpoint(net, path, 0);
}

ct_status ct_resume(ct_net *net, const char *path)
{
    return load_checkpoint(net, path, 1);
}

int ct_class_name_count(const ct_net *net)
{
    if (!net)
        return 0;
    if (net->n_class_names > 0)
        return net->n_class_names;
    return net->run.train.class_names ? net->run.train.classes : 0;
}

const char *ct_class_name(const ct_net *net, int index)
{
    if (!net || index < 0 || index >= ct_class_name_count(net))
        return NULL;
    return net->n_class_names > 0 ? net->class_names[index] : net->run.train.class_names[index];
}

/* Reads and parses a whole checkpoint file into ck; *crc (when not NULL): the CRC-32C of its
 * bytes. */
static ct_status read_checkpoint_crc(ct_net *net, const char *path, ct_checkpoint *ck, uint32_t *crc)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    memset(ck, 0, sizeof *ck);
    /* the network bounds what its checkpoint can be: an endless stream stops there */
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    const ct_graph *g = &net->run.graph;
    size_t limit = ct_checkpoint_bound((uint32_t)g->n_layers, g->n_params, g->n_state, (uint32_t)g->classes);
    st = ct_checkpoint_read_file(path, limit, &buf, &len, &net->run.err);
    if (st == CT_OK)
        st = ct_checkpoint_parse(buf, len, path, ck, &net->run.err);
    if (st == CT_OK && crc)
        *crc = ct_crc32c(buf, len);
    free(buf);
    return st;
}

/* handle.h */
ct_status ct_net_read_checkpoint(ct_net *net, const char *path, ct_checkpoint *ck)
{
    return read_checkpoint_crc(net, path, ck, NULL);
}

ct_status ct_checkpoint_info(ct_net *net, const char *path, int *epoch, long *step, double *test_accuracy)
{
    if (!net || !path)
        return net ? ct_fail(&net->run.err, CT_ERR_USAGE, "ct_checkpoint_info: path is NULL") : CT_ERR_USAGE;
    ct_checkpoint ck;
    ct_status st = ct_net_read_checkpoint(net, path, &ck);
    if (st == CT_OK) {
        if (epoch) *epoch = ck.epoch;
        if (step) *step = (long)ck.step;
        if (test_accuracy) *test_accuracy = ck.test_accuracy;
    }
    ct_checkpoint_free(&ck);
    return st;
}

ct_status ct_checkpoint_settings(ct_net *net, long *every_steps, int *keep)
{
    if (!net)
        return CT_ERR_USAGE;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    if (every_steps) *every_steps = net->run.cfg.train.checkpoint_every;
    if (keep) *keep = net->run.cfg.train.keep;
    return CT_OK;
}

int ct_epochs_done(const ct_net *net)
{
    return net ? net->run.epoch : 0;
}

long ct_steps_done(const ct_net *net)
{
    return net ? net->run.step : 0;
}

ct_status ct_input_shape(ct_net *net, int *h, int *w, int *c, int *classes)
{
    if (!net)
        return CT_ERR_USAGE;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    if (h) *h = net->run.graph.input.h;
    if (w) *w = net->run.graph.input.w;
    if (c) *c = net->run.graph.input.c;
    if (classes) *classes = net->run.graph.classes;
    return CT_OK;
}
