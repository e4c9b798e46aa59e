/* rows.c — see rows.h. */
#include "row_tasks.h"

int64_t vq_rows_per_task(int64_t n_rows, int64_t d, int n_threads)
{
    int64_t per = 16384 / d;
    const int64_t balanced = n_rows / (4 * (int64_t)(n_threads < 1 ? 1 : n_threads));
    if (per > balanced) per = balanced;
    return per < 1 ? 1 : per;
}
