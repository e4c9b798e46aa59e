/* progress.h — progress of long `vq` runs, on stderr. For work that runs
 * more than a few seconds: a bar redrawn in place when stderr is a terminal,
 * else one line per step ("vq bench attention: [3/12] kivi Skv 8K (4.1 s)").
 * VQ_PROGRESS=0 in the environment silences it. stdout (tables, JSON) is
 * never touched.
 *
 *     vqp p;
 *     vqp_begin(&p, "bench attention", n_steps);
 *     for (...) { vqp_step(&p, "%s Skv %lld", name, skv); run(); vqp_clear(&p); print_row(); }
 *     vqp_end(&p);
 */
#ifndef VQ_TOOL_PROGRESS_H
#define VQ_TOOL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct vqp {
    const char *command;
    int64_t total, done;   /* steps announced so far (the current one included) */
    double t0;             /* monotonic seconds at vqp_begin */
    bool tty, quiet;
} vqp;

/* total = the number of vqp_step calls to come (0 = unknown: no bar, a count). */
void vqp_begin(vqp *p, const char *command, int64_t total);
/* Announces the step about to run (printf-style label). */
void vqp_step(vqp *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Erases the bar (on a terminal) so that a line written to stdout next is
 * not glued to it; the next vqp_step draws it again. */
void vqp_clear(vqp *p);
/* Ends: clears the bar on a terminal, else prints the total time. */
void vqp_end(vqp *p);

#endif
