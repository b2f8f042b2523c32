/* The process world over MPI (world.h). Every exchange is point-to-point, nonblocking, polled
 * against the comm_timeout deadline: each rank sends its part straight to every other and
 * receives theirs, so each rank knows exactly which peers it still waits for. For the handful
 * of CPU processes this serves, P - 1 messages each way cost less than a tree's extra hops, and
 * every rank then holds every part, to sum in one fixed order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "train/world.h"

/* The first of the launcher's variables that is set, as a non-negative number; -1 if none. */
static int env_number(const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end == '\0' && n >= 0 && n < 1L << 24)
                return (int)n;
        }
    }
    return -1;
}

void ct_world_launcher(int *rank, int *size, int *local_rank)
{
    /* SLURM_NTASKS also holds in a batch script's own process, which is not a step's task */
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS", NULL};
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", NULL};
    static const char *const locals[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
    int s = env_number(sizes), r = env_number(ranks), l = env_number(locals);
    *size = s > 0 ? s : 1;
    *rank = r >= 0 && r < *size ? r : 0;
    *local_rank = l >= 0 ? l : 0;
}

#ifndef CUTRAIN_HAVE_MPI

struct ct_world {
    int unused;
};

ct_status ct_world_open(ct_world **out, double timeout_s, ct_err *err)
{
    (void)timeout_s;
    int rank, size, local;
    ct_world_launcher(&rank, &size, &local);
    *out = NULL;
    (void)rank;
    return ct_fail(err, CT_ERR_USAGE,
                   "this process was started by a launcher (mpirun, srun) as one of %d, but this "
                   "cutrain was built without MPI, so the processes cannot train together (each would train alone "
                   "and overwrite the others' files); install Open MPI (apt-get install openmpi-bin "
                   "libopenmpi-dev) and build with -DCUTRAIN_MPI=ON, or run one process",
                   size);
}

ct_status ct_world_join(ct_world *w, const char *agreed, ct_err *err)
{
    (void)w; (void)agreed;
    return ct_fail(err, CT_ERR_INTERNAL, "no MPI world in this build");
}

int ct_world_rank(const ct_world *w) { (void)w; return 0; }
int ct_world_broken(const ct_world *w) { (void)w; return 0; }
int ct_world_size(const ct_world *w) { (void)w; return 1; }

ct_status ct_world_all_gather(ct_world *w, const void *mine, void *all, size_t bytes, const char *what, ct_err *err)
{
    (void)w; (void)mine; (void)all; (void)bytes; (void)what;
    return ct_fail(err, CT_ERR_INTERNAL, "no MPI world in this build");
}

ct_status ct_world_broadcast(ct_world *w, void *buf, size_t bytes, int root, const char *what, ct_err *err)
{
    (void)w; (void)buf; (void)bytes; (void)root; (void)what;
    return ct_fail(err, CT_ERR_INTERNAL, "no MPI world in this build");
}

void ct_world_close(ct_world *w) { (void)w; }

void ct_world_abort_process(int code) { (void)code; }

#else

#include <mpi.h>

struct ct_world {
    MPI_Comm comm;          /* a duplicate of MPI_COMM_WORLD, returning errors instead of aborting */
    int rank, size;
    double timeout_s;
    unsigned seq;           /* exchanges so far: their tag */
    int broken;             /* an exchange failed: its requests may still be pending */
    char broken_msg[sizeof ((ct_err *)0)->msg];
    MPI_Request *reqs;      /* (2 * size) */
    int *peer;              /* (2 * size) the rank of each request */
    /* (2 * size) a receive's buffer and length (NULL for a send), and whether its message was
     * matched yet: a receive is posted only once a probe has seen the peer's next message with
     * this exchange's tag and exactly this length, so no message of another size or exchange is
     * ever written into a buffer (a truncated receive was seen to corrupt the heap under Open MPI
     * 4.1, where MPI promises only an error) */
    void **into;
    size_t *want;
    int tag;                /* the current exchange's */
};

/* MPI is the process's: finalised at exit by whoever started it, never by a world's close (MPI
 * cannot start twice, and a program may open several nets). */
static void finalize_at_exit(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done)
        MPI_Finalize();
}

ct_status ct_world_open(ct_world **out, double timeout_s, ct_err *err)
{
    *out = NULL;
    int launcher_rank, launcher_size, local;
    ct_world_launcher(&launcher_rank, &launcher_size, &local);
    int started = 0, ended = 0, provided = MPI_THREAD_SINGLE;
    MPI_Finalized(&ended);
    if (ended)
        return ct_fail(err, CT_ERR_USAGE, "MPI was finalised before this net joined the processes' world");
    MPI_Initialized(&started);
    if (!started) {
        /* the library's MPI calls come from whichever thread calls ct_fit, one at a time */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return ct_fail(err, CT_ERR_BACKEND, "rank %d: MPI_Init_thread failed", launcher_rank);
        atexit(finalize_at_exit);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return ct_fail(err, CT_ERR_BACKEND,
                       "rank %d: MPI gives thread level %d, and cutrain needs MPI_THREAD_SERIALIZED (%d): its calls "
                       "may come from another thread than the one that started MPI", launcher_rank, provided,
                       MPI_THREAD_SERIALIZED);
    ct_world *w = calloc(1, sizeof *w);
    if (!w)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the process world");
    w->timeout_s = timeout_s;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &w->comm) != MPI_SUCCESS) {
        free(w);
        return ct_fail(err, CT_ERR_BACKEND, "rank %d: MPI_Comm_dup failed", launcher_rank);
    }
    /* a peer's death becomes an error code to report, not MPI's own abort */
    MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(w->comm, &w->rank);
    MPI_Comm_size(w->comm, &w->size);
    w->reqs = malloc(2 * (size_t)w->size * sizeof *w->reqs);
    w->peer = malloc(2 * (size_t)w->size * sizeof *w->peer);
    w->into = malloc(2 * (size_t)w->size * sizeof *w->into);
    w->want = malloc(2 * (size_t)w->size * sizeof *w->want);
    if (!w->reqs || !w->peer || !w->into || !w->want) {
        ct_world_close(w);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the process world");
    }
    if (launcher_size > 1 && w->size != launcher_size) {
        int size = w->size;
        ct_world_close(w);
        return ct_fail(err, CT_ERR_BACKEND,
                       "the launcher started %d processes but MPI sees %d: this cutrain's MPI is not the one "
                       "mpirun belongs to (build and launch with the same MPI)", launcher_size, size);
    }
    *out = w;
    return CT_OK;
}

int ct_world_rank(const ct_world *w) { return w->rank; }
int ct_world_broken(const ct_world *w) { return w->broken; }
int ct_world_size(const ct_world *w) { return w->size; }

/* Request i is not complete: a send or a matched receive still running, or a receive whose
 * message has not come. */
static int pending(const ct_world *w, int i)
{
    return w->reqs[i] != MPI_REQUEST_NULL || w->into[i] != NULL;
}

/* Lists the peers of the requests not yet complete (each once) into buf. */
static void name_pending(const ct_world *w, int n, char *buf, size_t cap, int *count)
{
    size_t used = 0;
    *count = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!pending(w, i))
            continue;
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= pending(w, j) && w->peer[j] == w->peer[i];
        if (seen || used >= cap)
            continue;
        int k = snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", w->peer[i]);
        used += k > 0 ? (size_t)k : 0;
        ++*count;
    }
}

static ct_status broken(ct_world *w, ct_err *err)
{
    return ct_fail(err, CT_ERR_BACKEND, "%s", w->broken_msg);
}

/* Receive i's message, once the peer's next one has come: received when it is this exchange's and
 * of the expected length (w->into[i] becomes NULL, w->reqs[i] the receive), an error that breaks the
 * world otherwise. MPI keeps the messages of two ranks in the order they were sent, and every
 * exchange ends before the next begins, so the peer's next message belongs to this exchange unless
 * the processes are out of step (they train different steps). */
static ct_status match_receive(ct_world *w, int i, const char *what, ct_err *err)
{
    int found = 0, count = 0;
    MPI_Message msg;
    MPI_Status status;
    if (MPI_Improbe(w->peer[i], MPI_ANY_TAG, w->comm, &found, &msg, &status) != MPI_SUCCESS) {
        w->broken = 1;
        snprintf(w->broken_msg, sizeof w->broken_msg, "rank %d lost rank %d in %s: it died or its connection broke",
                 w->rank, w->peer[i], what);
        return broken(w, err);
    }
    if (!found)
        return CT_OK;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (status.MPI_TAG != w->tag || count == MPI_UNDEFINED || (size_t)count != w->want[i]) {
        /* the message stays unreceived: nothing of it is written anywhere */
        w->broken = 1;
        snprintf(w->broken_msg, sizeof w->broken_msg,
                 "rank %d expected %zu bytes from rank %d in %s, and rank %d sent %d bytes%s: the processes are out "
                 "of step (they do not train the same steps; every process must train the same config and data)",
                 w->rank, w->want[i], w->peer[i], what, w->peer[i], count,
                 status.MPI_TAG != w->tag ? " of another exchange" : "");
        return broken(w, err);
    }
    void *into = w->into[i];
    w->into[i] = NULL;
    if (MPI_Imrecv(into, count, MPI_BYTE, &msg, &w->reqs[i]) != MPI_SUCCESS) {
        w->broken = 1;
        snprintf(w->broken_msg, sizeof w->broken_msg, "rank %d could not receive rank %d's message in %s", w->rank,
                 w->peer[i], what);
        return broken(w, err);
    }
    return CT_OK;
}

/* Polls the n requests in w->reqs until all complete, one fails or the deadline passes. Polling,
 * not MPI_Waitall: MPI has no timeout, and a stopped peer never answers. */
static ct_status wait_all(ct_world *w, int n, const char *what, ct_err *err)
{
    double deadline = ct_clock_seconds() + w->timeout_s;
    long polls = 0;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (w->into[i]) {
                ct_status st = match_receive(w, i, what, err);
                if (st != CT_OK)
                    return st;
                if (w->into[i]) {
                    left++;
                    continue;
                }
            }
            if (w->reqs[i] == MPI_REQUEST_NULL)
                continue;
            int done = 0;
            MPI_Status status;
            int rc = MPI_Test(&w->reqs[i], &done, &status);
            if (rc != MPI_SUCCESS) {
                char why[MPI_MAX_ERROR_STRING] = "";
                int len = 0;
                MPI_Error_string(rc, why, &len);
                w->broken = 1;
                snprintf(w->broken_msg, sizeof w->broken_msg,
                         "rank %d lost rank %d in %s: it died or its connection broke (MPI: %s)", w->rank,
                         w->peer[i], what, why);
                return broken(w, err);
            }
            left += !done;
        }
        if (!left)
            return CT_OK;
        if (ct_clock_seconds() > deadline) {
            char missing[200];
            int count = 0;
            name_pending(w, n, missing, sizeof missing, &count);
            w->broken = 1;
            snprintf(w->broken_msg, sizeof w->broken_msg,
                     "rank %d waited more than comm_timeout = %g s for rank%s %s in %s: %s died, %s stopped or "
                     "never joined (raise comm_timeout if a step can take that long)", w->rank, w->timeout_s,
                     count > 1 ? "s" : "", missing, what, count > 1 ? "they" : "it", count > 1 ? "were" : "was");
            return broken(w, err);
        }
        /* spin briefly (a step's messages usually come at once), then yield the core */
        if (++polls > 1000) {
            struct timespec nap = {0, 200000};
            nanosleep(&nap, NULL);
        }
    }
}

static int next_tag(ct_world *w)
{
    /* MPI guarantees tags up to 32767; messages between two ranks stay in order anyway */
    w->tag = (int)(w->seq++ % 32767u);
    return w->tag;
}

/* Request i: a receive of exactly `bytes` from peer into `into`, posted when its message comes
 * (match_receive). */
static void expect(ct_world *w, int i, int peer, void *into, size_t bytes)
{
    w->peer[i] = peer;
    w->reqs[i] = MPI_REQUEST_NULL;
    w->into[i] = into;
    w->want[i] = bytes;
}

/* Request i: `bytes` of buf to peer. */
static void post_send(ct_world *w, int i, int peer, const void *buf, size_t bytes, int tag)
{
    w->peer[i] = peer;
    w->into[i] = NULL;
    w->want[i] = bytes;
    MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, w->comm, &w->reqs[i]);
}

static ct_status check_count(ct_world *w, size_t bytes, const char *what, ct_err *err)
{
    if (bytes > (size_t)0x7fffffff)
        return ct_fail(err, CT_ERR_BACKEND, "rank %d: %s moves %zu bytes, more than one MPI message holds",
                       w->rank, what, bytes);
    return CT_OK;
}

ct_status ct_world_all_gather(ct_world *w, const void *mine, void *all, size_t bytes, const char *what, ct_err *err)
{
    if (w->broken)
        return broken(w, err);
    if (check_count(w, bytes, what, err) != CT_OK)
        return err->status;
    int tag = next_tag(w), n = 0;
    unsigned char *out = all;
    /* sent from this rank's own slot of `all`, which outlives a failed send's pending request */
    memcpy(out + (size_t)w->rank * bytes, mine, bytes);
    for (int r = 0; r < w->size; r++)
        if (r != w->rank)
            expect(w, n++, r, out + (size_t)r * bytes, bytes);
    for (int r = 0; r < w->size; r++)
        if (r != w->rank)
            post_send(w, n++, r, out + (size_t)w->rank * bytes, bytes, tag);
    return wait_all(w, n, what, err);
}

ct_status ct_world_broadcast(ct_world *w, void *buf, size_t bytes, int root, const char *what, ct_err *err)
{
    if (w->broken)
        return broken(w, err);
    if (check_count(w, bytes, what, err) != CT_OK)
        return err->status;
    int tag = next_tag(w), n = 0;
    if (w->rank == root) {
        for (int r = 0; r < w->size; r++)
            if (r != root)
                post_send(w, n++, r, buf, bytes, tag);
    } else {
        expect(w, n++, root, buf, bytes);
    }
    return wait_all(w, n, what, err);
}

/* Line `index` of text (lines end with '\n') as its own string in buf; "" past the end. */
static const char *line_at(const char *text, int index, char *buf, size_t n)
{
    for (int i = 0; i < index && text; i++)
        text = (text = strchr(text, '\n')) ? text + 1 : NULL;
    buf[0] = '\0';
    if (!text || !*text)
        return buf;
    size_t len = strcspn(text, "\n");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), text);
    return buf;
}

/* The first line where a and b differ, named in err: a is rank 0's, b rank r's. */
static ct_status disagreement(const ct_world *w, const char *a, const char *b, int r, ct_err *err)
{
    char la[256], lb[256];
    for (int i = 0;; i++) {
        line_at(a, i, la, sizeof la);
        line_at(b, i, lb, sizeof lb);
        if (strcmp(la, lb) != 0 || !la[0])
            break;
    }
    const char *ea = strstr(la, " = "), *eb = strstr(lb, " = ");
    int ka = ea ? (int)(ea - la) : (int)strlen(la), kb = eb ? (int)(eb - lb) : (int)strlen(lb);
    const char *tail = "every process of one launch must train the same config, data and checkpoint (docs/processes.md "
                       "lists the keys that may differ)";
    if (ea && eb && ka == kb && strncmp(la, lb, (size_t)ka) == 0)
        return ct_fail(err, CT_ERR_CONFIG, "the processes disagree on %.*s: rank 0 has %s, rank %d has %s (this is "
                       "rank %d); %s", ka, la, ea + 3, r, eb + 3, w->rank, tail);
    return ct_fail(err, CT_ERR_CONFIG, "the processes disagree from %.*s on: rank 0 has %s, rank %d has %s (this is "
                   "rank %d); %s", ka ? ka : kb, ka ? la : lb, la[0] ? la : "nothing more", r,
                   lb[0] ? lb : "nothing more", w->rank, tail);
}

ct_status ct_world_join(ct_world *w, const char *agreed, ct_err *err)
{
    const char *what = "the join (the first exchange, after loading the data)";
    uint64_t mine = strlen(agreed) + 1, *lengths = calloc((size_t)w->size, sizeof *lengths);
    if (!lengths)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the processes' join");
    /* every rank's length first, so that the texts travel in blocks of one size */
    ct_status st = ct_world_all_gather(w, &mine, lengths, sizeof mine, what, err);
    uint64_t block = 0;
    for (int r = 0; r < w->size && st == CT_OK; r++)
        block = lengths[r] > block ? lengths[r] : block;
    if (!w->broken)
        free(lengths);
    if (st != CT_OK)
        return st;
    if (block > (1u << 24))
        return ct_fail(err, CT_ERR_INTERNAL, "the join's texts are too large (%llu bytes)", (unsigned long long)block);
    char *padded = calloc(1, (size_t)block), *all = calloc((size_t)w->size, (size_t)block);
    if (!padded || !all) {
        free(padded);
        free(all);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the processes' join");
    }
    memcpy(padded, agreed, (size_t)mine);
    st = ct_world_all_gather(w, padded, all, (size_t)block, what, err);
    for (int r = 1; r < w->size && st == CT_OK; r++)
        if (strcmp(all, all + (size_t)r * block) != 0)
            st = disagreement(w, all, all + (size_t)r * block, r, err);
    free(padded);
    /* a failed exchange may still write into `all` */
    if (!w->broken)
        free(all);
    return st;
}

void ct_world_close(ct_world *w)
{
    if (!w)
        return;
    /* after a failure, requests may still be pending on the communicator and its buffers: both
     * are left for the process's end, which a failure calls for (ct_world_abort_process) */
    if (!w->broken) {
        int ended = 0;
        MPI_Finalized(&ended);
        if (!ended && w->comm != MPI_COMM_NULL)
            MPI_Comm_free(&w->comm);
        free(w->reqs);
        free(w->peer);
        free(w->into);
        free(w->want);
        free(w);
    }
}

void ct_world_abort_process(int code)
{
    int started = 0, ended = 0;
    MPI_Initialized(&started);
    MPI_Finalized(&ended);
    if (started && !ended)
        MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

#endif
