/* The recurrent layers of hybrid families in synthetic models. lfm2: attention on every third
 * layer from the second (1, 4, 7, ...), so a small model has conv layers before, between and
 * after attention (the last layer of a 4-layer model recurs); short convolutions of 3 taps as
 * the released models have, written per layer in head_count_kv (0: recurrent). */
#include "engine/gguf/synth_internal.h"

#include "engine/quants/quants.h"
#include "util/mem.h"

#include <stdio.h>
#include <string.h>

#define LFM2_L_CACHE 3

bool synth_is_hybrid(const char *arch)
{
    return arch && strcmp(arch, "lfm2") == 0;
}

bool synth_hybrid_layer_recurs(const struct synth *s, int il)
{
    (void)s;
    return il % 3 != 1;
}

int synth_hybrid_keys(struct synth *s)
{
    const struct synth_params *p = s->p;
    int32_t *kv = mem_alloc((size_t)p->n_layer * sizeof *kv);
    if (!kv) return ERR_NOMEM;
    for (int il = 0; il < p->n_layer; il++)
        kv[il] = synth_hybrid_layer_recurs(s, il) ? 0 : p->n_head_kv;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", p->arch);
    int rc = gguf_writer_add_arr(s->w, key, GGUF_VALUE_I32, kv, p->n_layer);
    mem_free(kv);
    if (rc == ERR_OK) rc = synth_add_key_u32(s, "shortconv.l_cache", LFM2_L_CACHE);
    return rc;
}

int synth_hybrid_layer(struct synth *s, int il)
{
    const int64_t e = s->p->n_embd;
    char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    int rc = synth_add_mat(s, NAME("shortconv.in_proj.weight"), e, 3 * e, s->type);
    // the taps stay F32 as converters keep them; about unit gain over the window
    if (rc == ERR_OK)
        rc = synth_add_tensor(s, NAME("shortconv.conv.weight"), LFM2_L_CACHE, e, QUANT_F32, 0.6f,
                              0.0f);
    if (rc == ERR_OK) rc = synth_add_mat(s, NAME("shortconv.out_proj.weight"), e, e, s->type);
#undef NAME
    return rc;
}
