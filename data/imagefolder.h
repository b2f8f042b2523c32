/* format = imagefolder's crop (imagefolder.c), for its tests and the bench's report. */
#ifndef CT_IMAGEFOLDER_H
#define CT_IMAGEFOLDER_H

#include "data/dataset.h"
#include "data/image_decode.h"

/* The source region (and flip) that sample i of a batch with augment_seed takes of a width x
 * height image of set ds (opened by format = imagefolder or ct_image_files_open): the training
 * draws when augmenting, the evaluation crop otherwise. A pure function of its arguments. */
ct_image_region ct_imagefolder_region(const ct_dataset *ds, int augmenting, uint64_t augment_seed, int i, int width,
                                      int height);

#endif
