/* What [data] says, as the data code reads it: the files, normalisation and augmentation, and the
 * input pipeline's settings.
 *
 * It lives with the data code, not the config reader, so that data/ depends on nothing of the
 * engine's but base/: the config reader (engine/config/) fills this struct, and data/ never sees
 * the rest of the config. */
#ifndef CT_DATA_SETTINGS_H
#define CT_DATA_SETTINGS_H

#include "base/types.h"
#include "data/formats.h"

#define CT_MAX_CHANNELS 4

/* [data] augment_on: where crop/flip/normalise run. */
typedef enum ct_augment_on {
    CT_AUGMENT_ON_CPU,       /* the pipeline's workers write float32 batches */
    CT_AUGMENT_ON_GPU        /* uint8 batches are shipped (4x fewer bytes); a kernel augments */
} ct_augment_on;

/* [data] on_bad_image (format = imagefolder): what a file that does not decode does. */
typedef enum ct_bad_image_action {
    CT_BAD_IMAGE_ERROR,      /* the training fails, naming the file and the decoder's reason */
    CT_BAD_IMAGE_SKIP        /* the sample is replaced by the next file of the index that decodes */
} ct_bad_image_action;

/* [data] cache (format = imagefolder): where the compressed files are read from. */
typedef enum ct_image_cache {
    CT_IMAGE_CACHE_NONE,     /* each file is read when it is decoded */
    CT_IMAGE_CACHE_BYTES     /* every file is read into memory at open */
} ct_image_cache;

/* [data] decode_shortcuts (format = imagefolder): which of the JPEG decoder's savings run, all by
 * default; the others are for measuring what each saves (data/image_decode.h). */
typedef enum ct_decode_shortcuts {
    CT_DECODE_SHORTCUTS_ALL,        /* region decoding and DCT scaling */
    CT_DECODE_SHORTCUTS_REGION,     /* only the region: rows skipped, columns cropped, stop below */
    CT_DECODE_SHORTCUTS_DCT_SCALE,  /* only the DCT scaling, of the whole image */
    CT_DECODE_SHORTCUTS_NONE        /* the whole image at full size, then the region taken */
} ct_decode_shortcuts;

/* [data] jpeg_huffman (format = imagefolder): whose Huffman decoder reads baseline JPEGs; the
 * pixels are the same (data/jpeg_huffman.h), libjpeg is there to measure against and to fall back on. */
typedef enum ct_jpeg_huffman_choice {
    CT_JPEG_HUFFMAN_CUTRAIN,   /* data/jpeg_huffman.c, where the scan suits it */
    CT_JPEG_HUFFMAN_LIBJPEG    /* libjpeg-turbo's own, always */
} ct_jpeg_huffman_choice;

/* [data] decode (format = imagefolder): where the JPEGs of the training batches are decoded. */
typedef enum ct_decode_at {
    CT_DECODE_AT_CPU,        /* the input workers (libjpeg-turbo) */
    CT_DECODE_AT_GPU,        /* the device (nvJPEG), the workers only read the files and draw the
                                crops; refused where the backend has no image decoder */
    CT_DECODE_AT_AUTO        /* the device where the backend has an image decoder that loads, else
                                the workers; the log says which */
} ct_decode_at;

/* [data] pipeline: how batches are made. */
typedef enum ct_pipeline_mode {
    CT_PIPELINE_PARALLEL,    /* worker threads and a prefetch ring */
    CT_PIPELINE_SYNC         /* the naive mode: one thread, per sample, pageable memory, no prefetch */
} ct_pipeline_mode;

typedef struct ct_data_settings {
    ct_data_format format;   /* a row of CT_DATA_FORMATS; the format's record names its keys below */
    /* Paths resolved against the config file's folder (absolute paths kept). For cifar10 `train`
     * may list several files separated by commas or name a folder holding data_batch_1..5.bin;
     * labels are inside the files there. NULL when absent. */
    char *train, *train_labels, *test, *test_labels;
    float mean[CT_MAX_CHANNELS], std[CT_MAX_CHANNELS];
    int n_normalize;         /* channels given in `normalize` (0: none; 1 applies to all) */
    int crop_pad;            /* augment crop:N, 0 = off */
    int flip;                /* augment flip */
    ct_shape shape;          /* synthetic: h, w, c */
    int classes;             /* synthetic: number of classes */
    long count, test_count;  /* synthetic: samples */
    long train_limit, test_limit;  /* use only the first N samples, 0 = all */
    /* the input pipeline (data/pipeline.h) */
    int workers;             /* workers = auto | N: worker threads, 1..256; 0 = auto */
    int prefetch;            /* prefetch = auto | N: ring depth in batches, 1..64; 0 = auto */
    ct_augment_on augment_on;    /* augment_on = cpu | gpu (default cpu) */
    ct_pipeline_mode pipeline;   /* pipeline = parallel | sync (default parallel) */
    int drop_last;           /* drop_last = on | off: drop each epoch's last partial batch (default off) */
    /* format = imagefolder (data/imagefolder.c): class folders of JPEG/PNG files decoded by the
     * workers at the crop */
    char *class_list;        /* classes = a, b, ...: the comma list as given; NULL: every subfolder */
    float validation_split;  /* 0: none; 0 < F < 1: that share of train is the test set */
    long validation_seed;    /* the split's shuffle */
    int image_h, image_w;    /* image_size = H, W (or N): the output size */
    int channels;            /* 1 (luma) or 3 (RGB) */
    int random_resized_crop; /* augment random_resized_crop */
    float crop_scale[2];     /* area fraction range of random_resized_crop */
    float crop_ratio[2];     /* aspect ratio (w / h) range of random_resized_crop */
    int eval_resize;         /* evaluation: shorter side resized to this, then a centre crop; 0: the
                                default, round(image size * 256 / 224) */
    ct_bad_image_action on_bad_image;
    ct_image_cache cache;
    long max_pixels;         /* a file of more pixels is refused (0: no limit) */
    ct_decode_shortcuts decode_shortcuts;   /* which of the JPEG decoder's shortcuts run */
    ct_jpeg_huffman_choice jpeg_huffman;    /* whose Huffman decoder reads baseline JPEGs */
    ct_decode_at decode;     /* decode = cpu | gpu | auto (default cpu) */
    float gpu_decode_cpu_share;   /* with decode on the device: the share of each batch the workers
                                     still decode (0..1), or -1 for auto (measured at prepare) */
    int line;                /* line of [data], for messages */
} ct_data_settings;

#endif
