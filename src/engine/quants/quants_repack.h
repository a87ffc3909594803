/* The row-interleaved (repacked) weight layouts that only the matrix-product tiles read, and
 * the repack between them and the file's layouts (quants_repack.c). Include from
 * engine/quants and its per-ISA folders only. */
#ifndef ENGINE_QUANTS_QUANTS_REPACK_H
#define ENGINE_QUANTS_QUANTS_REPACK_H

#include <stdint.h>

/* Row-interleaved layouts (quants_repack.c). A group of 16 rows takes 16 rows' bytes; per
 * 32-element block b it holds the 16 rows' half scales (32 bytes), then 64-byte chunks whose
 * 4-byte lane r holds 4 consecutive quants of row r: Q8_0_R16 8 chunks of elements 4k..4k+3
 * stored + 128 (unsigned), Q4_0_R16 4 chunks of the packed bytes qs[4k..4k+3] (low nibbles
 * elements 4k.., high nibbles 16+4k..). Q5_0_R16 puts the fifth bits between the scales and
 * Q4_0_R16's 4 chunks, as 8 64-bit masks: bit 4r+e of mask k is the fifth bit of the element
 * whose low nibble is byte 4r+e of chunk k & 3 (low nibbles for k < 4, high ones after), so a
 * masked byte add completes a chunk's quants (stored q + 16, unsigned). n_out is a multiple
 * of 16. */
void q8_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);
void q4_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);
void q5_0_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);

/* Q4_K_R16: per 256-element super-block, 16 rows' d (32 bytes), dmin (32 bytes), their 6-bit
 * scales and mins as 256 values (scale of sub-block s, row r: value 16s + r; min: value
 * 128 + 32(s / 2) + 2r + s % 2, so each pair of sub-blocks' mins is a row-interleaved int16
 * pair) stored in 128 bytes of low nibbles (value j in byte j % 128, high nibble for j >= 128)
 * and 64 bytes of high bit pairs (value j in byte j % 64 at bit 2(j / 64)), then for each
 * 64-element pair p eight 64-byte chunks k whose lane r holds Q4_K's packed bytes
 * qs[32p + 4k .. + 3] of row r (low nibbles sub-block 2p, high ones 2p + 1). 16 rows' bytes. */
#define Q4_K_R16_QS 256 // offset of the quants in a group's super-block
void q4_K_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);

/* Q6_K_R16: per 256-element super-block, 16 rows' d (32 bytes), their int8 scales (256
 * bytes: sub-block j of row r in byte 16j + r), then 32 chunks of low nibbles, chunk
 * 4(j / 2) + k holding in lane r row r's elements 16j + 4k .. + 3 for even j (low nibbles)
 * and 16(j + 1) + 4k .. for the odd sub-block after it (high nibbles), then 16 chunks of high
 * bit pairs, chunk 4(j / 4) + k holding in lane r the top 2 bits of elements 16j + 4k .. + 3
 * at bits 2(j % 4). Quants stored q + 32 (0..63). 16 rows' bytes. */
#define Q6_K_R16_SC 32   // offset of the scales in a group's super-block
#define Q6_K_R16_QL 288  // of the low nibbles
#define Q6_K_R16_QH 2336 // of the high bit pairs
void q6_K_repack_r16(const void *src, void *dst, int64_t n_out, int64_t n_in);

/* The repacked formats, one table in quants_repack.c: the repacked type made from type (type
 * itself when there is none), the type a repacked type was made from (type itself when it is
 * not one); the repack of a matrix into packed (ERR_INVALID when packed is no repacked type);
 * block r of a group's block (group_block: one 32- or 256-element block of 16 rows) back in
 * the base type's layout, byte for byte the block the repack read. */
uint32_t quant_r16_packed_type(uint32_t type);
uint32_t quant_r16_base_type(uint32_t type);
int quant_r16_repack(uint32_t packed, const void *src, void *dst, int64_t n_out, int64_t n_in);
void quant_r16_unpack_block(uint32_t type, const void *group_block, int r, void *blk);

#endif
