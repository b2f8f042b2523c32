/* libFuzzer target for the config reader: ini text -> ct_ini_parse -> ct_ini_set -> ct_config_load.
 *
 * Input layout: TEXT [0x01 SECTION.KEY=VALUE]. Everything before the first 0x01 byte is the ini
 * text; what follows is one --set override, so the override path (creating [data]/[train],
 * replacing an entry, resetting its line to 0) gets fuzzed together with the text it applies to. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

/* Real configs are a few KiB; larger inputs only slow the fuzzer down. */
#define MAX_INPUT (64 * 1024)

/* A copy of data[0..n) with a terminating NUL (the parser takes C strings). */
static char *dup_bytes(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, data, n);
        s[n] = '\0';
    }
    return s;
}

/* Applies "section.key=value" (no '=': the whole override is the key, the value is empty). */
static void apply_override(ct_ini *ini, char *override)
{
    char *eq = strchr(override, '=');
    const char *value = "";
    if (eq) {
        *eq = '\0';
        value = eq + 1;
    }
    ct_err err = {0};
    ct_ini_set(ini, override, value, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An embedded NUL would silently truncate the text: such inputs test nothing new. */
    if (size > MAX_INPUT || memchr(data, '\0', size))
        return -1;
    const uint8_t *sep = memchr(data, 0x01, size);
    size_t text_len = sep ? (size_t)(sep - data) : size;
    char *text = dup_bytes(data, text_len);
    char *override = sep ? dup_bytes(sep + 1, size - text_len - 1) : NULL;
    if (!text || (sep && !override)) {
        free(text);
        free(override);
        return 0;
    }

    ct_ini ini;
    ct_err err = {0};
    /* A relative folder, so that ct_config_load's path resolution joins paths to it. */
    if (ct_ini_parse(&ini, text, "fuzz/model.ini", &err) == CT_OK) {
        if (override)
            apply_override(&ini, override);
        ct_config cfg;
        ct_err cerr = {0};
        if (ct_config_load(&cfg, &ini, &cerr) == CT_OK)
            ct_config_free(&cfg);
    }
    ct_ini_free(&ini);   /* also after a failed parse: the ini is left freeable */
    free(text);
    free(override);
    return 0;
}
