/* Run under mpirun -np 2 (tests/mpi/test_mpi.sh sizes): processes out of step, each exchanging a
 * message of another size than the other expects, get an error naming both sizes from the process
 * world, and nothing is written past their buffers (guard bytes after each stay as they were).
 * Exit 0 when every check holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/world.h"

enum { GUARD = 64 };

/* An all-gather of `bytes` per rank into a buffer followed by guard bytes; 1 when it failed with
 * a message naming the sizes and left the guard alone. */
static int out_of_step(ct_world *w, size_t bytes, size_t other, const char *what)
{
    int size = ct_world_size(w);
    unsigned char *mine = calloc(1, bytes), *all = malloc((size_t)size * bytes + GUARD);
    if (!mine || !all)
        return 0;
    memset(all, 0xA5, (size_t)size * bytes + GUARD);
    ct_err err = {0};
    ct_status st = ct_world_all_gather(w, mine, all, bytes, what, &err);
    int guard_ok = 1;
    for (size_t i = 0; i < GUARD; i++)
        guard_ok &= all[(size_t)size * bytes + i] == 0xA5;
    char want[256];
    snprintf(want, sizeof want, "expected %zu bytes from rank %d in %s, and rank %d sent %zu bytes", bytes,
             1 - ct_world_rank(w), what, 1 - ct_world_rank(w), other);
    int ok = st != CT_OK && strstr(err.msg, want) && guard_ok;
    if (!ok)
        fprintf(stderr, "rank %d: status %d, guard %s, message: %s (wanted: %s)\n", ct_world_rank(w), (int)st,
                guard_ok ? "intact" : "OVERWRITTEN", err.msg, want);
    /* the buffers may still be in use by the failed exchange: left to the process's end */
    free(mine);
    return ok;
}

int main(void)
{
    ct_world *w = NULL;
    ct_err err = {0};
    if (ct_world_open(&w, 5.0, &err) != CT_OK || ct_world_size(w) != 2) {
        fprintf(stderr, "needs mpirun -np 2: %s\n", err.msg);
        return 2;
    }
    int rank = ct_world_rank(w);
    /* rank 0 sends 16 bytes and expects 16; rank 1 sends 200000 and expects 200000: each gets the
     * other's message, of the wrong size */
    size_t bytes = rank == 0 ? 16 : 200000, other = rank == 0 ? 200000 : 16;
    int ok = out_of_step(w, bytes, other, "the exchange out of step");
    /* the world is broken after the failure: every later exchange fails at once */
    int later = 0;
    ct_err err2 = {0};
    later = ct_world_all_gather(w, &later, &later, 0, "a later exchange", &err2) != CT_OK;
    printf("rank %d: %s\n", rank, ok && later ? "refused, guard intact" : "FAILED");
    fflush(stdout);
    /* pending requests may remain: end without MPI_Finalize's wait */
    _Exit(ok && later ? 0 : 1);
}
