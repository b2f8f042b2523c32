/* The ini reader and the typed config: a full config read into the expected values, defaults,
 * --set overrides, and a long list of bad configs, each checked for its status, the exact line
 * it blames and the words of its message. */
#include "config/config.h"
#include "tests/test_util.h"

/* Everything that can be given, with CRLF line ends, a byte order mark and inline comments. */
static const char full_text[] =
    "\xEF\xBB\xBF"
    "# a full config\r\n"                              /* 1 */
    "[data]\r\n"                                       /* 2 */
    "format = idx   # the default\r\n"                 /* 3 */
    "train = train-images.gz\r\n"                      /* 4 */
    "train_labels = /abs/train-labels.gz ; absolute\r\n"
    "test = t10k-images.gz\r\n"                        /* 6 */
    "test_labels = sub/t10k-labels.gz\r\n"             /* 7 */
    "normalize = 0.5, 0.25\r\n"                        /* 8 */
    "augment = crop:4, flip\r\n"                       /* 9 */
    "train_limit = 500\r\n"                            /* 10 */
    "test_limit = 100\r\n"                             /* 11 */
    "\r\n"                                             /* 12 */
    "[train]\r\n"                                      /* 13 */
    "  ; indented comment\r\n"                         /* 14 */
    "epochs = 3\r\n"                                   /* 15 */
    "batch = 32\r\n"
    "optimizer = adamw\r\n"
    "learning_rate = 0.01\r\n"
    "momentum = 0.8\r\n"
    "nesterov = yes\r\n"                               /* 20 */
    "beta1 = 0.85\r\n"
    "beta2 = 0.99\r\n"
    "epsilon = 1e-7\r\n"
    "schedule = cosine\r\n"
    "step_size = 2.5\r\n"                              /* 25 */
    "gamma = 0.5\r\n"
    "warmup = 1\r\n"
    "min_lr = 1e-5\r\n"
    "precision = fp16\r\n"
    "devices = 0 , 1, 3 ,4\r\n"                      /* 30 */
    "graph = off\r\n"
    "seed = 18446744073709551615\r\n"
    "threads = 2\r\n"
    "[conv1]\r\n"                                      /* 34 */
    "type = conv2d\r\n"
    "filters = 16\r\n"
    "size = 3\r\n"
    "stride = 2\r\n"
    "padding = same\r\n"
    "activation = relu\r\n"                            /* 40 */
    "bias = off\r\n"
    "init = he\r\n"
    "[bn1]\r\n"                                        /* 43 */
    "type = batchnorm\r\n"
    "momentum = 0.2\r\n"
    "epsilon = 1e-3\r\n"
    "[act1]\r\n"                                       /* 47 */
    "type = activation\r\n"
    "activation = gelu\r\n"
    "[conv2]\r\n"                                      /* 50 */
    "type = conv2d\r\n"
    "input = act1\r\n"                                 /* 52 */
    "filters = 16\r\n"
    "size = 3\r\n"
    "padding = same\r\n"
    "[sum]\r\n"                                        /* 56 */
    "type = add\r\n"
    "inputs = act1 , conv2   # residual\r\n"           /* 58 */
    "activation = leaky\r\n"
    "[pool1]\r\n"                                      /* 60 */
    "type = maxpool\r\n"
    "size = 3\r\n"
    "stride = 2\r\n"
    "padding = valid\r\n"
    "[gap]\r\n"                                        /* 65 */
    "type = avgpool\r\n"
    "global = on\r\n"
    "[drop]\r\n"
    "type = dropout\r\n"
    "rate = 0.25\r\n"                                  /* 70 */
    "[flat]\r\n"
    "type = flatten\r\n"
    "[fc]\r\n"                                         /* 73 */
    "type = dense\r\n"
    "units = 10\r\n"
    "activation = linear\r\n"
    "bias = on\r\n"
    "init = glorot";                                   /* 78, no final line end */

static void test_full(void)
{
    ct_ini ini;
    ct_config cfg;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_ini_parse(&ini, full_text, "models/net.ini", &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    ct_ini_free(&ini);
    if (st != CT_OK)
        return;

    CHECK(strcmp(cfg.file, "models/net.ini") == 0);
    CHECK(strcmp(cfg.dir, "models") == 0);

    const ct_data_settings *d = &cfg.data;
    CHECK(d->line == 2);
    CHECK(d->format == CT_DATA_IDX);
    CHECK(d->train && strcmp(d->train, "models/train-images.gz") == 0);
    CHECK(d->train_labels && strcmp(d->train_labels, "/abs/train-labels.gz") == 0);
    CHECK(d->test && strcmp(d->test, "models/t10k-images.gz") == 0);
    CHECK(d->test_labels && strcmp(d->test_labels, "models/sub/t10k-labels.gz") == 0);
    CHECK(d->n_normalize == 1);
    CHECK_NEAR(d->mean[0], 0.5, 0);
    CHECK_NEAR(d->std[0], 0.25, 0);
    CHECK(d->crop_pad == 4 && d->flip == 1);
    CHECK(d->train_limit == 500 && d->test_limit == 100);

    const ct_train_config *t = &cfg.train;
    CHECK(t->line == 13);
    CHECK(t->epochs == 3 && t->batch == 32);
    CHECK(t->optimizer == CT_OPT_ADAMW);
    CHECK_NEAR(t->learning_rate, 0.01, 1e-9);
    CHECK_NEAR(t->momentum, 0.8, 1e-7);
    CHECK(t->nesterov == 1);
    CHECK_NEAR(t->beta1, 0.85, 1e-7);
    CHECK_NEAR(t->beta2, 0.99, 1e-7);
    CHECK_NEAR(t->epsilon, 1e-7, 1e-12);
    CHECK_NEAR(t->weight_decay, 0.01, 1e-9);  /* adamw's default when not given */
    CHECK(t->schedule == CT_SCHED_COSINE);
    CHECK_NEAR(t->step_size, 2.5, 0);
    CHECK_NEAR(t->gamma, 0.5, 0);
    CHECK_NEAR(t->warmup, 1, 0);
    CHECK_NEAR(t->min_lr, 1e-5, 1e-10);
    CHECK(t->precision == CT_PREC_FP16);
    CHECK_MSG(strcmp(t->devices, "0,1,3,4") == 0, "devices '%s'", t->devices);
    CHECK(t->capture == 0);
    CHECK(t->seed == UINT64_MAX);
    CHECK(t->threads == 2);

    CHECK(cfg.n_layers == 10);
    if (cfg.n_layers != 10) {
        ct_config_free(&cfg);
        return;
    }
    const ct_layer_config *L = cfg.layers;
    CHECK(strcmp(L[0].name, "conv1") == 0 && L[0].type == CT_LAYER_CONV2D && L[0].line == 34);
    CHECK(L[0].filters == 16 && L[0].size == 3 && L[0].stride == 2 && L[0].padding == CT_PAD_SAME);
    CHECK(L[0].activation == CT_ACT_RELU && L[0].bias == 0 && L[0].init == CT_INIT_HE);
    CHECK(L[0].n_inputs == 0);
    CHECK(L[1].type == CT_LAYER_BATCHNORM);
    CHECK_NEAR(L[1].momentum, 0.2, 1e-7);
    CHECK_NEAR(L[1].epsilon, 1e-3, 1e-9);
    CHECK(L[2].type == CT_LAYER_ACTIVATION && L[2].activation == CT_ACT_GELU);
    CHECK(L[3].n_inputs == 1 && strcmp(L[3].inputs[0], "act1") == 0 && L[3].inputs_line == 52);
    CHECK(L[3].stride == 1 && L[3].bias == 1 && L[3].init == CT_INIT_AUTO && L[3].activation == CT_ACT_LINEAR);
    CHECK(L[4].type == CT_LAYER_ADD && L[4].n_inputs == 2 && L[4].inputs_line == 58);
    CHECK(strcmp(L[4].inputs[0], "act1") == 0 && strcmp(L[4].inputs[1], "conv2") == 0);
    CHECK(L[4].activation == CT_ACT_LEAKY);
    CHECK(L[5].type == CT_LAYER_MAXPOOL && L[5].size == 3 && L[5].stride == 2 && L[5].padding == CT_PAD_VALID);
    CHECK(L[5].global == 0);
    CHECK(L[6].type == CT_LAYER_AVGPOOL && L[6].global == 1 && L[6].size == 2 && L[6].stride == 0);
    CHECK(L[7].type == CT_LAYER_DROPOUT);
    CHECK_NEAR(L[7].rate, 0.25, 0);
    CHECK(L[8].type == CT_LAYER_FLATTEN && strcmp(L[8].name, "flat") == 0);
    CHECK(L[9].type == CT_LAYER_DENSE && L[9].units == 10 && L[9].init == CT_INIT_GLOROT && L[9].line == 73);
    ct_config_free(&cfg);
    CHECK(cfg.layers == NULL && cfg.file == NULL);
}

/* Synthetic data, the keys the full config cannot use, and the defaults of everything else. */
static void test_synthetic_and_defaults(void)
{
    const char *text =
        "[data]\n"
        "format = synthetic\n"
        "shape = 8, 6, 3\n"
        "classes = 4\n"
        "count = 64\n"
        "test_count = 0\n"
        "normalize = 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8\n"
        "augment = none\n"
        "workers = 4\n"
        "prefetch = 64\n"
        "augment_on = gpu\n"
        "pipeline = sync\n"
        "drop_last = on\n"
        "[train]\n"
        "optimizer = sgd\n"
        "weight_decay = 0.0005\n"
        "devices = cpu\n"
        "graph = auto\n"
        "deterministic = on\n"
        "tf32 = off\n"
        "[fc]\n"
        "type = dense\n"
        "units = 4\n";
    ct_ini ini;
    ct_config cfg;
    ct_err err;
    ct_err_clear(&err);
    CHECK(ct_ini_parse(&ini, text, "net.ini", &err) == CT_OK);
    ct_status st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    ct_ini_free(&ini);
    if (st != CT_OK)
        return;
    CHECK(strcmp(cfg.dir, ".") == 0);
    CHECK(cfg.data.format == CT_DATA_SYNTHETIC);
    CHECK(cfg.data.shape.h == 8 && cfg.data.shape.w == 6 && cfg.data.shape.c == 3);
    CHECK(cfg.data.classes == 4 && cfg.data.count == 64 && cfg.data.test_count == 0);
    CHECK(cfg.data.n_normalize == 4);
    CHECK_NEAR(cfg.data.mean[3], 0.4, 1e-7);
    CHECK_NEAR(cfg.data.std[0], 0.5, 1e-7);
    CHECK(cfg.data.crop_pad == 0 && cfg.data.flip == 0);
    CHECK(cfg.data.workers == 4 && cfg.data.prefetch == 64 && cfg.data.augment_on == CT_AUGMENT_ON_GPU);
    CHECK(cfg.data.pipeline == CT_PIPELINE_SYNC && cfg.data.drop_last == 1);
    CHECK(cfg.data.train == NULL && cfg.data.test == NULL);
    CHECK(cfg.train.optimizer == CT_OPT_SGD);
    CHECK_NEAR(cfg.train.weight_decay, 0.0005, 1e-9);
    CHECK(strcmp(cfg.train.devices, "cpu") == 0);
    CHECK(cfg.train.capture == -1);
    CHECK(cfg.train.deterministic == 1);
    CHECK(cfg.train.tf32 == 0);
    ct_config_free(&cfg);

    /* only the required keys: everything else is a default */
    const char *minimal = "[data]\nformat = synthetic\n[fc]\ntype = dense\nunits = 10\n";
    CHECK(ct_ini_parse(&ini, minimal, "net.ini", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    ct_ini_free(&ini);
    if (st != CT_OK)
        return;
    const ct_train_config *t = &cfg.train;
    CHECK(t->line == 0);
    CHECK(t->epochs == 10 && t->batch == 64 && t->optimizer == CT_OPT_ADAM);
    CHECK_NEAR(t->learning_rate, 0.001, 1e-9);
    CHECK_NEAR(t->momentum, 0.9, 1e-7);
    CHECK(t->nesterov == 0);
    CHECK_NEAR(t->beta1, 0.9, 1e-7);
    CHECK_NEAR(t->beta2, 0.999, 1e-7);
    CHECK_NEAR(t->epsilon, 1e-8, 1e-13);
    CHECK(t->weight_decay == 0);
    CHECK(t->schedule == CT_SCHED_CONSTANT);
    CHECK_NEAR(t->step_size, 10, 0);
    CHECK_NEAR(t->gamma, 0.1, 1e-7);
    CHECK(t->warmup == 0 && t->min_lr == 0);
    CHECK(t->precision == CT_PREC_FP32);
    CHECK(t->loss_scale == 0 && t->loss_scale_init == 32768 && t->loss_scale_growth_steps == 2000);
    CHECK(cfg.layers[0].dtype == CT_LAYER_DTYPE_AUTO);
    CHECK(strcmp(t->devices, "all") == 0);
    CHECK(t->capture == -1 && t->seed == 42 && t->threads == 0);
    CHECK(t->deterministic == 0);
    CHECK(t->tf32 == 1);  /* PyTorch's cuDNN default */
    CHECK(t->winograd == 1);
    /* the batch: a number; max and auto keep 10% free, go up to the training set, measure 30 s; auto
     * leaves at least 200 steps an epoch */
    CHECK(t->batch_mode == CT_BATCH_FIXED && t->batch_line == 0);
    CHECK_NEAR(t->memory_margin, 0.10, 1e-7);
    CHECK(t->batch_max == 0 && t->n_batch_candidates == 0 && t->min_steps_per_epoch == 200);
    CHECK_NEAR(t->batch_search_seconds, 30, 0);
    CHECK(t->lr_scaling == CT_LR_SCALING_NONE && t->base_batch == 0 && t->lr_factor == 1.0);
    const ct_data_settings *d = &cfg.data;
    CHECK(d->line == 1);
    CHECK(d->shape.h == 28 && d->shape.w == 28 && d->shape.c == 1);
    CHECK(d->classes == 10 && d->count == 1000 && d->test_count == 200);
    CHECK(d->n_normalize == 0 && d->crop_pad == 0 && d->flip == 0);
    CHECK(d->train_limit == 0 && d->test_limit == 0);
    /* the input pipeline: auto workers and depth, augmentation on the CPU, parallel, keep the last batch */
    CHECK(d->workers == 0 && d->prefetch == 0 && d->augment_on == CT_AUGMENT_ON_CPU);
    CHECK(d->pipeline == CT_PIPELINE_PARALLEL && d->drop_last == 0);
    CHECK(cfg.n_layers == 1 && cfg.layers[0].activation == CT_ACT_LINEAR && cfg.layers[0].bias == 1);
    CHECK(cfg.layers[0].init == CT_INIT_AUTO && cfg.layers[0].n_inputs == 0 && cfg.layers[0].line == 3);
    ct_config_free(&cfg);

    /* cifar10 file lists: each item resolved against the folder */
    const char *cifar = "[data]\nformat = cifar10\ntrain = b1.bin, /x/b2.bin\ntest = test.bin\n"
                        "[fc]\ntype = dense\nunits = 10\n";
    CHECK(ct_ini_parse(&ini, cifar, "/cfg/c.ini", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    ct_ini_free(&ini);
    if (st != CT_OK)
        return;
    CHECK_MSG(strcmp(cfg.data.train, "/cfg/b1.bin,/x/b2.bin") == 0, "%s", cfg.data.train);
    CHECK(strcmp(cfg.data.test, "/cfg/test.bin") == 0 && cfg.data.test_labels == NULL);
    ct_config_free(&cfg);

    /* the format picks the rows whatever the order of the entries: a list before `format` too */
    const char *listed_first = "[data]\ntrain = b1.bin, b2.bin\nformat = cifar10\n[fc]\ntype = dense\nunits = 10\n";
    CHECK(ct_ini_parse(&ini, listed_first, "/cfg/c.ini", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    ct_ini_free(&ini);
    if (st != CT_OK)
        return;
    CHECK_MSG(strcmp(cfg.data.train, "/cfg/b1.bin,/cfg/b2.bin") == 0, "%s", cfg.data.train);
    ct_config_free(&cfg);
}

static const char set_text[] =
    "[data]\n"
    "format = synthetic\n"
    "[train]\n"
    "batch = 16\n"
    "[conv1]\n"
    "type = conv2d\n"
    "filters = 4\n"
    "size = 3\n";

static void test_set(void)
{
    ct_ini ini;
    ct_config cfg;
    ct_err err;
    ct_err_clear(&err);

    /* a good override replaces the value; new keys and the created [train] work too */
    CHECK(ct_ini_parse(&ini, set_text, "net.ini", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.batch", "128", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.epochs", " 2 ", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "conv1.filters", "8", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "data.workers", "8", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "data.pipeline", "sync", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.deterministic", "on", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.tf32", "off", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.winograd", "off", &err) == CT_OK);
    ct_status st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st == CT_OK) {
        CHECK(cfg.train.batch == 128 && cfg.train.epochs == 2 && cfg.layers[0].filters == 8);
        CHECK(cfg.data.workers == 8 && cfg.data.pipeline == CT_PIPELINE_SYNC);
        CHECK(cfg.train.deterministic == 1 && cfg.train.tf32 == 0 && cfg.train.winograd == 0);
        ct_config_free(&cfg);
    }
    CHECK(ct_ini_set(&ini, "train.deterministic", "off", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.tf32", "on", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st == CT_OK) {
        CHECK(cfg.train.deterministic == 0 && cfg.train.tf32 == 1);
        ct_config_free(&cfg);
    }
    CHECK(ct_ini_set(&ini, "train.deterministic", "always", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK(st == CT_ERR_CONFIG && err.line == 0);
    CHECK_MSG(ct_contains(err.msg, "--set train.deterministic: bad boolean 'always' for deterministic"), "%s",
              err.msg);
    CHECK(ct_ini_set(&ini, "train.deterministic", "off", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "data.workers", "auto", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "data.prefetch", "0", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK(st == CT_ERR_CONFIG && err.line == 0);
    CHECK_MSG(ct_contains(err.msg, "--set data.prefetch: bad value '0' for prefetch; expected auto or a number "
                                   "from 1 to 64"),
              "%s", err.msg);
    CHECK(ct_ini_set(&ini, "data.prefetch", "auto", &err) == CT_OK);

    /* a bad override is blamed on --set, not on a line of the file */
    CHECK(ct_ini_set(&ini, "train.batch", "0", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK(st == CT_ERR_CONFIG);
    CHECK(err.line == 0);
    CHECK_MSG(strncmp(err.msg, "--set train.batch: ", 19) == 0, "%s", err.msg);
    CHECK_MSG(ct_contains(err.msg, "batch must be at least 1, got 0"), "%s", err.msg);
    CHECK(cfg.layers == NULL && cfg.file == NULL);  /* freed and freeable after a failure */
    ct_config_free(&cfg);

    CHECK(ct_ini_set(&ini, "conv1.fliters", "8", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.batch", "16", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK(st == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(err.msg, "--set conv1.fliters: unknown key 'fliters' in [conv1] (did you mean 'filters'?)"),
              "%s", err.msg);

    st = ct_ini_set(&ini, "conv9.filters", "8", &err);
    CHECK(st == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(err.msg, "--set conv9.filters: no section [conv9] in net.ini"), "%s", err.msg);
    CHECK(ct_ini_set(&ini, "nodot", "8", &err) == CT_ERR_CONFIG);
    CHECK(ct_ini_set(&ini, "train.epochs", "", &err) == CT_ERR_CONFIG);
    ct_ini_free(&ini);

    /* [data] and [train] are created when absent */
    CHECK(ct_ini_parse(&ini, "[fc]\ntype = dense\nunits = 2\n", "net.ini", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "data.format", "synthetic", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.seed", "7", &err) == CT_OK);
    st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st == CT_OK) {
        CHECK(cfg.data.format == CT_DATA_SYNTHETIC && cfg.train.seed == 7 && cfg.data.line == 0);
        ct_config_free(&cfg);
    }
    ct_ini_free(&ini);
}

typedef struct bad_case {
    const char *name;
    const char *text;
    int line;              /* expected err.line */
    const char *phrase;    /* expected in the message */
} bad_case;

/* Most cases need a valid [data] and a layer around the thing they break. */
#define SYN "[data]\nformat = synthetic\n"          /* lines 1-2 */
#define FC "[fc]\ntype = dense\nunits = 10\n"       /* 3 lines */

static const bad_case bad_cases[] = {
    /* ini syntax */
    {"key before section", "epochs = 3\n" SYN FC, 1, "'epochs' comes before any [section]"},
    {"line without =", SYN "[train]\nepochs 3\n" FC, 4, "expected 'key = value'"},
    {"empty value", SYN "[train]\nepochs =\n" FC, 4, "empty value for 'epochs'"},
    {"value only a comment", SYN "[train]\nepochs = # three\n" FC, 4, "empty value for 'epochs'"},
    {"empty key", SYN "[train]\n= 3\n" FC, 4, "missing key before '='"},
    {"junk after ]", "[data] x\nformat = synthetic\n" FC, 1, "unexpected 'x' after ']'"},
    {"missing ]", SYN "[fc\ntype = dense\n", 3, "missing ']'"},
    {"bad section name", SYN "[f c]\ntype = dense\n", 3, "bad section name [f c]"},
    {"duplicate section", SYN FC "[fc]\ntype = dense\n", 6, "duplicate section [fc] (first at line 3)"},
    {"duplicate key", SYN "[fc]\ntype = dense\nunits = 3\nunits = 4\n", 6,
     "duplicate key 'units' in [fc] (first at line 5)"},
    {"CRLF lines count", "[data]\r\nformat = synthetic\r\n\r\n[fc]\r\ntype = dense\r\nunits = x\r\n", 6,
     "bad integer 'x' for units"},
    /* sections and keys */
    {"missing [data]", FC, 0, "no [data] section"},
    {"no layers", SYN "[train]\nepochs = 1\n", 0, "no layers"},
    {"unknown section key", SYN "[conv1]\ntype = conv2d\nfliters = 8\nsize = 3\n", 5,
     "unknown key 'fliters' in [conv1] (did you mean 'filters'?)"},
    {"unknown train key", SYN "[train]\nepoch = 3\n" FC, 4, "unknown key 'epoch' in [train] (did you mean 'epochs'?)"},
    {"key of another layer type", SYN "[conv1]\ntype = conv2d\nfilters = 8\nsize = 3\nunits = 4\n", 7,
     "unknown key 'units' in [conv1] (units applies only to dense layers)"},
    {"missing type", SYN "[fc]\nunits = 3\n", 3, "[fc] needs 'type'"},
    {"misspelt [data]", "[dta]\nformat = synthetic\n" FC, 1, "[dta] needs 'type' (or did you mean [data]?)"},
    {"unknown layer type", SYN "[c1]\ntype = conv\n", 4,
     "unknown layer type 'conv' (did you mean 'conv2d'?); expected one of: dense, conv2d,"},
    {"missing units", SYN "[fc]\ntype = dense\n", 3, "[fc] needs 'units'"},
    {"missing conv size", SYN "[c1]\ntype = conv2d\nfilters = 3\n", 3, "[c1] needs 'size'"},
    {"reserved layer name", SYN "[input]\ntype = flatten\n", 3, "[input] is a reserved name"},
    {"layer name too long", SYN "[a123456789b123456789c123456789d123456789e123456789f123456789g1234]\ntype = flatten\n",
     3, "is too long (at most 63 characters)"},
    {"flatten takes no keys", SYN "[f]\ntype = flatten\nsize = 2\n", 5, "unknown key 'size' in [f]"},
    /* numbers */
    {"bad integer", SYN "[fc]\ntype = dense\nunits = abc\n", 5, "bad integer 'abc' for units"},
    {"integer with junk", SYN "[fc]\ntype = dense\nunits = 10x\n", 5, "bad integer '10x' for units"},
    {"integer out of range", SYN "[train]\nepochs = 99999999999999999999\n" FC, 4, "out of range"},
    {"units 0", SYN "[fc]\ntype = dense\nunits = 0\n", 5, "[fc] units must be at least 1, got 0"},
    {"negative batch", SYN "[train]\nbatch = -5\n" FC, 4, "[train] batch must be at least 1, got -5"},
    {"batch 0", SYN "[train]\nbatch = 0\n" FC, 4, "[train] batch must be at least 1, got 0"},
    {"misspelt batch max", SYN "[train]\nbatch = mx\n" FC, 4, "bad batch 'mx' (did you mean 'max'?); expected a number"},
    {"misspelt batch auto", SYN "[train]\nbatch = atuo\n" FC, 4, "bad batch 'atuo' (did you mean 'auto'?)"},
    {"batch with junk", SYN "[train]\nbatch = 12x\n" FC, 4, "bad integer '12x' for batch"},
    {"memory_margin over 50%", SYN "[train]\nmemory_margin = 60%\n" FC, 4,
     "[train] memory_margin must be between 0% and 50%, got 60% (nearest valid: 50%)"},
    {"memory_margin negative", SYN "[train]\nmemory_margin = -5\n" FC, 4,
     "memory_margin must be between 0% and 50%, got -5 (nearest valid: 0%)"},
    {"memory_margin not a number", SYN "[train]\nmemory_margin = ten%\n" FC, 4,
     "bad memory_margin 'ten%'; expected a percentage from 0% to 50%"},
    {"memory_margin only %", SYN "[train]\nmemory_margin = %\n" FC, 4, "bad memory_margin '%'"},
    {"batch_max 0", SYN "[train]\nbatch_max = 0\n" FC, 4, "[train] batch_max must be at least 1, got 0"},
    {"batch_search_seconds 0", SYN "[train]\nbatch_search_seconds = 0\n" FC, 4,
     "batch_search_seconds must be greater than 0, got 0"},
    {"batch_candidates junk", SYN "[train]\nbatch_candidates = 32, x, 128\n" FC, 4,
     "bad batch 'x' in batch_candidates = 32, x, 128"},
    {"batch_candidates 0", SYN "[train]\nbatch_candidates = 0, 64\n" FC, 4, "bad batch '0' in batch_candidates"},
    {"batch_candidates empty item", SYN "[train]\nbatch_candidates = 32,,64\n" FC, 4, "bad batch '' in batch_candidates"},
    {"batch_candidates twice", SYN "[train]\nbatch_candidates = 64, 32, 64\n" FC, 4,
     "batch 64 is listed twice in batch_candidates"},
    {"misspelt lr_scaling", SYN "[train]\nlr_scaling = lienar\nbase_batch = 64\n" FC, 4,
     "unknown lr_scaling 'lienar' (did you mean 'linear'?)"},
    {"lr_scaling without base_batch", SYN "[train]\nbatch = 256\nlr_scaling = linear\n" FC, 5,
     "lr_scaling = linear needs base_batch, the batch learning_rate was tuned for (e.g. base_batch = 256)"},
    {"sqrt without base_batch", SYN "[train]\nlr_scaling = sqrt\nbatch = max\n" FC, 4,
     "lr_scaling = sqrt needs base_batch"},
    {"base_batch 0", SYN "[train]\nbase_batch = 0\n" FC, 4, "[train] base_batch must be at least 1, got 0"},
    {"min_steps_per_epoch 0", SYN "[train]\nmin_steps_per_epoch = 0\n" FC, 4,
     "[train] min_steps_per_epoch must be at least 1, got 0"},
    {"bad float", SYN "[train]\nlearning_rate = 0.0.1\n" FC, 4, "bad number '0.0.1' for learning_rate"},
    {"nan float", SYN "[train]\nlearning_rate = nan\n" FC, 4, "bad number 'nan' for learning_rate"},
    {"zero learning rate", SYN "[train]\nlearning_rate = 0\n" FC, 4, "learning_rate must be greater than 0, got 0"},
    {"momentum 1", SYN "[train]\nmomentum = 1\n" FC, 4, "momentum must be in [0, 1), got 1"},
    {"gamma 0", SYN "[train]\ngamma = 0\n" FC, 4, "gamma must be in (0, 1], got 0"},
    {"negative seed", SYN "[train]\nseed = -1\n" FC, 4, "bad integer '-1' for seed"},
    {"dropout rate 1.0", SYN "[drop]\ntype = dropout\nrate = 1.0\n", 5, "[drop] rate must be in [0, 1), got 1.0"},
    {"dropout without rate", SYN "[drop]\ntype = dropout\n", 3, "[drop] needs 'rate'"},
    {"bad bool", SYN "[fc]\ntype = dense\nunits = 3\nbias = maybe\n", 6, "bad boolean 'maybe' for bias"},
    {"bad graph", SYN "[train]\ngraph = sometimes\n" FC, 4, "bad value 'sometimes' for graph; expected on, off or auto"},
    {"bad deterministic", SYN "[train]\nepochs = 2\ndeterministic = mostly\n" FC, 5,
     "bad boolean 'mostly' for deterministic; expected on, off,"},
    {"bad tf32", SYN "[train]\nepochs = 2\ntf32 = maybe\n" FC, 5, "bad boolean 'maybe' for tf32; expected on, off,"},
    {"deterministic in a layer", SYN "[c]\ntype = conv2d\nfilters = 2\nsize = 3\ndeterministic = on\n", 7,
     "unknown key 'deterministic' in [c]"},
    {"classes 1", "[data]\nformat = synthetic\nclasses = 1\n" FC, 3, "classes must be between 2 and 256, got 1"},
    /* enums */
    {"unknown optimizer", SYN "[train]\noptimizer = adan\n" FC, 4, "unknown optimizer 'adan' (did you mean 'adam'?)"},
    {"unknown activation typo", SYN "[fc]\ntype = dense\nunits = 3\nactivation = rleu\n", 6,
     "unknown activation 'rleu' (did you mean 'relu'?); expected one of: linear, relu, leaky, sigmoid, tanh, gelu"},
    {"activation layer without activation", SYN "[a]\ntype = activation\n", 3, "[a] needs 'activation'"},
    {"unknown format", "[data]\nformat = cifar\n" FC, 2, "unknown format 'cifar' (did you mean 'cifar10'?)"},
    {"unknown padding", SYN "[c]\ntype = conv2d\nfilters = 2\nsize = 3\npadding = full\n", 7,
     "unknown padding 'full'; expected one of: valid, same"},
    /* references */
    {"add with 1 input", SYN FC "[sum]\ntype = add\ninputs = fc\n", 8, "add needs exactly 2 inputs, got 1"},
    {"add without inputs", SYN FC "[sum]\ntype = add\n", 6, "[sum] needs 'inputs'"},
    {"input on add", SYN FC "[sum]\ntype = add\ninput = fc\n", 8,
     "unknown key 'input' in [sum] (did you mean 'inputs'?)"},
    {"pool key in add", SYN FC "[sum]\ntype = add\ninputs = fc, fc\nglobal = on\n", 9,
     "unknown key 'global' in [sum] (global applies only to maxpool or avgpool layers)"},
    {"two inputs on dense", SYN FC "[b]\ntype = dense\nunits = 2\ninput = fc, fc\n", 9, "input takes one layer name"},
    {"two inputs on a pool", SYN FC "[p]\ntype = maxpool\ninput = fc, fc\n", 8,
     "input takes one layer name, got 2 (only add or concat layers take several, as inputs = a, b)"},
    {"concat with 1 input", SYN FC "[cat]\ntype = concat\ninputs = fc\n", 8, "concat needs at least 2 inputs, got 1"},
    {"concat with 9 inputs", SYN FC "[cat]\ntype = concat\ninputs = fc, fc, fc, fc, fc, fc, fc, fc, fc\n", 8,
     "concat takes at most 8 inputs, got 9"},
    {"concat without inputs", SYN FC "[cat]\ntype = concat\n", 6, "[cat] needs 'inputs'"},
    {"input on concat", SYN FC "[cat]\ntype = concat\ninput = fc\n", 8,
     "unknown key 'input' in [cat] (did you mean 'inputs'?)"},
    {"activation on concat", SYN FC "[cat]\ntype = concat\ninputs = fc, fc\nactivation = relu\n", 9,
     "unknown key 'activation' in [cat] (activation applies only to dense, conv2d, batchnorm, activation or add layers)"},
    {"unknown concat input", SYN FC "[cat]\ntype = concat\ninputs = fc, fx\n", 8,
     "unknown layer 'fx' in inputs (did you mean 'fc'?)"},
    {"input to a later layer", SYN "[a]\ntype = dense\nunits = 2\ninput = b\n[b]\ntype = dense\nunits = 2\n", 6,
     "layer 'b' comes after [a]; inputs must refer to earlier layers"},
    {"input to itself", SYN "[a]\ntype = dense\nunits = 2\ninput = a\n", 6, "layer 'a' cannot be its own input"},
    {"unknown input", SYN "[conv1]\ntype = conv2d\nfilters = 2\nsize = 3\n[sum]\ntype = add\ninputs = cnv1, conv1\n",
     9, "unknown layer 'cnv1' in inputs (did you mean 'conv1'?)"},
    {"empty input name", SYN FC "[sum]\ntype = add\ninputs = fc,\n", 8, "empty layer name in inputs"},
    {"global pool with size", SYN "[gap]\ntype = avgpool\nsize = 2\nglobal = on\n", 5,
     "[gap] size does not apply when global = on"},
    /* [data] */
    {"idx without train_labels", "[data]\ntrain = a.gz\n" FC, 1, "[data] needs 'train_labels'"},
    {"idx test without labels", "[data]\ntrain = a\ntrain_labels = b\ntest = c\n" FC, 4,
     "has test but no test_labels"},
    {"shape on idx", "[data]\ntrain = a\ntrain_labels = b\nshape = 28, 28, 1\n" FC, 4,
     "shape applies only to format = synthetic"},
    {"train on synthetic", SYN "train = a\n" FC, 3, "train applies only to format = idx, cifar10 or imagefolder"},
    {"cifar10 with train_labels", "[data]\nformat = cifar10\ntrain = x\ntrain_labels = y\n" FC, 4,
     "cifar10 files hold their labels"},
    {"bad augment item", SYN "augment = crop:4, flp\n" FC, 3, "unknown augment 'flp' (did you mean 'flip'?)"},
    {"crop:0", SYN "augment = crop:0\n" FC, 3, "crop padding must be between 1 and 16, got 0"},
    {"crop without size", SYN "augment = crop\n" FC, 3, "crop needs a padding"},
    {"normalize odd count", SYN "normalize = 0.5, 0.2, 0.1\n" FC, 3, "even count"},
    {"normalize zero std", SYN "normalize = 0.5, 0\n" FC, 3, "standard deviations must be greater than 0, got 0"},
    {"normalize too many", SYN "normalize = 1,1,1,1,1,1,1,1,1,1\n" FC, 3, "at most 4 channels"},
    {"shape channels", SYN "shape = 8, 8, 5\n" FC, 3, "shape channels must be between 1 and 4, got 5"},
    {"shape count", SYN "shape = 8, 8\n" FC, 3, "shape needs 3 numbers"},
    /* the input pipeline */
    {"workers 0", SYN "workers = 0\n" FC, 3, "bad value '0' for workers; expected auto or a number from 1 to 256"},
    {"workers 257", SYN "workers = 257\n" FC, 3,
     "bad value '257' for workers; expected auto or a number from 1 to 256"},
    {"workers word", SYN "workers = many\n" FC, 3, "bad value 'many' for workers"},
    {"workers negative", SYN "workers = -2\n" FC, 3, "bad value '-2' for workers"},
    {"prefetch 65", SYN "prefetch = 65\n" FC, 3, "bad value '65' for prefetch; expected auto or a number from 1 to 64"},
    {"prefetch 2.5", SYN "prefetch = 2.5\n" FC, 3, "bad value '2.5' for prefetch"},
    {"augment_on typo", SYN "augment_on = gpus\n" FC, 3,
     "unknown augment_on 'gpus' (did you mean 'gpu'?); expected one of: cpu, gpu"},
    {"pipeline typo", SYN "pipeline = async\n" FC, 3,
     "unknown pipeline 'async' (did you mean 'sync'?); expected one of: parallel, sync"},
    {"drop_last word", SYN "drop_last = sometimes\n" FC, 3, "bad boolean 'sometimes' for drop_last"},
    {"workers in [train]", SYN "[train]\nworkers = 2\n" FC, 4, "unknown key 'workers' in [train]"},
    /* mixed precision */
    {"precision = fp8", SYN "[train]\nprecision = fp8\n" FC, 4,
     /* fp16 and fp32 are both two edits away: the suggestion takes the first */
     "unknown precision 'fp8' (did you mean 'fp32'?); expected one of: fp32, fp16, bf16"},
    {"loss_scale word", SYN "[train]\nloss_scale = dynamc\n" FC, 4,
     "bad loss_scale 'dynamc' (did you mean 'dynamic'?); expected dynamic or a positive finite number"},
    {"loss_scale 0", SYN "[train]\nloss_scale = 0\n" FC, 4, "bad loss_scale '0'; expected dynamic or a positive"},
    {"loss_scale negative", SYN "[train]\nloss_scale = -8\n" FC, 4, "bad loss_scale '-8'"},
    {"loss_scale inf", SYN "[train]\nloss_scale = inf\n" FC, 4, "bad loss_scale 'inf'"},
    {"loss_scale overflow", SYN "[train]\nloss_scale = 1e39\n" FC, 4, "bad loss_scale '1e39'"},
    {"loss_scale nan", "[data]\nformat = synthetic\n\n[train]\nloss_scale = nan\n" FC, 5, "bad loss_scale 'nan'"},
    {"loss_scale_init 0", SYN "[train]\nloss_scale_init = 0\n" FC, 4, "loss_scale_init"},
    {"loss_scale_init huge", SYN "[train]\nloss_scale_init = 1e30\n" FC, 4, "loss_scale_init"},
    {"growth steps 0", SYN "[train]\nloss_scale_growth_steps = 0\n" FC, 4, "loss_scale_growth_steps"},
    {"dtype fp16", SYN "[fc]\ntype = dense\nunits = 10\ndtype = fp16\n", 6,
     "unknown dtype 'fp16' (did you mean 'fp32'?); expected one of: auto, fp32"},
    {"dtype on a pool", SYN "[p]\ntype = maxpool\nsize = 2\ndtype = fp32\n" FC, 6,
     "unknown key 'dtype' in [p] (dtype applies only to dense, conv2d or batchnorm layers)"},
    {"dtype on dropout", SYN FC "[d]\ntype = dropout\ndtype = fp32\n", 8,
     "dtype applies only to dense, conv2d or batchnorm layers"},
    /* devices */
    {"devices = gpu9", SYN "[train]\ndevices = gpu9\n" FC, 4, "bad devices 'gpu9'"},
    {"devices twice", SYN "[train]\ndevices = 0,0\n" FC, 4, "device 0 is listed twice"},
};

static void check_bad(const bad_case *c)
{
    ct_ini ini;
    ct_config cfg;
    ct_err err;
    ct_err_clear(&err);
    int loaded = 0;
    ct_status st = ct_ini_parse(&ini, c->text, "net.ini", &err);
    if (st == CT_OK) {
        st = ct_config_load(&cfg, &ini, &err);
        loaded = st == CT_OK;
    }
    CHECK_MSG(st == CT_ERR_CONFIG, "%s: status %d, message '%s'", c->name, (int)st, err.msg);
    CHECK_MSG(err.line == c->line, "%s: line %d, expected %d ('%s')", c->name, err.line, c->line, err.msg);
    CHECK_MSG(ct_contains(err.msg, c->phrase), "%s: message '%s' lacks '%s'", c->name, err.msg, c->phrase);
    char prefix[64];
    if (c->line > 0)
        snprintf(prefix, sizeof prefix, "net.ini:%d: ", c->line);
    else
        snprintf(prefix, sizeof prefix, "net.ini: ");
    CHECK_MSG(strncmp(err.msg, prefix, strlen(prefix)) == 0, "%s: message '%s' should start '%s'", c->name,
              err.msg, prefix);
    if (loaded)
        ct_config_free(&cfg);
    ct_ini_free(&ini);
}

/* concat reads any number of earlier layers, in the order listed */
static void test_concat_inputs(void)
{
    ct_ini ini = {0};
    ct_config cfg = {0};
    ct_err err;
    CHECK(ct_ini_parse(&ini,
                       SYN "[a]\ntype = conv2d\nfilters = 2\nsize = 3\n[b]\ntype = conv2d\nfilters = 3\nsize = 3\n"
                           "[c]\ntype = conv2d\nfilters = 4\nsize = 1\ninput = a\n"
                           "[cat]\ntype = concat\ninputs = c, a, b\n",
                       "net.ini", &err) == CT_OK);
    ct_status st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st == CT_OK) {
        const ct_layer_config *cat = &cfg.layers[3];
        CHECK(cfg.n_layers == 4 && cat->type == CT_LAYER_CONCAT && cat->n_inputs == 3 && cat->inputs_line == 18);
        CHECK(strcmp(cat->inputs[0], "c") == 0 && strcmp(cat->inputs[1], "a") == 0 && strcmp(cat->inputs[2], "b") == 0);
        ct_config_free(&cfg);
    }
    ct_ini_free(&ini);
}

/* The mixed-precision keys, given: bf16, a fixed scale, the dynamic scaler's settings, pinned layers. */
static void test_precision_keys(void)
{
    static const char *const texts[] = {
        SYN "[train]\nprecision = bf16\nloss_scale = 1024\n"
            "[c]\ntype = conv2d\nfilters = 2\nsize = 3\ndtype = fp32\n[bn]\ntype = batchnorm\ndtype = fp32\n"
            "[f]\ntype = flatten\n" FC,
        SYN "[train]\nprecision = fp16\nloss_scale = dynamic\nloss_scale_init = 16777216\n"
            "loss_scale_growth_steps = 3\n[fc]\ntype = dense\nunits = 10\ndtype = auto\n",
    };
    for (int k = 0; k < 2; k++) {
        ct_ini ini = {0};
        ct_config cfg = {0};
        ct_err err;
        CHECK(ct_ini_parse(&ini, texts[k], "net.ini", &err) == CT_OK);
        ct_status st = ct_config_load(&cfg, &ini, &err);
        CHECK_MSG(st == CT_OK, "%s", err.msg);
        if (st == CT_OK && k == 0) {
            CHECK(cfg.train.precision == CT_PREC_BF16 && cfg.train.loss_scale == 1024);
            CHECK(cfg.layers[0].dtype == CT_LAYER_DTYPE_FP32 && cfg.layers[1].dtype == CT_LAYER_DTYPE_FP32);
            CHECK(cfg.layers[3].dtype == CT_LAYER_DTYPE_AUTO);
        }
        if (st == CT_OK && k == 1) {
            CHECK(cfg.train.precision == CT_PREC_FP16 && cfg.train.loss_scale == 0);
            CHECK(cfg.train.loss_scale_init == 16777216.0f && cfg.train.loss_scale_growth_steps == 3);
            CHECK(cfg.layers[0].dtype == CT_LAYER_DTYPE_AUTO);
        }
        if (st == CT_OK)
            ct_config_free(&cfg);
        ct_ini_free(&ini);
    }
}

/* batch = max | auto and their keys, read as given */
static void test_batch_keys(void)
{
    static const struct {
        const char *text;
        ct_batch_mode mode;
        float margin;
    } cases[] = {
        {"batch = max\nmemory_margin = 20%\n", CT_BATCH_MAX, 0.20f},
        {"batch = auto\nmemory_margin = 0\n", CT_BATCH_AUTO, 0.0f},
        {"batch = 96\nmemory_margin = 50\n", CT_BATCH_FIXED, 0.50f},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[data]\nformat = synthetic\n[train]\n%sbatch_max = 300\nbatch_search_seconds = 2.5\n"
                 "batch_candidates = 128, 32 ,64\nlr_scaling = sqrt\nbase_batch = 32\n[fc]\ntype = dense\nunits = 10\n",
                 cases[k].text);
        ct_ini ini;
        ct_config cfg;
        ct_err err;
        ct_err_clear(&err);
        CHECK(ct_ini_parse(&ini, text, "net.ini", &err) == CT_OK);
        ct_status st = ct_config_load(&cfg, &ini, &err);
        CHECK_MSG(st == CT_OK, "%s", err.msg);
        if (st == CT_OK) {
            const ct_train_config *t = &cfg.train;
            CHECK(t->batch_mode == cases[k].mode && t->batch_line == 4);
            CHECK(t->batch == (cases[k].mode == CT_BATCH_FIXED ? 96 : 0));
            CHECK_NEAR(t->memory_margin, cases[k].margin, 1e-7);
            CHECK(t->batch_max == 300 && t->batch_search_seconds == 2.5f);
            CHECK(t->n_batch_candidates == 3 && t->batch_candidates[0] == 32 && t->batch_candidates[1] == 64 &&
                  t->batch_candidates[2] == 128);
            CHECK(t->lr_scaling == CT_LR_SCALING_SQRT && t->base_batch == 32);
            ct_config_free(&cfg);
        }
        ct_ini_free(&ini);
    }
    /* an override's search keeps no file line: its errors name --set train.batch (line -1) */
    ct_ini ini;
    ct_config cfg;
    ct_err err;
    ct_err_clear(&err);
    CHECK(ct_ini_parse(&ini, set_text, "net.ini", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.batch", "auto", &err) == CT_OK);
    ct_status st = ct_config_load(&cfg, &ini, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st == CT_OK) {
        CHECK(cfg.train.batch_mode == CT_BATCH_AUTO && cfg.train.batch_line == -1);   /* -1: from --set */
        ct_config_free(&cfg);
    }
    ct_ini_free(&ini);
    /* lr_scaling by --set, base_batch missing: the message says --set */
    CHECK(ct_ini_parse(&ini, set_text, "net.ini", &err) == CT_OK);
    CHECK(ct_ini_set(&ini, "train.lr_scaling", "linear", &err) == CT_OK);
    CHECK(ct_config_load(&cfg, &ini, &err) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(err.msg, "--set train.lr_scaling: lr_scaling = linear needs base_batch") &&
                  ct_contains(err.msg, "base_batch = 16"), "%s", err.msg);
    ct_ini_free(&ini);
}

int main(void)
{
    test_full();
    test_batch_keys();
    test_precision_keys();
    test_concat_inputs();
    test_synthetic_and_defaults();
    test_set();
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++)
        check_bad(&bad_cases[i]);
    printf("%zu bad configs\n", sizeof bad_cases / sizeof *bad_cases);
    return ct_test_done();
}
