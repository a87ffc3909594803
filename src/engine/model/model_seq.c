/* Sequences: each owns its KV cache (F16 rows per attention layer; rings for sliding-window
 * layers), a hybrid's recurrent state with its checkpoints, and the logits of its last
 * decode. Views borrow their caches from the caller. The forward pass writes them
 * (model_forward.c); loading is model.c. */
#include "engine/model/model.h"

#include "engine/model/model_internal.h"
#include "engine/model/model_recr.h"
#include "util/checked.h"
#include "util/mem.h"

#include <stdint.h>
#include <string.h>

#define N_CTX_MAX (1 << 24)

/* Positions a sliding-window layer's ring holds in a sequence of n_ctx: the window plus one
 * batch, so a batch's first token still finds its window after the batch's keys are stored. */
static int swa_cap_of(const struct engine_model *m, int n_ctx)
{
    if (m->n_layer_swa == 0) return n_ctx;
    const int64_t cap = (int64_t)m->feat.n_swa + ENGINE_BATCH_MAX;
    return cap < n_ctx ? (int)cap : n_ctx;
}

/* Bytes of one of the two caches (K or V) for n_ctx positions; 0 on overflow. */
static size_t cache_bytes(const struct engine_model *m, int n_ctx)
{
    const size_t n_glob = (size_t)(m->info.n_layer - m->n_layer_swa - m->n_layer_nokv);
    size_t a, b, n;
    if (!size_mul(n_glob, (size_t)n_ctx, &a) ||
        !size_mul((size_t)m->n_layer_swa, (size_t)swa_cap_of(m, n_ctx), &b) ||
        !size_add(a, b, &n) || !size_mul(n, (size_t)m->kv_dim, &n) || !size_mul(n, 2, &n))
        return 0;
    return n;
}

/* Bytes of a hybrid's recurrent state and of its checkpoints (0 and 0 for other models);
 * false on overflow. */
static bool state_bytes(const struct engine_model *m, size_t *state, size_t *ckpt)
{
    *state = m->info.state_bytes;
    return size_mul(*state, (size_t)m->n_ckpt, ckpt);
}

size_t engine_seq_bytes(const struct engine_model *m, int n_ctx)
{
    if (n_ctx < 1 || n_ctx > N_CTX_MAX) return 0;
    size_t kv = cache_bytes(m, n_ctx), total, state, ckpt;
    if (kv == 0 && m->n_layer_nokv < m->info.n_layer) return 0; // else overflow
    if (!state_bytes(m, &state, &ckpt) || !size_add(kv, kv, &total) ||
        !size_add(total, state, &total) || !size_add(total, ckpt, &total) ||
        !size_add(total, (size_t)m->n_ckpt * sizeof(int32_t), &total) ||
        !size_add(total, (size_t)m->info.n_vocab * sizeof(float), &total) ||
        !size_add(total, sizeof(struct engine_seq), &total) ||
        (m->feat.is_mrope && !size_add(total, (size_t)n_ctx * sizeof(int32_t), &total)))
        return 0;
    return total;
}

/* Where the recurrent state starts in a view's memory: after K and V, 4-byte aligned. */
static size_t view_state_offset(size_t kv2)
{
    return (kv2 + 3) & ~(size_t)3;
}

size_t engine_kv_bytes(const struct engine_model *m, int n_ctx)
{
    if (n_ctx < 1 || n_ctx > N_CTX_MAX) return 0;
    size_t kv = cache_bytes(m, n_ctx), total;
    if (kv == 0 && m->n_layer_nokv < m->info.n_layer) return 0; // else overflow
    if (!size_add(kv, kv, &total)) return 0;
    if (m->n_layer_recr > 0 && !size_add(view_state_offset(total), m->info.state_bytes, &total))
        return 0;
    return total;
}

int engine_seq_new_view(struct engine_model *m, struct engine_seq **out)
{
    struct engine_seq *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    s->m = m;
    s->is_view = true;
    *out = s;
    return ERR_OK;
}

int engine_seq_bind(struct engine_seq *s, void *kv, size_t kv_bytes, int n_ctx)
{
    const size_t need = engine_kv_bytes(s->m, n_ctx);
    if (!s->is_view || need == 0 || kv_bytes < need || !kv || ((uintptr_t)kv & 1u) != 0)
        return ERR_INVALID;
    const size_t kv2 = 2 * cache_bytes(s->m, n_ctx);
    if (s->m->n_layer_recr > 0 && ((uintptr_t)kv & 3u) != 0) return ERR_INVALID;
    s->k_cache = kv;
    s->v_cache = (uint16_t *)kv + kv2 / 2 / sizeof(uint16_t);
    s->state = s->m->n_layer_recr > 0 ? (float *)((uint8_t *)kv + view_state_offset(kv2)) : NULL;
    s->n_ctx = n_ctx;
    s->swa_cap = swa_cap_of(s->m, n_ctx);
    s->pos = 0;
    s->rope_pos = 0;
    s->has_logits = false;
    return ERR_OK;
}

int engine_seq_new(struct engine_model *m, int n_ctx, struct engine_seq **out)
{
    if (engine_seq_bytes(m, n_ctx) == 0) return ERR_INVALID;
    struct engine_seq *s = mem_calloc(1, sizeof *s);
    if (!s) return ERR_NOMEM;
    size_t kv = cache_bytes(m, n_ctx);
    s->m = m;
    s->n_ctx = n_ctx;
    s->swa_cap = swa_cap_of(m, n_ctx);
    // Not zeroed: a position is always written before it is read.
    s->k_cache = mem_alloc(kv > 0 ? kv : 1); // a hybrid may have no attention layer
    s->v_cache = mem_alloc(kv > 0 ? kv : 1);
    s->logits = mem_alloc((size_t)m->info.n_vocab * sizeof *s->logits);
    if (m->feat.is_mrope) s->rope_next = mem_alloc((size_t)n_ctx * sizeof *s->rope_next);
    bool state_ok = true;
    if (m->n_layer_recr > 0) {
        size_t state = 0, ckpt = 0;
        (void)state_bytes(m, &state, &ckpt); // engine_seq_bytes checked it
        s->state = mem_alloc(state);
        s->ckpt = mem_alloc(ckpt);
        s->ckpt_pos = mem_alloc((size_t)m->n_ckpt * sizeof *s->ckpt_pos);
        state_ok = s->state && s->ckpt && s->ckpt_pos;
        for (int i = 0; state_ok && i < m->n_ckpt; i++)
            s->ckpt_pos[i] = -1;
    }
    if (!s->k_cache || !s->v_cache || !s->logits || (m->feat.is_mrope && !s->rope_next) ||
        !state_ok) {
        engine_seq_free(s);
        return ERR_NOMEM;
    }
    *out = s;
    return ERR_OK;
}

void engine_seq_free(struct engine_seq *s)
{
    if (!s) return;
    if (!s->is_view) {
        mem_free(s->k_cache);
        mem_free(s->v_cache);
        mem_free(s->state);
    }
    mem_free(s->ckpt);
    mem_free(s->ckpt_pos);
    mem_free(s->logits);
    mem_free(s->rope_next);
    mem_free(s);
}

int engine_seq_pos(const struct engine_seq *s)
{
    return s->pos;
}

int engine_seq_n_ctx(const struct engine_seq *s)
{
    return s->n_ctx;
}

int engine_seq_keepable(const struct engine_seq *s, int n_keep)
{
    if (n_keep < 0) n_keep = 0;
    if (n_keep >= s->pos) return s->pos;
    // The next position needs its window's keys: n_keep - n_swa + 1 onwards, which the rings
    // still hold only if they are not older than pos - swa_cap.
    const int64_t oldest = (int64_t)s->pos - s->swa_cap; // first position still in the rings
    if (s->m->n_layer_swa > 0 && oldest > 0 && (int64_t)n_keep - s->m->feat.n_swa + 1 < oldest)
        return 0;
    return s->m->n_layer_recr > 0 ? model_recr_keepable(s, n_keep) : n_keep;
}

void engine_seq_truncate(struct engine_seq *s, int n_keep)
{
    n_keep = engine_seq_keepable(s, n_keep);
    if (n_keep < s->pos) {
        if (s->m->n_layer_recr > 0) model_recr_restore(s, n_keep);
        s->pos = n_keep;
        s->rope_pos = n_keep > 0 && s->rope_next ? s->rope_next[n_keep - 1] : n_keep;
        s->has_logits = false;
    }
}

const float *engine_seq_logits(const struct engine_seq *s)
{
    return s->has_logits ? s->logits : NULL;
}
