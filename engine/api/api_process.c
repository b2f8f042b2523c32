/* The calls for one of several processes (mpirun, srun): which one it is, and ending them all
 * after a failure (train/world.h). */
#include "train/world.h"

void ct_process_world(int *rank, int *size)
{
    int local;
    ct_world_launcher(rank, size, &local);
}

void ct_process_abort(int code)
{
    ct_world_abort_process(code);
}
