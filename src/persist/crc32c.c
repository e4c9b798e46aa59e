/* crc32c.c — CRC-32C (Castagnoli), written here from the published algorithm.
 *
 * Where it comes from: the polynomial 0x1EDC6F41 (Castagnoli, Braeutigam and
 * Herrmann, "Optimization of cyclic redundancy-check codes with 24 and 32
 * parity bits", IEEE Trans. Commun. 1993), as used by iSCSI (RFC 3720,
 * section 12.1 and appendix B.4, whose test vectors tests/unit/test_calibration.c
 * checks) and SSE4.2's crc32 instruction. Reflected form: bits enter least
 * significant first, reflected polynomial 0x82F63B78, initial value and final
 * xor 0xFFFFFFFF. Computed by "slicing by 8" (Kounavis and Berry, Intel 2005):
 * eight 256-entry tables let one step consume eight bytes, ~1-2 GB/s in
 * portable C, which is enough: checksums run once per save or load. */
#include "persist/crc32c.h"

#include <pthread.h>

#define CRC32C_POLY 0x82F63B78u

static uint32_t table[8][256];

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Table 0 is the byte-at-a-time table; table k advances a byte's effect by k
 * more zero bytes. Built once (pthread_once). */
static void build_tables(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++) table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xFF];
}

uint32_t vq_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&tables_once, build_tables);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        /* little-endian assembly of the word, whatever the host order */
        const uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
            table[3][p[4]] ^ table[2][p[5]] ^ table[1][p[6]] ^ table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return ~c;
}
