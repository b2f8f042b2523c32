/* A dataset's own lifetime, apart from the loaders, so that every format's reader can free what it
 * half-built without calling back into the loader that called it; and the per-thread readers of
 * sets decoded on demand. */
#include <stdlib.h>
#include <string.h>

#include "data/format.h"

void ct_dataset_free(ct_dataset *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->labels);
    if (ds->source) {
        const ct_data_format_def *def = ct_data_format_of(ds->format);
        if (def && def->source_free)
            def->source_free(ds->source);
    }
    if (ds->class_names)
        for (int c = 0; c < ds->classes; c++)
            free(ds->class_names[c]);
    free(ds->class_names);
    memset(ds, 0, sizeof *ds);
}

ct_status ct_sample_reader_new(const ct_dataset *ds, ct_sample_reader **out, ct_err *err)
{
    *out = NULL;
    const ct_data_format_def *def = ds->images ? NULL : ct_data_format_of(ds->format);
    ct_sample_reader *rd = calloc(1, sizeof *rd);
    if (!rd)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for an input reader");
    rd->def = def && def->read ? def : NULL;
    if (rd->def && rd->def->reader_new) {
        ct_status st = rd->def->reader_new(ds, &rd->state, err);
        if (st != CT_OK) {
            free(rd);
            return st;
        }
    }
    *out = rd;
    return CT_OK;
}

void ct_sample_reader_free(ct_sample_reader *rd)
{
    if (!rd)
        return;
    if (rd->def && rd->def->reader_free)
        rd->def->reader_free(rd->state);
    free(rd);
}

void ct_sample_reader_counts(const ct_sample_reader *rd, long long *input_bytes, long *bad_images)
{
    if (input_bytes)
        *input_bytes = rd ? rd->input_bytes : 0;
    if (bad_images)
        *bad_images = rd ? rd->bad_images : 0;
}
