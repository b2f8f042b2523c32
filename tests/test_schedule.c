/* Learning-rate schedules and warm-up against values computed by hand. */
#include "train/optim.h"
#include "tests/test_util.h"

static ct_train_config base(ct_schedule schedule)
{
    ct_train_config t = {0};
    t.learning_rate = 0.1f;
    t.epochs = 10;
    t.schedule = schedule;
    t.step_size = 3;
    t.gamma = 0.5f;
    return t;
}

int main(void)
{
    const long spe = 100; /* steps per epoch */
    ct_train_config t = base(CT_SCHED_CONSTANT);
    CHECK_NEAR(ct_schedule_lr(&t, 0, spe), 0.1, 1e-7);
    CHECK_NEAR(ct_schedule_lr(&t, 999, spe), 0.1, 1e-7);

    t = base(CT_SCHED_STEP);
    CHECK_NEAR(ct_schedule_lr(&t, 299, spe), 0.1, 1e-7);   /* epoch 2.99 */
    CHECK_NEAR(ct_schedule_lr(&t, 300, spe), 0.05, 1e-7);  /* epoch 3: one decay */
    CHECK_NEAR(ct_schedule_lr(&t, 650, spe), 0.025, 1e-7); /* epoch 6.5: two */

    t = base(CT_SCHED_COSINE);
    t.min_lr = 0.01f;
    CHECK_NEAR(ct_schedule_lr(&t, 0, spe), 0.1, 1e-7);
    CHECK_NEAR(ct_schedule_lr(&t, 500, spe), 0.055, 1e-6); /* halfway: (0.1 + 0.01) / 2 */
    /* a quarter of the way: min + (max - min) * (1 + cos(pi/4)) / 2 */
    CHECK_NEAR(ct_schedule_lr(&t, 250, spe), 0.01 + 0.09 * (1 + sqrt(0.5)) / 2, 1e-6);
    CHECK_NEAR(ct_schedule_lr(&t, 1000, spe), 0.01, 1e-7);

    /* warm-up: linear from lr/steps to lr over 2 epochs, then cosine over the remaining 8 */
    t.warmup = 2;
    CHECK_NEAR(ct_schedule_lr(&t, 0, spe), 0.1 / 200, 1e-8);
    CHECK_NEAR(ct_schedule_lr(&t, 99, spe), 0.1 * 100 / 200, 1e-7);
    CHECK_NEAR(ct_schedule_lr(&t, 200, spe), 0.1, 1e-7);
    CHECK_NEAR(ct_schedule_lr(&t, 600, spe), 0.055, 1e-6); /* halfway through the cosine part */

    /* lr_scaling's factor scales the peak: warm-up climbs to it, cosine decays from it to min_lr */
    t.lr_factor = 4.0;
    CHECK_NEAR(ct_schedule_lr(&t, 99, spe), 0.4 * 100 / 200, 1e-7);
    CHECK_NEAR(ct_schedule_lr(&t, 200, spe), 0.4, 1e-7);
    CHECK_NEAR(ct_schedule_lr(&t, 600, spe), (0.4 + 0.01) / 2, 1e-6);
    t = base(CT_SCHED_STEP);
    t.lr_factor = 0.5;
    CHECK_NEAR(ct_schedule_lr(&t, 300, spe), 0.025, 1e-7);
    /* a factor of 1 leaves every rate the float it was */
    ct_train_config one = base(CT_SCHED_COSINE), plain = one;
    one.lr_factor = 1.0;
    one.warmup = plain.warmup = 1.5f;
    for (long step = 0; step < 1000; step += 37)
        CHECK(ct_schedule_lr(&one, step, spe) == ct_schedule_lr(&plain, step, spe));
    /* the rules */
    ct_train_config r = base(CT_SCHED_CONSTANT);
    r.base_batch = 64;
    CHECK(ct_lr_factor(&r, 256) == 1.0);
    r.lr_scaling = CT_LR_SCALING_LINEAR;
    CHECK(ct_lr_factor(&r, 256) == 4.0);
    r.lr_scaling = CT_LR_SCALING_SQRT;
    CHECK(ct_lr_factor(&r, 256) == 2.0);
    return ct_test_done();
}
