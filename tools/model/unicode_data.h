/* unicode_data.h — code point classes for the pre-tokenizer (tables in the
 * generated unicode_data.c). */
#ifndef VQM_UNICODE_DATA_H
#define VQM_UNICODE_DATA_H

#include <stdint.h>

typedef struct vqm_cp_range { uint32_t lo, hi; } vqm_cp_range;
extern const vqm_cp_range vqm_unicode_letter[];
extern const int vqm_unicode_letter_count;
extern const vqm_cp_range vqm_unicode_number[];
extern const int vqm_unicode_number_count;

#endif
