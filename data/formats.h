/* The data formats, one row each: the one list of them (as CT_LAYER_TYPES is for layers).
 *
 * A row X(UPPER, lower) is `format = lower` in [data], the value CT_DATA_UPPER of ct_data_format,
 * and the record ct_data_format_lower (a ct_data_format_def, data/format.h) that the format's own
 * file, data/<lower>.c, defines: the [data] keys it takes, and how it checks, opens, probes and
 * reads its sets. The config reader and the loader take everything from the records, so adding a
 * format is its file plus one row here. */
#ifndef CT_DATA_FORMATS_H
#define CT_DATA_FORMATS_H

#define CT_DATA_FORMATS(X)  \
    X(IDX, idx)             \
    X(CIFAR10, cifar10)     \
    X(SYNTHETIC, synthetic) \
    X(IMAGEFOLDER, imagefolder) \
    /* a new format: one row above this line */

#define CT_DATA_FORMAT_ENUM(upper, lower) CT_DATA_##upper,
typedef enum ct_data_format { CT_DATA_FORMATS(CT_DATA_FORMAT_ENUM) CT_DATA_FORMAT_COUNT } ct_data_format;
#undef CT_DATA_FORMAT_ENUM

/* The config's word for each format, in enum order, NULL-terminated. */
extern const char *const ct_data_format_names[CT_DATA_FORMAT_COUNT + 1];

#endif
