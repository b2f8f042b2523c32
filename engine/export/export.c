/* What both export formats share: the checkpoint checked against the network, the config as text,
 * JSON strings for metadata. */
#include "export/export.h"

#include "checkpoint/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ct_status ct_export_check(const ct_graph *g, const ct_checkpoint *ck, const char *source, size_t *packed_off,
                          ct_err *err)
{
    ct_status st = ct_checkpoint_check_layers(g, ck, source, err);
    if (st != CT_OK)
        return st;
    size_t off = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        if (l->state_count && l->state_off + l->state_count > ck->n_state)
            return ct_fail(err, CT_ERR_DATA, "%s: layer [%s]'s statistics lie past the checkpoint's %llu", source,
                           l->cfg->name, (unsigned long long)ck->n_state);
        packed_off[i] = off;
        off += l->w_count + l->b_count;
    }
    if (off != ck->n_params)
        return ct_fail(err, CT_ERR_DATA, "%s holds %llu parameters but the config's layers have %zu", source,
                       (unsigned long long)ck->n_params, off);
    return CT_OK;
}

char *ct_export_config_text(const ct_ini *ini)
{
    ct_pb o = ct_pb_growing();
    for (int s = 0; s < ini->n_sections; s++) {
        const ct_ini_section *sec = &ini->sections[s];
        char line[CT_MAX_NAME + 8];
        snprintf(line, sizeof line, "%s[%s]\n", s ? "\n" : "", sec->name);
        ct_pb_raw(&o, line, strlen(line));
        for (int e = 0; e < sec->n_entries; e++) {
            ct_pb_raw(&o, sec->entries[e].key, strlen(sec->entries[e].key));
            ct_pb_raw(&o, " = ", 3);
            ct_pb_raw(&o, sec->entries[e].value, strlen(sec->entries[e].value));
            ct_pb_raw(&o, "\n", 1);
        }
    }
    ct_pb_raw(&o, "", 1);
    if (o.nomem) {
        ct_pb_free(&o);
        return NULL;
    }
    return (char *)o.buf;
}

void ct_export_json_string(ct_pb *o, const char *s)
{
    ct_pb_raw(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            ct_pb_raw(o, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            ct_pb_raw(o, esc, 6);
        } else {
            ct_pb_raw(o, p, 1);
        }
    }
    ct_pb_raw(o, "\"", 1);
}

char *ct_export_class_names_json(const ct_checkpoint *ck)
{
    if (!ck->n_classes)
        return NULL;
    ct_pb o = ct_pb_growing();
    ct_pb_raw(&o, "[", 1);
    for (uint32_t i = 0; i < ck->n_classes; i++) {
        if (i)
            ct_pb_raw(&o, ", ", 2);
        ct_export_json_string(&o, ck->class_names[i]);
    }
    ct_pb_raw(&o, "]", 2);   /* with the NUL */
    if (o.nomem) {
        ct_pb_free(&o);
        return NULL;
    }
    return (char *)o.buf;
}
