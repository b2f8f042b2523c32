/* Opening a test's config text whose data paths are the Fashion-MNIST folder: the text is a
 * printf form with four %s (train images, train labels, test images, test labels). */
#ifndef CT_FMNIST_FORM_H
#define CT_FMNIST_FORM_H

#include "cutrain.h"
#include "tests/test_util.h"

static inline ct_status ct_open_fmnist_form(const char *form, const char *name, ct_net **net)
{
    char text[4096];
    const char *d = ct_fmnist_dir();
    snprintf(text, sizeof text, form, d, d, d, d);
    *net = NULL;
    return ct_open_string(text, name, net);
}

#endif
