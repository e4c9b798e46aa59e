/* plot_png.c — the scatter plot of plot_png.h. The PNG is assembled by hand
 * from the PNG specification (W3C, 2003): signature, IHDR (8-bit palette),
 * PLTE, one IDAT holding a zlib stream (RFC 1950) of stored, uncompressed
 * deflate blocks (RFC 1951 section 3.2.4) with its Adler-32, IEND; each
 * chunk ends with the CRC-32 of ISO 3309 / ITU-T V.42 (reflected polynomial
 * 0xEDB88320), computed bit by bit here (a plot is written once). */
#include "plot_png.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 720, H = 480, ML = 80, MR = 160, MT = 40, MB = 56, SCALE = 2 };
enum { C_WHITE, C_BLACK, C_GRID, C_SERIES };

static const uint8_t palette[][3] = {
    {255, 255, 255}, {0, 0, 0}, {215, 215, 215},
    {31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189}, {255, 127, 14}, {23, 190, 207},
};

typedef struct canvas {
    uint8_t px[H][W];
} canvas;

static void dot(canvas *c, int x, int y, int color)
{
    if (x >= 0 && x < W && y >= 0 && y < H) c->px[y][x] = (uint8_t)color;
}

static void hline(canvas *c, int x0, int x1, int y, int color, int dash)
{
    for (int x = x0; x <= x1; x++)
        if (!dash || (x / dash) % 2 == 0) dot(c, x, y, color);
}

static void vline(canvas *c, int x, int y0, int y1, int color, int dash)
{
    for (int y = y0; y <= y1; y++)
        if (!dash || (y / dash) % 2 == 0) dot(c, x, y, color);
}

/* ---- the 3x5 font: five rows of three bits per glyph, top row first ---- */
typedef struct glyph {
    char ch;
    const char *rows;  /* 15 characters, '#' = ink */
} glyph;

static const glyph font[] = {
    {'0', "####.##.##.####"}, {'1', ".#.##..#..#.###"}, {'2', "###..#####..###"}, {'3', "###..####..####"},
    {'4', "#.##.####..#..#"}, {'5', "####..###..####"}, {'6', "####..####.####"}, {'7', "###..#..#..#..#"},
    {'8', "####.#####.####"}, {'9', "####.####..####"}, {'a', ".#.#.#####.##.#"}, {'b', "##.#.###.#.###."},
    {'c', "####..#..#..###"}, {'d', "##.#.##.##.###."}, {'e', "####..####..###"}, {'f', "####..####..#.."},
    {'g', "####..#.##.####"}, {'h', "#.##.#####.##.#"}, {'i', "###.#..#..#.###"}, {'j', "..#..#..##.####"},
    {'k', "#.##.###.#.##.#"}, {'l', "#..#..#..#..###"}, {'m', "#.########.##.#"}, {'n', "##.#.##.##.##.#"},
    {'o', ".#.#.##.##.#.#."}, {'p', "####.#####..#.."}, {'q', "####.##.####..#"}, {'r', "##.#.###.#.##.#"},
    {'s', ".###...#...###."}, {'t', "###.#..#..#..#."}, {'u', "#.##.##.##.####"}, {'v', "#.##.##.##.#.#."},
    {'w', "#.##.########.#"}, {'x', "#.##.#.#.#.##.#"}, {'y', "#.##.#.#..#..#."}, {'z', "###..#.#.#..###"},
    {'.', ".............#."}, {'-', "......###......"}, {'+', "....#.###.#...."}, {'/', "..#..#.#.#..#.."},
    {'(', ".#.#..#..#...#."}, {')', ".#...#..#..#.#."}, {':', "....#.....#...."}, {'=', "...###...###..."},
    {'_', "............###"}, {',', "..........#.#.."}, {'%', "#.#..#.#.#..#.#"}, {'*', "#.#.#.###.#.#.#"},
};

static const char *glyph_rows(char ch)
{
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    for (size_t i = 0; i < sizeof font / sizeof font[0]; i++)
        if (font[i].ch == ch) return font[i].rows;
    return NULL;  /* space and anything unknown: blank */
}

static bool ink(const char *rows, int r, int col) { return rows[r * 3 + col] == '#'; }

static int text_width(const char *s) { return (int)strlen(s) * 4 * SCALE; }

static void text(canvas *c, int x, int y, const char *s, int color)
{
    for (; *s; s++, x += 4 * SCALE) {
        const char *g = glyph_rows(*s);
        if (!g) continue;
        for (int r = 0; r < 5; r++)
            for (int col = 0; col < 3; col++)
                if (ink(g, r, col))
                    for (int dy = 0; dy < SCALE; dy++)
                        for (int dx = 0; dx < SCALE; dx++) dot(c, x + col * SCALE + dx, y + r * SCALE + dy, color);
    }
}

static void marker(canvas *c, int x, int y, int color)
{
    for (int dy = -4; dy <= 4; dy++)
        for (int dx = -4; dx <= 4; dx++)
            if (dx * dx + dy * dy <= 16) dot(c, x + dx, y + dy, color);
}

/* ---- PNG bytes ---- */
typedef struct out {
    FILE *f;
    bool ok;
} out;

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void chunk(out *o, const char type[4], const uint8_t *data, size_t n)
{
    uint8_t hdr[8], tail[4];
    be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    uint32_t crc = crc32_update(0, (const uint8_t *)type, 4);
    crc = crc32_update(crc, data, n);
    be32(tail, crc);
    o->ok = o->ok && fwrite(hdr, 1, 8, o->f) == 8 && (n == 0 || fwrite(data, 1, n, o->f) == n) &&
            fwrite(tail, 1, 4, o->f) == 4;
}

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (cap) vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static int write_png(const char *path, const canvas *c, char *err, size_t cap)
{
    /* raw scanlines: filter byte 0 + W palette indices */
    const size_t raw_n = (size_t)H * (W + 1);
    uint8_t *raw = malloc(raw_n);
    const size_t blocks = (raw_n + 65534) / 65535;
    const size_t z_n = 2 + raw_n + 5 * blocks + 4;
    uint8_t *z = malloc(z_n);
    if (!raw || !z) {
        free(raw);
        free(z);
        return fail(err, cap, "out of memory for the plot");
    }
    for (int y = 0; y < H; y++) {
        raw[(size_t)y * (W + 1)] = 0;
        memcpy(raw + (size_t)y * (W + 1) + 1, c->px[y], W);
    }
    size_t zp = 0;
    z[zp++] = 0x78;  /* CMF: deflate, 32K window */
    z[zp++] = 0x01;  /* FLG: no dictionary, check bits make 0x7801 % 31 == 0 */
    for (size_t off = 0; off < raw_n; off += 65535) {
        const size_t len = raw_n - off < 65535 ? raw_n - off : 65535;
        z[zp++] = off + len == raw_n ? 1 : 0;  /* BFINAL, BTYPE 00 (stored) */
        z[zp++] = (uint8_t)len;
        z[zp++] = (uint8_t)(len >> 8);
        z[zp++] = (uint8_t)~len;
        z[zp++] = (uint8_t)(~len >> 8);
        memcpy(z + zp, raw + off, len);
        zp += len;
    }
    uint32_t a = 1, b = 0;  /* Adler-32 of the uncompressed data */
    for (size_t i = 0; i < raw_n; i++) {
        a = (a + raw[i]) % 65521;
        b = (b + a) % 65521;
    }
    be32(z + zp, b << 16 | a);
    zp += 4;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(raw);
        free(z);
        return fail(err, cap, "cannot create '%s': %s", path, strerror(errno));
    }
    out o = {f, true};
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    o.ok = fwrite(sig, 1, 8, f) == 8;
    uint8_t ihdr[13];
    be32(ihdr, W);
    be32(ihdr + 4, H);
    ihdr[8] = 8;   /* bit depth */
    ihdr[9] = 3;   /* palette */
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    chunk(&o, "IHDR", ihdr, 13);
    chunk(&o, "PLTE", &palette[0][0], sizeof palette);
    chunk(&o, "IDAT", z, zp);
    chunk(&o, "IEND", NULL, 0);
    free(raw);
    free(z);
    if (fclose(f) != 0 || !o.ok) return fail(err, cap, "writing '%s' failed", path);
    return 0;
}

/* "1e-3" style label of 10^e; plain numbers near 1. */
static void decade_label(int e, char *buf, size_t n)
{
    if (e >= 0 && e <= 2) snprintf(buf, n, "%d", (int)lround(pow(10, e)));
    else snprintf(buf, n, "1e%d", e);
}

int vq_plot_png(const char *path, const vq_plot *p, char *err, size_t cap)
{
    if (p->n_points < 1) return fail(err, cap, "nothing to plot");
    canvas *c = malloc(sizeof *c);
    if (!c) return fail(err, cap, "out of memory for the plot");
    memset(c, C_WHITE, sizeof *c);
    /* ranges: x from 0; y in decades (log) or from 0 */
    double xmax = 0, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < p->n_points; i++) {
        xmax = fmax(xmax, p->points[i].x);
        if (!p->log_y || p->points[i].y > 0) {
            ymin = fmin(ymin, p->points[i].y);
            ymax = fmax(ymax, p->points[i].y);
        }
    }
    if (!isfinite(ymin)) ymin = ymax = 1;
    int xstep = xmax <= 5 ? 1 : xmax <= 10 ? 2 : 4;
    const int xtop = ((int)ceil(xmax * 1.05) + xstep - 1) / xstep * xstep;
    double y0, y1;
    if (p->log_y) {
        y0 = floor(log10(ymin));
        y1 = ceil(log10(ymax));
        if (y1 <= y0) y1 = y0 + 1;
    } else {
        y0 = 0;
        y1 = ymax > 0 ? ymax * 1.1 : 1;
    }
    const int px0 = ML, px1 = W - MR, py0 = H - MB, py1 = MT;
#define XPIX(x) (px0 + (int)lround((double)(x) / xtop * (px1 - px0)))
#define YPIX(v) (py0 - (int)lround(((v) - y0) / (y1 - y0) * (py0 - py1)))
    char buf[64];
    for (int xt = 0; xt <= xtop; xt += xstep) {
        vline(c, XPIX(xt), py1, py0, C_GRID, 3);
        snprintf(buf, sizeof buf, "%d", xt);
        text(c, XPIX(xt) - text_width(buf) / 2, py0 + 8, buf, C_BLACK);
    }
    if (p->log_y) {
        for (int e = (int)y0; e <= (int)y1; e++) {
            hline(c, px0, px1, YPIX(e), C_GRID, 3);
            decade_label(e, buf, sizeof buf);
            text(c, px0 - 8 - text_width(buf), YPIX(e) - 5, buf, C_BLACK);
        }
    } else {
        for (int k = 0; k <= 4; k++) {
            const double v = y0 + (y1 - y0) * k / 4;
            hline(c, px0, px1, YPIX(v), C_GRID, 3);
            snprintf(buf, sizeof buf, "%.3g", v);
            text(c, px0 - 8 - text_width(buf), YPIX(v) - 5, buf, C_BLACK);
        }
    }
    hline(c, px0, px1, py0, C_BLACK, 0);
    vline(c, px0, py1, py0, C_BLACK, 0);
    if (p->title) text(c, px0, 10, p->title, C_BLACK);
    if (p->x_label) text(c, (px0 + px1) / 2 - text_width(p->x_label) / 2, py0 + 30, p->x_label, C_BLACK);
    if (p->y_label) text(c, 8, py1 - 14 + 0 * MT, p->y_label, C_BLACK);
    for (int i = 0; i < p->n_points; i++) {
        const vq_plot_point *q = &p->points[i];
        const double v = p->log_y ? (q->y > 0 ? log10(q->y) : y0) : q->y;
        const int x = XPIX(q->x), y = YPIX(v), color = C_SERIES + (q->series % 6);
        marker(c, x, y, color);
        if (q->label) text(c, x + 7, y - 12, q->label, color);
    }
    for (int s = 0, row = 0; s < 6; s++) {
        if (!p->series_names[s]) continue;
        marker(c, px1 + 16, py1 + 10 + 18 * row, C_SERIES + s);
        text(c, px1 + 26, py1 + 5 + 18 * row, p->series_names[s], C_BLACK);
        row++;
    }
#undef XPIX
#undef YPIX
    const int rc = write_png(path, c, err, cap);
    free(c);
    return rc;
}
