/* The public calls that need no handle: reading IDX images and formatting a shape. They wrap the
 * library's own reader and formatter so that a program holding only cutrain.h (the command among
 * them) reads and prints exactly what the library does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/types.h"
#include "data/dataset.h"

/* The caller's message buffer is optional and may be tiny: snprintf truncates and terminates. */
static void put_msg(char *msg, size_t msg_size, const char *text)
{
    if (msg && msg_size > 0)
        snprintf(msg, msg_size, "%s", text);
}

ct_status ct_read_idx_images(const char *path, ct_images *out, char *msg, size_t msg_size)
{
    put_msg(msg, msg_size, "");
    if (!out || !path) {
        put_msg(msg, msg_size, !out ? "ct_read_idx_images: out is NULL" : "ct_read_idx_images: path is NULL");
        return CT_ERR_USAGE;
    }
    memset(out, 0, sizeof *out);
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_idx_load(&ds, path, NULL, 0, &err);
    if (st != CT_OK) {
        put_msg(msg, msg_size, err.msg);
        return st;
    }
    /* Without a label file the reader makes zero labels, which nobody asked for here. */
    free(ds.labels);
    *out = (ct_images){.pixels = ds.images, .count = ds.count, .h = ds.shape.h, .w = ds.shape.w,
                       .c = ds.shape.c};
    return CT_OK;
}

void ct_free_images(ct_images *images)
{
    if (!images)
        return;
    free(images->pixels);
    memset(images, 0, sizeof *images);
}

ct_status ct_format_shape(int h, int w, int c, char *buf, size_t size)
{
    if (!buf || size == 0)
        return CT_ERR_USAGE;
    ct_shape_text((ct_shape){h, w, c}, buf, size);
    return CT_OK;
}
