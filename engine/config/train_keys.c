/* [train]: its keys and the parsers of its compound values. It has no variants. */
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/keys.h"

static const char *const optimizer_names[] = {"sgd", "momentum", "adam", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "step", "cosine", NULL};
static const char *const lr_scaling_names[] = {"none", "linear", "sqrt", NULL};
static const char *const comm_names[] = {"auto", "nccl", NULL};

/* CT_KEY_ENUM writes an int */
_Static_assert(sizeof(ct_optimizer) == sizeof(int) && sizeof(ct_schedule) == sizeof(int) &&
                   sizeof(ct_precision) == sizeof(int) && sizeof(ct_lr_scaling) == sizeof(int),
               "enums must be int-sized");

static ct_status parse_batch(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_devices(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_capture(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_memory(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_loss_scale(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_margin(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_candidates(const ct_value_ctx *, const ct_key_spec *, const char *, void *);

#define T(f) offsetof(ct_train_config, f)

static const ct_key_spec train_keys[] = {
    {.name = "epochs", .kind = CT_KEY_INT, .offset = T(epochs), .def = "10", .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "batch", .kind = CT_KEY_CUSTOM, .parse = parse_batch, .offset = T(batch), .def = "64",
     .flags = CT_KEY_HAS_MIN, .min = 1},
    /* max and auto: what they keep free, how large they may go, how long auto may measure */
    {.name = "memory_margin", .kind = CT_KEY_CUSTOM, .parse = parse_margin, .offset = T(memory_margin),
     .def = "10%"},
    {.name = "batch_max", .kind = CT_KEY_INT, .offset = T(batch_max), .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "batch_search_seconds", .kind = CT_KEY_FLOAT, .offset = T(batch_search_seconds), .def = "30",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    {.name = "batch_candidates", .kind = CT_KEY_CUSTOM, .parse = parse_candidates},
    /* auto: a batch too large for the training set trains too few steps in the configured epochs
     * (fmnist_mlp on the CPU ends at 0.879 at 50 steps an epoch, under its 0.883; 200 leaves a
     * margin: docs/batch-search.md has the figures) */
    {.name = "min_steps_per_epoch", .kind = CT_KEY_INT, .offset = T(min_steps_per_epoch), .def = "200",
     .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "lr_scaling", .kind = CT_KEY_ENUM, .offset = T(lr_scaling), .def = "none", .names = lr_scaling_names,
     .label = "lr_scaling"},
    {.name = "base_batch", .kind = CT_KEY_INT, .offset = T(base_batch), .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "optimizer", .kind = CT_KEY_ENUM, .offset = T(optimizer), .def = "adam", .names = optimizer_names,
     .label = "optimizer"},
    {.name = "learning_rate", .kind = CT_KEY_FLOAT, .offset = T(learning_rate), .def = "0.001",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    {.name = "momentum", .kind = CT_KEY_FLOAT, .offset = T(momentum), .def = "0.9",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX | CT_KEY_MAX_OPEN, .min = 0, .max = 1},
    {.name = "nesterov", .kind = CT_KEY_BOOL, .offset = T(nesterov), .def = "off"},
    {.name = "beta1", .kind = CT_KEY_FLOAT, .offset = T(beta1), .def = "0.9",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX | CT_KEY_MAX_OPEN, .min = 0, .max = 1},
    {.name = "beta2", .kind = CT_KEY_FLOAT, .offset = T(beta2), .def = "0.999",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX | CT_KEY_MAX_OPEN, .min = 0, .max = 1},
    {.name = "epsilon", .kind = CT_KEY_FLOAT, .offset = T(epsilon), .def = "1e-8",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    /* adamw's default of 0.01 is applied after reading, when weight_decay is not given */
    {.name = "weight_decay", .kind = CT_KEY_FLOAT, .offset = T(weight_decay), .def = "0", .flags = CT_KEY_HAS_MIN,
     .min = 0},
    {.name = "schedule", .kind = CT_KEY_ENUM, .offset = T(schedule), .def = "constant", .names = schedule_names,
     .label = "schedule"},
    {.name = "step_size", .kind = CT_KEY_FLOAT, .offset = T(step_size), .def = "10",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    {.name = "gamma", .kind = CT_KEY_FLOAT, .offset = T(gamma), .def = "0.1",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN | CT_KEY_HAS_MAX, .min = 0, .max = 1},
    {.name = "warmup", .kind = CT_KEY_FLOAT, .offset = T(warmup), .def = "0", .flags = CT_KEY_HAS_MIN, .min = 0},
    {.name = "min_lr", .kind = CT_KEY_FLOAT, .offset = T(min_lr), .def = "0", .flags = CT_KEY_HAS_MIN, .min = 0},
    {.name = "precision", .kind = CT_KEY_ENUM, .offset = T(precision), .def = "fp32", .names = ct_precision_names,
     .label = "precision"},
    /* Keras's and PyTorch's defaults: start at 2^15, double after 2000 clean steps. The first
     * scale lies within the scaler's own bounds (base/scaler.h), which it never leaves. */
    {.name = "loss_scale", .kind = CT_KEY_CUSTOM, .parse = parse_loss_scale, .offset = T(loss_scale),
     .def = "dynamic"},
    {.name = "loss_scale_init", .kind = CT_KEY_FLOAT, .offset = T(loss_scale_init), .def = "32768",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 1, .max = 16777216},
    {.name = "loss_scale_growth_steps", .kind = CT_KEY_INT, .offset = T(loss_scale_growth_steps), .def = "2000",
     .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "devices", .kind = CT_KEY_CUSTOM, .parse = parse_devices, .offset = T(devices), .def = "all",
     .flags = CT_KEY_PER_PROCESS},
    /* DDP's default bucket; a collective that waits longer than comm_timeout is an error */
    {.name = "bucket_mib", .kind = CT_KEY_FLOAT, .offset = T(bucket_mib), .def = "25",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    /* off: each replica normalises with its own slice's statistics (DDP's and MirroredStrategy's
     * default); on: with the global batch's */
    {.name = "sync_bn", .kind = CT_KEY_BOOL, .offset = T(sync_bn), .def = "off"},
    {.name = "comm_timeout", .kind = CT_KEY_FLOAT, .offset = T(comm_timeout), .def = "300",
     .flags = CT_KEY_PER_PROCESS | CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    /* nccl forces NCCL's communicator even on one GPU (one rank), to test that path alone */
    {.name = "comm", .kind = CT_KEY_ENUM, .offset = T(comm), .def = "auto", .names = comm_names, .label = "comm"},
    {.name = "graph", .kind = CT_KEY_CUSTOM, .parse = parse_capture, .offset = T(capture), .def = "auto"},
    /* off by default, as PyTorch's torch.backends.cudnn.deterministic */
    {.name = "deterministic", .kind = CT_KEY_BOOL, .offset = T(deterministic), .def = "off"},
    /* on by default, as PyTorch's torch.backends.cudnn.allow_tf32; off for parity runs, whose
     * convolutions must then round as plain fp32 */
    {.name = "tf32", .kind = CT_KEY_BOOL, .offset = T(tf32), .def = "on"},
    /* on by default, as tf32: the faster algorithm; off for runs compared to direct fp32 rounding */
    {.name = "winograd", .kind = CT_KEY_BOOL, .offset = T(winograd), .def = "on"},
    /* on by default, as winograd; off gives the dense kernels' sums, for runs compared with others */
    {.name = "sparse_backward", .kind = CT_KEY_BOOL, .offset = T(sparse_backward), .def = "on"},
    {.name = "memory", .kind = CT_KEY_CUSTOM, .parse = parse_memory, .def = "grow", .flags = CT_KEY_PER_PROCESS},
    {.name = "seed", .kind = CT_KEY_U64, .offset = T(seed), .def = "42"},
    {.name = "threads", .kind = CT_KEY_INT, .offset = T(threads), .def = "0",
     .flags = CT_KEY_PER_PROCESS | CT_KEY_HAS_MIN, .min = 0},
    {.name = "checkpoint_every", .kind = CT_KEY_LONG, .offset = T(checkpoint_every), .def = "0",
     .flags = CT_KEY_HAS_MIN, .min = 0},
    {.name = "keep", .kind = CT_KEY_INT, .offset = T(keep), .def = "3", .flags = CT_KEY_HAS_MIN, .min = 1},
};

static const ct_key_table train_table = CT_KEY_TABLE(train_keys);
static const ct_key_set train_set = {&train_table, 1, NULL, NULL, NULL, CT_MISPLACED_SETTING};

/* batch = N | max | auto. A misspelt word gets the nearest one; a number keeps its range check. */
static ct_status parse_batch(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_train_config *t = base;
    t->batch_line = !vc->entry ? 0 : vc->entry->line > 0 ? vc->entry->line : -1;   /* -1: --set */
    if (strcmp(text, "max") == 0 || strcmp(text, "auto") == 0) {
        t->batch_mode = text[0] == 'm' ? CT_BATCH_MAX : CT_BATCH_AUTO;
        t->batch = 0;
        return CT_OK;
    }
    long v = 0;
    if (!isdigit((unsigned char)text[0]) && text[0] != '-' && text[0] != '+') {
        ct_suggestion s = ct_suggest_start(text);
        ct_suggest_consider(&s, "max");
        ct_suggest_consider(&s, "auto");
        char hint[64];
        return ct_fail_value(vc, "bad batch '%s'%s; expected a number, max (the largest that fits memory) or auto "
                                 "(the fastest per image)", text, ct_did_you_mean(&s, hint, sizeof hint));
    }
    ct_status st = ct_key_read_integer(vc, ks, text, INT_MIN, INT_MAX, &v);
    if (st == CT_OK) {
        t->batch_mode = CT_BATCH_FIXED;
        t->batch = (int)v;
    }
    return st;
}

/* memory_margin = 10% (or 10): a percentage, 0 to 50, kept as a fraction. */
static ct_status parse_margin(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    float *dst = (float *)((char *)base + ks->offset);
    char num[64];
    size_t len = strlen(text);
    if (len > 0 && text[len - 1] == '%')
        len--;
    double v = 0;
    if (len == 0 || len >= sizeof num)
        return ct_fail_value(vc, "bad memory_margin '%s'; expected a percentage from 0%% to 50%% such as 10%%", text);
    memcpy(num, text, len);
    num[len] = '\0';
    if (!ct_strict_float(num, &v))
        return ct_fail_value(vc, "bad memory_margin '%s'; expected a percentage from 0%% to 50%% such as 10%%", text);
    if (v < 0 || v > 50)
        return ct_fail_value(vc, "[train] memory_margin must be between 0%% and 50%%, got %s (nearest valid: %s)", text,
                             v < 0 ? "0%" : "50%");
    *dst = (float)(v / 100.0);
    return CT_OK;
}

/* batch_candidates = 32, 64, 128: distinct positive batches, kept ascending. */
static ct_status parse_candidates(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_train_config *t = base;
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n > CT_MAX_BATCH_CANDIDATES)
        return ct_fail_value(vc, "batch_candidates lists %d batches; at most %d", list.n, CT_MAX_BATCH_CANDIDATES);
    int n = 0;
    for (int i = 0; i < list.n; i++) {
        long v;
        if (ct_strict_long(list.item[i], &v) != 0 || v < 1 || v > INT_MAX)
            return ct_fail_value(vc, "bad batch '%s' in batch_candidates = %s; expected a comma list of batches such "
                                     "as 32, 64, 128", list.item[i], text);
        int k = n;
        for (; k > 0 && t->batch_candidates[k - 1] >= v; k--)
            if (t->batch_candidates[k - 1] == v)
                return ct_fail_value(vc, "batch %ld is listed twice in batch_candidates = %s", v, text);
        memmove(t->batch_candidates + k + 1, t->batch_candidates + k, (size_t)(n - k) * sizeof *t->batch_candidates);
        t->batch_candidates[k] = (int)v;
        n++;
    }
    t->n_batch_candidates = n;
    return CT_OK;
}

/* devices = cpu | cpu:N | all | 0,1,... stored without spaces; cpu:N is stored as cpu with N
 * replicas, so that every test for the CPU reads the same word. */
static ct_status parse_devices(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    char *out = (char *)base + ks->offset;
    const size_t size = sizeof ((ct_train_config *)0)->devices;
    ct_train_config *t = base;
    t->devices_line = !vc->entry ? 0 : vc->entry->line > 0 ? vc->entry->line : -1;   /* -1: --set */
    t->replicas = 1;
    if (strcmp(text, "cpu") == 0 || strcmp(text, "all") == 0) {
        snprintf(out, size, "%s", text);
        return CT_OK;
    }
    if (strncmp(text, "cpu:", 4) == 0) {
        long n = 0;
        if (!isdigit((unsigned char)text[4]) || ct_strict_long(text + 4, &n) != 0 || n < 1 || n > CT_MAX_REPLICAS)
            return ct_fail_value(vc, "bad devices '%s': cpu:N needs N from 1 to %d CPU replicas (cpu:2 trains two "
                                     "replicas that share the cores)", text, CT_MAX_REPLICAS);
        snprintf(out, size, "cpu");
        t->replicas = (int)n;
        return CT_OK;
    }
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    char norm[sizeof ((ct_train_config *)0)->devices];
    size_t used = 0;
    long seen[CT_COUNT(list.item)];
    for (int i = 0; i < list.n; i++) {
        const char *item = list.item[i];
        long n;
        if (!isdigit((unsigned char)item[0]) || ct_strict_long(item, &n) != 0 || n > INT_MAX)
            return ct_fail_value(vc,
                                 "bad devices '%s': expected cpu, cpu:N, all or a comma list of device numbers "
                                 "such as 0,1",
                                 text);
        for (int j = 0; j < i; j++)
            if (seen[j] == n)
                return ct_fail_value(vc, "device %ld is listed twice in devices = %s", n, text);
        seen[i] = n;
        int w = snprintf(norm + used, sizeof norm - used, "%s%ld", i ? "," : "", n);
        if (w < 0 || (size_t)w >= sizeof norm - used)
            return ct_fail_value(vc, "devices list is too long: %s", text);
        used += (size_t)w;
    }
    memcpy(out, norm, used + 1);
    t->replicas = list.n;  /* one replica per listed GPU */
    return CT_OK;
}

/* devices as the user wrote it for messages: cpu:N for CPU replicas, else the stored value. */
static const char *devices_text(const ct_train_config *t, char *buf, size_t size)
{
    if (strcmp(t->devices, "cpu") == 0 && t->replicas > 1)
        snprintf(buf, size, "cpu:%d", t->replicas);
    else
        snprintf(buf, size, "%s", t->devices);
    return buf;
}

/* graph = on | off | auto (-1: decided by the backend). */
static ct_status parse_capture(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    int *dst = (int *)((char *)base + ks->offset);
    int b = strcmp(text, "auto") == 0 ? -1 : ct_bool_word(text);
    if (b == -1 && strcmp(text, "auto") != 0)
        return ct_fail_value(vc, "bad value '%s' for graph; expected on, off or auto", text);
    *dst = b;
    return CT_OK;
}

/* memory = grow | preallocate | limit:MiB */
static ct_status parse_memory(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    (void)ks;
    ct_train_config *t = base;
    long mib = 0;
    t->memory_line = !vc->entry ? 0 : vc->entry->line > 0 ? vc->entry->line : -1;   /* -1: --set */
    if (strcmp(text, "grow") == 0) {
        t->memory = CT_MEMORY_GROW;
    } else if (strcmp(text, "preallocate") == 0) {
        t->memory = CT_MEMORY_PREALLOCATE;
    } else if (strncmp(text, "limit:", 6) == 0 && ct_strict_long(text + 6, &mib) == 0 && mib >= 1) {
        t->memory = CT_MEMORY_LIMIT;
        t->memory_limit_mib = mib;
    } else {
        return ct_fail_value(vc, "bad value '%s' for memory; expected grow, preallocate or limit:MiB (e.g. limit:512)",
                             text);
    }
    return CT_OK;
}

/* loss_scale = dynamic (0) | a positive finite number, fixed for the run. */
static ct_status parse_loss_scale(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    float *dst = (float *)((char *)base + ks->offset);
    double v = 0;
    if (strcmp(text, "dynamic") == 0) {
        *dst = 0.0f;
        return CT_OK;
    }
    if (!ct_strict_float(text, &v) || !(v > 0)) {
        ct_suggestion s = ct_suggest_start(text);
        ct_suggest_consider(&s, "dynamic");
        char hint[64];
        return ct_fail_value(vc, "bad loss_scale '%s'%s; expected dynamic or a positive finite number such as 1024",
                             text, ct_did_you_mean(&s, hint, sizeof hint));
    }
    *dst = (float)v;
    return CT_OK;
}

ct_status ct_config_read_train(ct_value_ctx *vc)
{
    ct_train_config *t = &vc->cfg->train;
    t->line = vc->sec ? vc->sec->line : 0;
    ct_status st = ct_keys_read(vc, &train_set, t);
    if (st != CT_OK)
        return st;
    /* decoupled decay is the point of adamw, so it gets a useful default */
    if (t->optimizer == CT_OPT_ADAMW && !ct_section_entry(vc->sec, "weight_decay"))
        t->weight_decay = 0.01f;
    t->lr_factor = 1.0;
    /* batch is the global batch: every replica takes the same share, as MirroredStrategy's do.
     * The error names batch's line, or devices' when batch is the default. */
    const ct_ini_entry *batch_entry = ct_section_entry(vc->sec, "batch");
    if (!batch_entry)
        batch_entry = ct_section_entry(vc->sec, "devices");
    char devices[80];
    devices_text(t, devices, sizeof devices);
    if (t->replicas > 1 && t->batch_mode != CT_BATCH_FIXED)
        return ct_fail_entry(vc, batch_entry,
                             "batch = %s with devices = %s: the batch search runs one device; give the global "
                             "batch as a number (a multiple of %d)", t->batch_mode == CT_BATCH_MAX ? "max" : "auto",
                             devices, t->replicas);
    if (t->replicas > 1 && t->batch % t->replicas != 0) {
        int lower = t->batch / t->replicas * t->replicas, upper = lower + t->replicas;
        char lower_text[32] = "";
        if (lower > 0)
            snprintf(lower_text, sizeof lower_text, "%d or ", lower);
        return ct_fail_entry(vc, batch_entry,
                             "batch = %d does not split evenly over the %d replicas of devices = %s: batch is "
                             "the global batch, each replica takes batch / %d; use %s%d", t->batch, t->replicas,
                             devices, t->replicas, lower_text, upper);
    }
    if (t->comm == CT_COMM_NCCL && strcmp(t->devices, "cpu") == 0)
        return ct_fail_entry(vc, ct_section_entry(vc->sec, "comm"),
                             "comm = nccl with devices = %s: NCCL reduces over GPUs only; use comm = auto for CPU "
                             "replicas", devices);
    if (t->lr_scaling != CT_LR_SCALING_NONE && t->base_batch == 0) {
        char example[32] = "64";
        if (t->batch_mode == CT_BATCH_FIXED)
            snprintf(example, sizeof example, "%d", t->batch);
        return ct_fail_entry(vc, ct_section_entry(vc->sec, "lr_scaling"),
                             "lr_scaling = %s needs base_batch, the batch learning_rate was tuned for (e.g. "
                             "base_batch = %s)", lr_scaling_names[t->lr_scaling], example);
    }
    return CT_OK;
}
