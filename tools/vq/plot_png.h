/* plot_png.h — a scatter plot written as a PNG by a few hundred lines of C:
 * no plotting library, no zlib, so `--plot` works on any machine that builds
 * the tool (and in CI). Labels use a built-in 3x5 pixel font (lower case,
 * digits and a few symbols; upper case is drawn as lower case). */
#ifndef VQ_TOOL_PLOT_PNG_H
#define VQ_TOOL_PLOT_PNG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vq_plot_point {
    double x, y;
    const char *label;  /* drawn beside the point; NULL for none */
    int series;         /* colour index 0..5 */
} vq_plot_point;

typedef struct vq_plot {
    const char *title, *x_label, *y_label;
    bool log_y;         /* decades on the y axis (points with y <= 0 are drawn at the bottom) */
    const vq_plot_point *points;
    int n_points;
    const char *series_names[6];  /* legend entries (NULL: none) */
} vq_plot;

/* Renders p (720 x 480, 8-bit palette PNG, uncompressed deflate blocks) to
 * path. Returns 0, or -1 with a sentence in err. */
int vq_plot_png(const char *path, const vq_plot *p, char *err, size_t cap);

#endif
