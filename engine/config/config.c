/* The typed configuration: ct_ini -> ct_config, section by section in file order.
 *
 * Each section kind is read against its key table (data_keys.c, train_keys.c, layer_keys.c) by
 * the common reader (table.c); here are only the whole config's rules: [data] is required, [train]
 * may be left out (all defaults), every other section is a layer, and there is at least one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/keys.h"

static char *folder_of(const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == file ? 1 : (size_t)(slash - file);  /* "/net.ini" lives in "/" */
    char *dir = malloc(n + 1);
    if (dir) {
        memcpy(dir, file, n);
        dir[n] = '\0';
    }
    return dir;
}

static int is_layer_section(const ct_ini_section *sec)
{
    return strcmp(sec->name, "data") != 0 && strcmp(sec->name, "train") != 0;
}

static ct_status load(ct_config *cfg, const ct_ini *ini, ct_err *err)
{
    cfg->file = strdup(ini->file ? ini->file : "config");
    cfg->dir = cfg->file ? folder_of(cfg->file) : NULL;
    if (!cfg->dir)
        return ct_config_nomem(err);
    int n_layers = 0;
    for (int i = 0; i < ini->n_sections; i++)
        n_layers += is_layer_section(&ini->sections[i]);
    if (n_layers > 0 && !(cfg->layers = calloc((size_t)n_layers, sizeof *cfg->layers)))
        return ct_config_nomem(err);

    const ct_ini_section *data = NULL, *train = NULL;
    /* sections in file order, so the first error reported is the first in the file */
    for (int i = 0; i < ini->n_sections; i++) {
        const ct_ini_section *sec = &ini->sections[i];
        ct_value_ctx vc = {.ini = ini, .cfg = cfg, .sec = sec, .section = sec->name, .layer = -1, .err = err};
        ct_status st;
        if (strcmp(sec->name, "data") == 0) {
            data = sec;
            st = ct_config_read_data(&vc);
        } else if (strcmp(sec->name, "train") == 0) {
            train = sec;
            st = ct_config_read_train(&vc);
        } else {
            vc.layer = cfg->n_layers++;
            st = ct_config_read_layer(&vc);
        }
        if (st != CT_OK)
            return st;
    }
    if (!data)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, 0,
                          "no [data] section; add one with format and the training files");
    if (!train) {
        ct_value_ctx vc = {.ini = ini, .cfg = cfg, .section = "train", .layer = -1, .err = err};
        ct_status st = ct_config_read_train(&vc);
        if (st != CT_OK)
            return st;
    }
    if (cfg->n_layers == 0)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, 0,
                          "no layers; add a section per layer, such as [fc1] with type = dense");
    return CT_OK;
}

ct_status ct_config_load(ct_config *cfg, const ct_ini *ini, ct_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    ct_status st = load(cfg, ini, err);
    if (st != CT_OK)
        ct_config_free(cfg);
    return st;
}

void ct_config_free(ct_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->file);
    free(cfg->dir);
    free(cfg->data.train);
    free(cfg->data.train_labels);
    free(cfg->data.test);
    free(cfg->data.test_labels);
    free(cfg->data.class_list);
    free(cfg->layers);
    for (int i = 0; i < cfg->n_values; i++) {
        free(cfg->values[i].key);
        free(cfg->values[i].value);
    }
    free(cfg->values);
    memset(cfg, 0, sizeof *cfg);
}

ct_status ct_config_fail_train(ct_err *err, ct_status status, const ct_config *cfg, int key_line, const char *key,
                               const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (key_line < 0)
        return ct_fail(err, status, "--set train.%s: %s", key, msg);
    return ct_fail_at(err, status, cfg->file, key_line > 0 ? key_line : cfg->train.line, "%s", msg);
}
