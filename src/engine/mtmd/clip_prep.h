/* Image resizing for projectors: a separable resampling filter with the arithmetic of Pillow's
 * Image.resize (filter weights normalized per output pixel, 22-bit fixed point, a horizontal
 * pass then a vertical one, each rounded to 8 bits), which is what the models' own
 * preprocessors and the GGUF ecosystem's reference implementation use. */
#ifndef ENGINE_MTMD_CLIP_PREP_H
#define ENGINE_MTMD_CLIP_PREP_H

#include <stdint.h>

/* Resizes RGB8 src (sw x sh) to dst (dw x dh) with the bilinear (triangle) filter, widened
 * when downscaling. ERR_INVALID for a size of 0 or above 65536, ERR_NOMEM. Thread-safe. */
int clip_prep_resize(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dw,
                     uint32_t dh);

/* The same with Pillow's bicubic filter (a = -0.5), as Qwen2-VL's preprocessor resizes. */
int clip_prep_resize_bicubic(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst,
                             uint32_t dw, uint32_t dh);

/* Fits RGB8 src (sw x sh) into a side x side square: scaled by min(side/sw, side/sh) (sizes
 * rounded up, at most side), centred on black. ERR_INVALID, ERR_NOMEM as above. */
int clip_prep_fit(const uint8_t *src, uint32_t sw, uint32_t sh, uint32_t side, uint8_t *dst);

#endif
