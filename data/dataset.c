/* A dataset's own lifetime, apart from the loaders, so that every format's reader can free what it
 * half-built without calling back into the loader that called it. */
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"

void ct_dataset_free(ct_dataset *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
