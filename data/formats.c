/* The table of format records, made from CT_DATA_FORMATS. */
#include "data/format.h"

#define CT_DATA_FORMAT_DECL(upper, lower) extern const ct_data_format_def ct_data_format_##lower;
CT_DATA_FORMATS(CT_DATA_FORMAT_DECL)
#undef CT_DATA_FORMAT_DECL

static const ct_data_format_def *const records[CT_DATA_FORMAT_COUNT] = {
#define CT_DATA_FORMAT_ENTRY(upper, lower) [CT_DATA_##upper] = &ct_data_format_##lower,
    CT_DATA_FORMATS(CT_DATA_FORMAT_ENTRY)
#undef CT_DATA_FORMAT_ENTRY
};

const char *const ct_data_format_names[CT_DATA_FORMAT_COUNT + 1] = {
#define CT_DATA_FORMAT_NAME(upper, lower) [CT_DATA_##upper] = #lower,
    CT_DATA_FORMATS(CT_DATA_FORMAT_NAME)
#undef CT_DATA_FORMAT_NAME
    NULL};

const ct_data_format_def *ct_data_format_of(ct_data_format f)
{
    return (unsigned)f < CT_DATA_FORMAT_COUNT ? records[f] : NULL;
}

const char *ct_data_format_name(ct_data_format f)
{
    return (unsigned)f < CT_DATA_FORMAT_COUNT ? ct_data_format_names[f] : "?";
}
