/* Ctrl-C and SIGTERM for train, taken by a thread of their own.
 *
 * Why not a plain handler: a handler runs on whichever thread the kernel picks, on that thread's
 * stack, at whatever instruction it was. oneDNN before 3.11.2 (Debian 12 ships 2.6) points rsp
 * into the heap while its f32 GEMM kernels run, so a handler that lands there writes its frame
 * over the heap ("corrupted size vs. prev_size" a few steps later). So no thread ever takes these
 * signals: they are blocked before any thread starts (every thread inherits the mask) and one
 * thread waits for them with sigwait, out of any computation.
 *
 * The first signal asks to stop after the step (the training loop reads cli_stop_signal); a second
 * ends the process at once, by that signal. While the run is still opening (the config or a
 * checkpoint may be a FIFO whose writer never comes), the first signal also interrupts the main
 * thread's wait: a signal of our own (SIGRTMIN), sent to that thread alone, whose empty handler
 * runs on an alternate stack and leaves the wait with EINTR. */
#define _GNU_SOURCE /* sigaltstack's stack_t, SIGRTMIN */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Room for the kernel's signal frame (with AVX-512 state, about 3.5 KiB) and the empty handler. */
enum { WAKE_STACK_BYTES = 64 * 1024 };

struct cli_stop_signals {
    sigset_t stops;        /* SIGINT, SIGTERM */
    sigset_t waits;        /* and SIGRTMIN, by which cli_stop_signals_end ends the watcher */
    pthread_t main_thread; /* whose wait the first signal interrupts while the run opens */
    pthread_t watcher;
    atomic_int signal;     /* the first stop signal, 0 while none */
    atomic_int opening;    /* 1 until cli_stop_signals_opened */
    atomic_int ending;     /* set by cli_stop_signals_end */
    void *wake_stack;      /* ours, when the main thread had no alternate stack */
};

static void on_wake(int sig)
{
    (void)sig; /* only here to end a blocking call with EINTR */
}

static void say(const char *line)
{
    ssize_t ignored = write(STDERR_FILENO, line, strlen(line));
    (void)ignored;
}

static void *watch(void *arg)
{
    cli_stop_signals *s = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&s->waits, &sig) != 0)
            continue;
        if (sig == SIGRTMIN) {
            if (atomic_load(&s->ending))
                return NULL;
            continue;
        }
        int expected = 0;
        if (atomic_compare_exchange_strong(&s->signal, &expected, sig)) {
            say("\ncutrain: stopping as soon as it is safe (a second Ctrl-C ends at once, unsaved)\n");
            if (atomic_load(&s->opening))
                pthread_kill(s->main_thread, SIGRTMIN);
            continue;
        }
        say("\ncutrain: second signal: ending at once, nothing saved\n");
        /* ended by the signal itself (its action is the default), as an unhandled Ctrl-C would: the
         * shell sees it */
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig); /* not reached: the default action of SIGINT and SIGTERM ends the process */
    }
    return NULL;
}

/* Takes down what set_wake_handler set up. */
static void unset_wake_handler(cli_stop_signals *s)
{
    signal(SIGRTMIN, SIG_DFL);
    if (s->wake_stack) {
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
        free(s->wake_stack);
        s->wake_stack = NULL;
    }
}

/* The wake-up handler runs on an alternate stack, so that it never writes where rsp points. An
 * alternate stack that is already there (a sanitizer's) serves. */
static int set_wake_handler(cli_stop_signals *s)
{
    stack_t current;
    if (sigaltstack(NULL, &current) != 0)
        return errno;
    if (current.ss_flags & SS_DISABLE) {
        if (!(s->wake_stack = malloc(WAKE_STACK_BYTES)))
            return ENOMEM;
        stack_t alt = {.ss_sp = s->wake_stack, .ss_size = WAKE_STACK_BYTES, .ss_flags = 0};
        if (sigaltstack(&alt, NULL) != 0)
            return errno;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wake;
    sa.sa_flags = SA_ONSTACK; /* no SA_RESTART: the wait must end */
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGRTMIN, &sa, NULL) != 0 ? errno : 0;
}

int cli_stop_signals_start(cli_stop_signals **out)
{
    *out = NULL;
    cli_stop_signals *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "cutrain: out of memory\n");
        return CLI_FAILURE;
    }
    sigemptyset(&s->stops);
    sigaddset(&s->stops, SIGINT);
    sigaddset(&s->stops, SIGTERM);
    s->waits = s->stops;
    sigaddset(&s->waits, SIGRTMIN);
    s->main_thread = pthread_self();
    atomic_init(&s->signal, 0);
    atomic_init(&s->opening, 1);
    atomic_init(&s->ending, 0);
    /* the watcher starts with all three blocked (it takes them with sigwait); the main thread then
     * lets SIGRTMIN in again, to be woken by it */
    int rc = pthread_sigmask(SIG_BLOCK, &s->waits, NULL);
    /* the default action, even where the parent left them ignored (a background job of a script),
     * as a handler would have replaced that: an ignored signal never reaches sigwait */
    if (rc == 0 && (signal(SIGINT, SIG_DFL) == SIG_ERR || signal(SIGTERM, SIG_DFL) == SIG_ERR))
        rc = errno;
    if (rc == 0)
        rc = set_wake_handler(s);
    if (rc == 0)
        rc = pthread_create(&s->watcher, NULL, watch, s);
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, SIGRTMIN);
    pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
    if (rc != 0) {
        fprintf(stderr, "cutrain: cannot set up Ctrl-C handling: %s\n", strerror(rc));
        unset_wake_handler(s);
        free(s);
        return CLI_FAILURE;
    }
    *out = s;
    return CLI_OK;
}

int cli_stop_signal(const cli_stop_signals *s)
{
    return atomic_load(&s->signal);
}

void cli_stop_signals_opened(cli_stop_signals *s)
{
    atomic_store(&s->opening, 0);
}

/* The stop signals stay blocked: the command ends next, and one that comes meanwhile is not acted
 * on, as a signal after the last step never was. */
void cli_stop_signals_end(cli_stop_signals *s)
{
    if (!s)
        return;
    /* asked, not cancelled: a cancelled thread unwinds past its frames' sanitizer bookkeeping */
    atomic_store(&s->ending, 1);
    pthread_kill(s->watcher, SIGRTMIN);
    pthread_join(s->watcher, NULL);
    unset_wake_handler(s);
    free(s);
}
