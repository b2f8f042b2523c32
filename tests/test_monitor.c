/* The monitor: /proc parsing on fixed text; NVML missing, failing to start, and a stand-in
 * libnvidia-ml.so.1 (built beside the tests) loaded through the monitor's own dlopen path with
 * fixed readings, on two devices, matched by PCI bus id, sampled by hand and by the thread, and
 * starting to fail mid-run (the figures go unknown with one note). */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/nvml.h"
#include "base/proc_cpu.h"
#include "train/monitor.h"
#include "tests/test_util.h"

static void test_proc_parsing(void)
{
    unsigned long long ticks = 0, busy = 0, total = 0;
    /* a command name with spaces and a ')' of its own: fields count from the last ')' */
    const char *self = "4242 (my prog) x) S 1 4242 4242 0 -1 4194560 2913 0 0 0 731 169 0 0 20 0 9 0 "
                       "1234 567890 123 18446744073709551615\n";
    CHECK(ct_proc_parse_self(self, &ticks) == 0);
    CHECK(ticks == 731 + 169);
    CHECK(ct_proc_parse_self("4242 no parentheses 1 2 3", &ticks) == -1);
    CHECK(ct_proc_parse_self("4242 (short) S 1 2\n", &ticks) == -1);
    const char *stat = "cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 0 0\nintr 1 2\n";
    CHECK(ct_proc_parse_machine(stat, &busy, &total) == 0);
    /* guest (7) is inside user already: the first eight fields only */
    CHECK(total == 100 + 5 + 50 + 800 + 40 + 3 + 2 + 0);
    CHECK(busy == total - 800 - 40);
    /* an old kernel's four fields */
    CHECK(ct_proc_parse_machine("cpu  10 0 10 80\n", &busy, &total) == 0 && total == 100 && busy == 20);
    CHECK(ct_proc_parse_machine("cpu0 1 2 3 4\n", &busy, &total) == -1);
    CHECK(ct_proc_parse_machine("cpu  1 2\n", &busy, &total) == -1);

    /* the arithmetic between two readings */
    ct_cpu_reading a = {1, 1, 1000, 500, 2000, 10.0}, b = {1, 1, 1150, 800, 2400, 11.0};
    CHECK_NEAR(ct_cpu_cores_used(&a, &b, 100), 1.5, 1e-12);
    b.seconds = 10.05; /* 5 ticks' time: too short to tell */
    CHECK(ct_cpu_cores_used(&a, &b, 100) < 0);
    b.seconds = 11.0;
    CHECK_NEAR(ct_cpu_machine_percent(&a, &b), 75.0, 1e-12);
    b.have_self = 0;
    CHECK(ct_cpu_cores_used(&a, &b, 100) < 0);
    b.machine_total = 2000;
    CHECK(ct_cpu_machine_percent(&a, &b) < 0);

    /* the real files, on Linux: a busy loop shows as CPU time of the process */
    ct_cpu_reading r0, r1;
    ct_cpu_read(&r0);
    CHECK(r0.have_self && r0.have_machine);
    volatile double x = 0;
    do {
        for (int i = 0; i < 1000000; i++)
            x += 1e-9 * i;
        ct_cpu_read(&r1);
    } while (r1.seconds - r0.seconds < 0.3);
    double cores = ct_cpu_cores_used(&r0, &r1, sysconf(_SC_CLK_TCK)), machine = ct_cpu_machine_percent(&r0, &r1);
    CHECK_MSG(cores > 0.0 && cores < 64.0, "cores %g", cores);
    CHECK_MSG(machine > 0.0 && machine <= 100.0, "machine %g%%", machine);
}

static void check_unknown(ct_monitor *m)
{
    ct_monitor_figures f;
    ct_monitor_sample(m);
    ct_monitor_figures_get(m, &f);
    CHECK(f.gpu_util < 0 && f.gpu_mem_mib < 0 && f.power_w < 0 && f.sm_clock_mhz < 0 && f.gpu_samples == 0);
}

static void test_without_nvml(void)
{
    const ct_monitor_gpu gpu = {NULL, 0};
    char why[256];
    ct_monitor *m = ct_monitor_start(&gpu, 1, 0.0, "/nonexistent/libnvidia-ml.so.1");
    CHECK(m != NULL);
    CHECK(!ct_monitor_has_gpu(m, why, sizeof why));
    CHECK_MSG(ct_contains(why, "not loaded"), "%s", why);
    check_unknown(m);
    ct_monitor_figures f;
    ct_monitor_figures_get(m, &f);
    CHECK(f.cpu_util_machine >= 0 || f.cpu_util_machine == -1.0);
    CHECK(!ct_monitor_take_note(m, why, sizeof why) && why[0] == '\0');
    ct_monitor_stop(m);

    /* NVML there but not starting (no driver): the same, no error */
    setenv("CT_STANDIN_INIT_FAIL", "1", 1);
    m = ct_monitor_start(&gpu, 1, 0.1, CT_NVML_STANDIN);
    CHECK(!ct_monitor_has_gpu(m, why, sizeof why));
    CHECK_MSG(ct_contains(why, "nvmlInit failed"), "%s", why);
    check_unknown(m);
    ct_monitor_stop(m);
    unsetenv("CT_STANDIN_INIT_FAIL");

    /* a CPU run watches no GPU, whatever NVML there is */
    m = ct_monitor_start(NULL, 0, 0.1, CT_NVML_STANDIN);
    CHECK(!ct_monitor_has_gpu(m, why, sizeof why));
    CHECK_MSG(ct_contains(why, "no GPU trains"), "%s", why);
    check_unknown(m);
    ct_monitor_stop(m);

    /* a NULL monitor (out of memory) knows nothing and breaks nothing */
    check_unknown(NULL);
    ct_monitor_begin(NULL);
    ct_monitor_stop(NULL);
}

static void test_standin_readings(void)
{
    /* the loader alone: device 1 found by bus id, device 0 by index */
    char why[256] = "";
    ct_nvml *nv = ct_nvml_open(CT_NVML_STANDIN, why, sizeof why);
    CHECK_MSG(nv != NULL, "%s", why);
    if (!nv)
        return;
    int h1 = ct_nvml_device(nv, "0000:3b:00.0", 0), h0 = ct_nvml_device(nv, "0000:99:00.0", 0);
    CHECK(h1 >= 0 && h0 >= 0 && h0 != h1);
    CHECK(ct_nvml_device(nv, NULL, 7) == -1);
    ct_gpu_reading r;
    CHECK(ct_nvml_read(nv, h1, &r) == 0);
    CHECK(r.util == 50 && r.mem_mib == 1536 && r.power_w == 150 && r.sm_clock_mhz == 1410);
    CHECK(ct_nvml_read(nv, h0, &r) == 0);
    CHECK(r.util == 40 && r.mem_mib == 1024 && r.power_w == 100 && r.sm_clock_mhz == 1400);
    ct_nvml_close(nv);

    /* two GPUs, sampled by hand: mean utilization and clock, summed memory and power */
    const ct_monitor_gpu gpus[2] = {{"", 0}, {"0000:3b:00.0", 0}};
    ct_monitor *m = ct_monitor_start(gpus, 2, 0.0, CT_NVML_STANDIN);
    CHECK(ct_monitor_has_gpu(m, why, sizeof why));
    ct_monitor_figures f;
    ct_monitor_figures_get(m, &f);
    CHECK(f.gpu_util < 0 && f.gpu_samples == 0); /* no sample yet: unknown, not 0 */
    for (int i = 0; i < 3; i++)
        ct_monitor_sample(m);
    ct_monitor_figures_get(m, &f);
    CHECK(f.gpu_samples == 3);
    CHECK_NEAR(f.gpu_util, 45.0, 1e-9);
    CHECK_NEAR(f.gpu_mem_mib, 2560.0, 1e-9);
    CHECK_NEAR(f.power_w, 250.0, 1e-9);
    CHECK_NEAR(f.sm_clock_mhz, 1405.0, 1e-9);
    /* a new window starts empty; an epoch that ends before the first sample takes one */
    ct_monitor_begin(m);
    ct_monitor_figures_get(m, &f);
    CHECK(f.gpu_samples == 0 && f.gpu_util < 0);
    ct_epoch_stats es = {0};
    ct_monitor_epoch_stats(m, &es);
    CHECK_NEAR(es.gpu_util, 45.0, 1e-9);
    CHECK_NEAR(es.power_w, 250.0, 1e-9);
    CHECK(es.monitor_note[0] == '\0');
    ct_monitor_stop(m);

    /* the default path: CT_NVML_LIBRARY, and the thread sampling on its own */
    setenv("CT_NVML_LIBRARY", CT_NVML_STANDIN, 1);
    const ct_monitor_gpu one = {"0000:3b:00.0", 0};
    m = ct_monitor_start(&one, 1, 0.01, NULL);
    CHECK(ct_monitor_has_gpu(m, NULL, 0));
    for (int i = 0; i < 300; i++) {
        ct_monitor_figures_get(m, &f);
        if (f.gpu_samples >= 3)
            break;
        usleep(10000);
    }
    CHECK_MSG(f.gpu_samples >= 3, "%ld samples in 3 s", f.gpu_samples);
    CHECK_NEAR(f.gpu_util, 50.0, 1e-9);
    CHECK_NEAR(f.gpu_mem_mib, 1536.0, 1e-9);
    ct_monitor_stop(m);
    unsetenv("CT_NVML_LIBRARY");
}

static void test_standin_failing(void)
{
    /* NVML answers two samples, then the GPU is lost */
    setenv("CT_STANDIN_FAIL_AFTER", "2", 1);
    const ct_monitor_gpu gpu = {NULL, 0};
    ct_monitor *m = ct_monitor_start(&gpu, 1, 0.0, CT_NVML_STANDIN);
    char note[256];
    ct_monitor_figures f;
    ct_monitor_sample(m);
    ct_monitor_sample(m);
    ct_monitor_figures_get(m, &f);
    CHECK(f.gpu_samples == 2);
    CHECK_NEAR(f.gpu_util, 40.0, 1e-9);
    CHECK(!ct_monitor_take_note(m, note, sizeof note));
    ct_monitor_sample(m);
    ct_monitor_figures_get(m, &f);
    CHECK(f.gpu_util < 0 && f.gpu_mem_mib < 0 && f.power_w < 0 && f.gpu_samples == 0);
    CHECK(f.cpu_util >= 0 || f.cpu_util == -1.0);
    CHECK(!ct_monitor_has_gpu(m, NULL, 0));
    /* the epoch's stats carry the figures as unknown and the note, once */
    ct_epoch_stats es = {0};
    ct_monitor_epoch_stats(m, &es);
    CHECK(es.gpu_util < 0 && es.gpu_mem_mib < 0 && es.power_w < 0 && es.sm_clock_mhz < 0);
    CHECK_MSG(ct_contains(es.monitor_note, "NVML stopped answering") && ct_contains(es.monitor_note, "error 15") &&
              ct_contains(es.monitor_note, "training goes on"), "%s", es.monitor_note);
    ct_monitor_epoch_stats(m, &es);
    CHECK(es.monitor_note[0] == '\0');
    /* once: later windows stay unknown without another note */
    ct_monitor_begin(m);
    ct_monitor_sample(m);
    check_unknown(m);
    CHECK(!ct_monitor_take_note(m, note, sizeof note) && note[0] == '\0');
    ct_monitor_stop(m);

    /* the same with the thread: it stops asking, and stops cleanly */
    m = ct_monitor_start(&gpu, 1, 0.005, CT_NVML_STANDIN);
    for (int i = 0; i < 300 && ct_monitor_has_gpu(m, NULL, 0); i++)
        usleep(10000);
    CHECK(!ct_monitor_has_gpu(m, NULL, 0));
    CHECK(ct_monitor_take_note(m, note, sizeof note) == 1);
    ct_monitor_stop(m);
    unsetenv("CT_STANDIN_FAIL_AFTER");
}

int main(void)
{
    test_proc_parsing();
    test_without_nvml();
    test_standin_readings();
    test_standin_failing();
    return ct_test_done();
}
