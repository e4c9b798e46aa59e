/* progress.c — progress of long vq runs on stderr (see progress.h). */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void vqp_begin(vqp *p, const char *command, int64_t total)
{
    const char *env = getenv("VQ_PROGRESS");
    *p = (vqp){.command = command, .total = total, .t0 = now_s(), .tty = isatty(STDERR_FILENO) == 1,
               .quiet = env != NULL && strcmp(env, "0") == 0};
}

void vqp_step(vqp *p, const char *fmt, ...)
{
    p->done++;
    if (p->quiet) return;
    char label[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof label, fmt, ap);
    va_end(ap);
    const double t = now_s() - p->t0;
    if (p->tty && p->total > 0) {
        enum { WIDTH = 24 };
        const int64_t filled = (p->done - 1) * WIDTH / p->total;
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[WIDTH] = '\0';
        /* \033[K clears what a longer previous label left on the line */
        fprintf(stderr, "\r[%s] %lld/%lld %5.1f s  %s\033[K", bar, (long long)p->done, (long long)p->total, t, label);
    } else if (p->total > 0) {
        fprintf(stderr, "vq %s: [%lld/%lld] %s (%.1f s)\n", p->command, (long long)p->done, (long long)p->total,
                label, t);
    } else {
        fprintf(stderr, "vq %s: [%lld] %s (%.1f s)\n", p->command, (long long)p->done, label, t);
    }
    fflush(stderr);
}

void vqp_clear(vqp *p)
{
    if (p->quiet || !p->tty) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

void vqp_end(vqp *p)
{
    if (p->quiet) return;
    const double t = now_s() - p->t0;
    if (p->tty) fprintf(stderr, "\r\033[K");
    else fprintf(stderr, "vq %s: done, %lld steps in %.1f s\n", p->command, (long long)p->done, t);
    fflush(stderr);
}
