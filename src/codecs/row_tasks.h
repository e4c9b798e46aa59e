/* rows.h — how the codecs' CPU drivers cut independent rows into
 * vq_parallel_for tasks. */
#ifndef VQ_ROWS_H
#define VQ_ROWS_H

#include <stdint.h>

/* Rows per task for n_rows rows of d elements: ~16K elements per task
 * amortise the pool's hand-off, while 4 tasks per thread keep the threads
 * balanced (the smaller of the two wins, at least 1 row). */
int64_t vq_rows_per_task(int64_t n_rows, int64_t d, int n_threads);

/* Rows [*r0, *r1) of task `task` when tasks take rows_per_task rows each. */
static inline void vq_task_rows(int64_t task, int64_t rows_per_task, int64_t n_rows, int64_t *r0, int64_t *r1)
{
    *r0 = task * rows_per_task;
    *r1 = *r0 + rows_per_task < n_rows ? *r0 + rows_per_task : n_rows;
}

#endif /* VQ_ROWS_H */
