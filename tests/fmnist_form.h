/* Pointing a test's config at the Fashion-MNIST folder (CT_FMNIST_DIR): the four data keys set on
 * an open network, or a config text that is a printf form with four %s (train images, train
 * labels, test images, test labels). */
#ifndef CT_FMNIST_FORM_H
#define CT_FMNIST_FORM_H

#include "cutrain.h"
#include "tests/test_util.h"

/* The [data] keys and the file each names, in the form's order. */
static const char *const CT_FMNIST_KEYS[4][2] = {
    {"data.train", "train-images-idx3-ubyte.gz"}, {"data.train_labels", "train-labels-idx1-ubyte.gz"},
    {"data.test", "t10k-images-idx3-ubyte.gz"},   {"data.test_labels", "t10k-labels-idx1-ubyte.gz"},
};

/* Sets the four data keys of net to the files in CT_FMNIST_DIR. */
static inline ct_status ct_set_fmnist_data(ct_net *net)
{
    char value[1024];
    ct_status st = CT_OK;
    for (int i = 0; st == CT_OK && i < 4; i++) {
        snprintf(value, sizeof value, "%s/%s", ct_fmnist_dir(), CT_FMNIST_KEYS[i][1]);
        st = ct_set(net, CT_FMNIST_KEYS[i][0], value);
    }
    return st;
}

static inline ct_status ct_open_fmnist_form(const char *form, const char *name, ct_net **net)
{
    char text[4096];
    const char *d = ct_fmnist_dir();
    snprintf(text, sizeof text, form, d, d, d, d);
    *net = NULL;
    return ct_open_string(text, name, net);
}

#endif
