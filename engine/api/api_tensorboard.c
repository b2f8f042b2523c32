/* ct_tensorboard_open: the event file is created when asked, so that a folder that cannot be
 * written is refused before the data loads and anything trains. */
#include "api/handle.h"
#include "base/event_file.h"

ct_status ct_tensorboard_open(ct_net *net, const char *dir)
{
    if (!net)
        return CT_ERR_USAGE;
    if (net->open_status != CT_OK)
        return net->open_status;
    if (!dir)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_tensorboard_open: dir is NULL");
    ct_event_file *f = NULL;
    ct_status st = ct_event_file_open(dir, &f, &net->run.err);
    if (st != CT_OK)
        return st;
    ct_event_file_close(net->run.tensorboard);
    net->run.tensorboard = f;
    return CT_OK;
}

const char *ct_tensorboard_path(const ct_net *net)
{
    return net ? ct_event_file_path(net->run.tensorboard) : NULL;
}
