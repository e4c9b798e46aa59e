/* crc32c.h — CRC-32C (Castagnoli), the checksum of veloxquant files.
 * Internal. */
#ifndef VQ_CRC32C_H
#define VQ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes, continuing from `crc` (0 to start a new checksum):
 * vq_crc32c(vq_crc32c(0, a, n), b, m) == vq_crc32c(0, a ++ b, n + m).
 * Check value: vq_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t vq_crc32c(uint32_t crc, const void *data, size_t n);

#endif
