/* Encoder loading: bert.* hyperparameters, the llama.cpp BERT tensor names located and
 * shape-checked, the GELU table and scratch for one batch. The forward pass is in
 * bert_forward.c. */
#include "engine/bert/bert.h"

#include "engine/bert/bert_internal.h"
#include "engine/kernels.h"
#include "engine/matmul.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"
#include "util/checked.h"
#include "util/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N_EMBD_MAX  (1 << 16)
#define N_LAYER_MAX 1024
#define N_HEAD_MAX  1024
#define N_FF_MAX    (1 << 20)
#define N_VOCAB_MAX (1 << 24)
#define N_POS_MAX   (1 << 20)
#define N_BATCH_MAX (1 << 20)

/* Loading context: the encoder being built and where messages go. */
struct ld {
    struct engine_encoder *e;
    struct errmsg *err;
};

bool engine_encoder_handles(const struct gguf *g)
{
    struct str arch;
    return gguf_get_str(g, "general.architecture", &arch) == ERR_OK &&
           (str_eq_cstr(arch, "bert") || str_eq_cstr(arch, "nomic-bert"));
}

/* bert.<suffix> as an int in [lo, hi]; def < 0 means required. */
static int hp_int(const struct ld *l, const char *suffix, int64_t def, int64_t lo, int64_t hi,
                  int *out)
{
    char key[96];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", l->e->arch_name, suffix);
    int rc = gguf_get_i64(l->e->gguf, key, &v);
    if (rc == ERR_NOT_FOUND) {
        if (def < 0) return errmsg_set(l->err, ERR_FORMAT, "missing key '%s'", key);
        v = def;
    } else if (rc != ERR_OK) {
        return errmsg_set(l->err, ERR_FORMAT, "key '%s': not an integer", key);
    }
    if (v < lo || v > hi)
        return errmsg_set(l->err, ERR_FORMAT, "key '%s': %lld is outside %lld..%lld", key,
                          (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return ERR_OK;
}

/* Pooling: the parameter, else <arch>.pooling_type, else mean (what BERT sentence models
 * use): none, a vector per input, or for bert the reranker head. */
static int load_pooling(const struct ld *l, enum engine_pooling requested)
{
    int pooling = ENGINE_POOLING_MEAN;
    int rc = ERR_OK;
    if (requested != ENGINE_POOLING_UNSPECIFIED)
        pooling = (int)requested;
    else
        rc = hp_int(l, "pooling_type", ENGINE_POOLING_MEAN, 0, 4, &pooling);
    if (rc != ERR_OK) return rc;
    if (pooling == ENGINE_POOLING_RANK && l->e->is_nomic)
        return errmsg_set(l->err, ERR_UNSUPPORTED,
                          "rank pooling is not supported for nomic-bert (no classification head)");
    if (pooling < ENGINE_POOLING_NONE || pooling > ENGINE_POOLING_RANK)
        return errmsg_set(l->err, ERR_UNSUPPORTED,
                          "pooling type %d is not supported (none, mean, cls, last and rank are)",
                          pooling);
    l->e->info.pooling = (enum engine_pooling)pooling;
    return ERR_OK;
}

/* nomic-bert's rotary embedding: rotated dims and base (NeoX pairs, as llama.cpp runs it). */
static int load_rope(const struct ld *l)
{
    struct engine_encoder *e = l->e;
    char key[96];
    const int hd = e->info.n_embd / e->info.n_head;
    int rc = hp_int(l, "rope.dimension_count", hd, 2, hd, &e->n_rot);
    if (rc != ERR_OK) return rc;
    if (e->n_rot % 2 != 0)
        return errmsg_set(l->err, ERR_FORMAT, "rope.dimension_count %d is odd", e->n_rot);
    snprintf(key, sizeof key, "%s.rope.freq_base", e->arch_name);
    rc = gguf_get_f32(e->gguf, key, &e->rope_base);
    if (rc == ERR_NOT_FOUND)
        e->rope_base = 10000.0f;
    else if (rc != ERR_OK || !(e->rope_base > 0.0f))
        return errmsg_set(l->err, ERR_FORMAT, "key '%s': not a positive number", key);
    return ERR_OK;
}

static int load_hparams(const struct ld *l, const struct engine_encoder_params *p)
{
    struct engine_encoder_info *in = &l->e->info;
    const struct gguf *g = l->e->gguf;
    int n_head_kv = 0, n_ctx = 0;
    bool causal = false;
    int rc = hp_int(l, "embedding_length", -1, 1, N_EMBD_MAX, &in->n_embd);
    if (rc == ERR_OK) rc = hp_int(l, "block_count", -1, 1, N_LAYER_MAX, &in->n_layer);
    if (rc == ERR_OK) rc = hp_int(l, "feed_forward_length", -1, 1, N_FF_MAX, &in->n_ff);
    if (rc == ERR_OK) rc = hp_int(l, "attention.head_count", -1, 1, N_HEAD_MAX, &in->n_head);
    if (rc == ERR_OK)
        rc = hp_int(l, "attention.head_count_kv", in->n_head, 1, N_HEAD_MAX, &n_head_kv);
    if (rc == ERR_OK)
        rc = hp_int(l, "context_length", l->e->is_nomic ? -1 : N_POS_MAX, 1, N_POS_MAX, &n_ctx);
    if (rc == ERR_OK) rc = load_pooling(l, p ? p->pooling : ENGINE_POOLING_UNSPECIFIED);
    if (rc != ERR_OK) return rc;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", l->e->arch_name);
    rc = gguf_get_f32(g, key, &in->norm_eps);
    if (rc == ERR_NOT_FOUND)
        in->norm_eps = 1e-12f; // BERT's value
    else if (rc != ERR_OK || !(in->norm_eps >= 0.0f) || !(in->norm_eps < 1.0f))
        return errmsg_set(l->err, ERR_FORMAT, "key '%s': not an epsilon", key);
    snprintf(key, sizeof key, "%s.attention.causal", l->e->arch_name);
    if (gguf_get_bool(g, key, &causal) == ERR_OK && causal)
        return errmsg_set(l->err, ERR_UNSUPPORTED, "causal attention in an encoder");
    if (n_head_kv != in->n_head)
        return errmsg_set(l->err, ERR_UNSUPPORTED, "head_count_kv %d differs from head_count %d",
                          n_head_kv, in->n_head);
    if (in->n_embd % in->n_head != 0 || in->n_embd / in->n_head > BERT_HEAD_DIM_MAX)
        return errmsg_set(l->err, ERR_FORMAT, "embedding_length %d does not split into %d heads",
                          in->n_embd, in->n_head);
    in->head_dim = in->n_embd / in->n_head;
    in->n_ctx_train = n_ctx;
    return l->e->is_nomic ? load_rope(l) : ERR_OK;
}

/* A 2-D matrix of n_in columns; n_out < 0 accepts any row count in 1..-n_out. need_dot: it is
 * multiplied (else only rows are looked up, which needs to_float only). */
static int load_wmat(const struct ld *l, const char *name, int layer, int64_t n_in, int64_t n_out,
                     bool need_dot, struct bert_wmat *w)
{
    char nb[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(l->e->gguf, name, layer, nb, sizeof nb);
    if (!t) return errmsg_set(l->err, ERR_FORMAT, "missing tensor '%s'", nb);
    bool rows_ok = n_out < 0 ? t->ne[1] >= 1 && t->ne[1] <= -n_out : t->ne[1] == n_out;
    if (t->ne[0] != n_in || !rows_ok || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(l->err, ERR_FORMAT,
                          "tensor '%s': shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                          gguf_tensor_name(t, nb, sizeof nb), (long long)t->ne[0],
                          (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                          (long long)n_in, (long long)(n_out < 0 ? -n_out : n_out));
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->to_float || (need_dot && !tr->vec_dot))
        return errmsg_set(l->err, ERR_UNSUPPORTED, "tensor '%s': type %s is not supported",
                          gguf_tensor_name(t, nb, sizeof nb),
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    if (n_in % tr->block_len != 0)
        return errmsg_set(l->err, ERR_UNSUPPORTED,
                          "tensor '%s': rows of %lld are not whole %s blocks",
                          gguf_tensor_name(t, nb, sizeof nb), (long long)n_in, tr->name);
    *w = (struct bert_wmat){.data = t->data, .type = t->type, .n_in = n_in, .n_out = t->ne[1]};
    return ERR_OK;
}

/* A vector of n floats: the mapped data when it is aligned F32, else a converted copy. */
static int load_vec(const struct ld *l, const char *name, int layer, int64_t n, bool required,
                    const float **out)
{
    char nb[96];
    const struct gguf_tensor *t = gguf_find_layer_tensor(l->e->gguf, name, layer, nb, sizeof nb);
    *out = NULL;
    if (!t) return required ? errmsg_set(l->err, ERR_FORMAT, "missing tensor '%s'", nb) : ERR_OK;
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return errmsg_set(l->err, ERR_FORMAT, "tensor '%s': shape [%lld, %lld], expected [%lld]",
                          gguf_tensor_name(t, nb, sizeof nb), (long long)t->ne[0],
                          (long long)t->ne[1], (long long)n);
    if (t->type == QUANT_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        return ERR_OK;
    }
    const struct quant_traits *tr = quant_traits_of(t->type);
    if (!tr || !tr->to_float || n % tr->block_len != 0)
        return errmsg_set(l->err, ERR_UNSUPPORTED, "tensor '%s': type %s is not supported",
                          gguf_tensor_name(t, nb, sizeof nb),
                          gguf_type_name(t->type) ? gguf_type_name(t->type) : "unknown");
    struct engine_encoder *e = l->e;
    void **owned = mem_realloc(e->owned, (size_t)(e->n_owned + 1) * sizeof *owned);
    if (!owned) return errmsg_set(l->err, ERR_NOMEM, "out of memory");
    e->owned = owned;
    float *v = mem_alloc((size_t)n * sizeof *v);
    if (!v) return errmsg_set(l->err, ERR_NOMEM, "out of memory");
    e->owned[e->n_owned++] = v;
    tr->to_float(t->data, v, n);
    *out = v;
    return ERR_OK;
}

/* Q/K/V as one fused matrix (attn_qkv) or three, each with an optional bias. */
static int load_qkv(const struct ld *l, int il)
{
    struct bert_layer *L = &l->e->layers[il];
    const int64_t d = l->e->info.n_embd;
    char nb[96];
    if (gguf_find_layer_tensor(l->e->gguf, "attn_qkv.weight", il, nb, sizeof nb)) {
        int rc = load_wmat(l, "attn_qkv.weight", il, d, 3 * d, true, &L->wqkv);
        return rc == ERR_OK ? load_vec(l, "attn_qkv.bias", il, 3 * d, false, &L->bqkv) : rc;
    }
    int rc = load_wmat(l, "attn_q.weight", il, d, d, true, &L->wq);
    if (rc == ERR_OK) rc = load_wmat(l, "attn_k.weight", il, d, d, true, &L->wk);
    if (rc == ERR_OK) rc = load_wmat(l, "attn_v.weight", il, d, d, true, &L->wv);
    if (rc == ERR_OK) rc = load_vec(l, "attn_q.bias", il, d, false, &L->bq);
    if (rc == ERR_OK) rc = load_vec(l, "attn_k.bias", il, d, false, &L->bk);
    if (rc == ERR_OK) rc = load_vec(l, "attn_v.bias", il, d, false, &L->bv);
    return rc;
}

static int load_layer(const struct ld *l, int il)
{
    struct bert_layer *L = &l->e->layers[il];
    const int64_t d = l->e->info.n_embd, f = l->e->info.n_ff;
    int rc = load_qkv(l, il);
    if (rc == ERR_OK) rc = load_wmat(l, "attn_output.weight", il, d, d, true, &L->wo);
    if (rc == ERR_OK && l->e->is_nomic)
        rc = load_wmat(l, "ffn_gate.weight", il, d, f, true, &L->w_gate);
    if (rc == ERR_OK) rc = load_wmat(l, "ffn_up.weight", il, d, f, true, &L->w_up);
    if (rc == ERR_OK) rc = load_wmat(l, "ffn_down.weight", il, f, d, true, &L->w_down);
    if (rc == ERR_OK) rc = load_vec(l, "attn_output.bias", il, d, false, &L->bo);
    if (rc == ERR_OK) rc = load_vec(l, "ffn_up.bias", il, f, false, &L->b_up);
    if (rc == ERR_OK) rc = load_vec(l, "ffn_down.bias", il, d, false, &L->b_down);
    if (rc == ERR_OK) rc = load_vec(l, "attn_output_norm.weight", il, d, true, &L->attn_norm_w);
    if (rc == ERR_OK) rc = load_vec(l, "attn_output_norm.bias", il, d, true, &L->attn_norm_b);
    if (rc == ERR_OK) rc = load_vec(l, "layer_output_norm.weight", il, d, true, &L->out_norm_w);
    if (rc == ERR_OK) rc = load_vec(l, "layer_output_norm.bias", il, d, true, &L->out_norm_b);
    return rc;
}

static int load_globals(const struct ld *l)
{
    struct engine_encoder *e = l->e;
    const int64_t d = e->info.n_embd;
    int rc = load_wmat(l, "token_embd.weight", -1, d, -N_VOCAB_MAX, false, &e->tok_embd);
    if (rc == ERR_OK && !e->is_nomic)
        rc = load_wmat(l, "position_embd.weight", -1, d, -N_POS_MAX, false, &e->pos_embd);
    if (rc == ERR_OK && gguf_find_tensor(e->gguf, "token_types.weight"))
        rc = load_wmat(l, "token_types.weight", -1, d, -N_VOCAB_MAX, false, &e->type_embd);
    if (rc == ERR_OK) rc = load_vec(l, "token_embd_norm.weight", -1, d, true, &e->embd_norm_w);
    if (rc == ERR_OK) rc = load_vec(l, "token_embd_norm.bias", -1, d, true, &e->embd_norm_b);
    if (rc != ERR_OK) return rc;
    e->info.n_vocab = (int)e->tok_embd.n_out;
    if (e->pos_embd.data && e->pos_embd.n_out < e->info.n_ctx_train)
        e->info.n_ctx_train = (int)e->pos_embd.n_out;
    enum gguf_value_type et;
    int64_t n_tokens;
    if (gguf_get_arr(e->gguf, "tokenizer.ggml.tokens", &et, &n_tokens) == ERR_OK &&
        n_tokens > e->info.n_vocab)
        return errmsg_set(l->err, ERR_FORMAT,
                          "vocabulary has %lld tokens but token_embd only %d rows",
                          (long long)n_tokens, e->info.n_vocab);
    return ERR_OK;
}

/* Rank pooling's classification head, as llama.cpp's bert graph applies it: an optional dense
 * `cls` (n_embd -> n_embd, + bias, tanh) and an optional `cls.output` (n_embd -> n_cls_out,
 * + bias); n_cls_out is the number of <arch>.classifier.output_labels (1 when absent). */
static int load_head(const struct ld *l)
{
    struct engine_encoder *e = l->e;
    const int64_t d = e->info.n_embd;
    char key[96];
    enum gguf_value_type et;
    int64_t n_labels = 0;
    e->info.n_out = e->info.n_embd;
    if (e->info.pooling != ENGINE_POOLING_RANK) return ERR_OK;
    snprintf(key, sizeof key, "%s.classifier.output_labels", e->arch_name);
    int rc = gguf_get_arr(e->gguf, key, &et, &n_labels);
    if (rc == ERR_NOT_FOUND || (rc == ERR_OK && n_labels == 0))
        n_labels = 1;
    else if (rc != ERR_OK || n_labels > d)
        return errmsg_set(l->err, ERR_FORMAT, "key '%s': not an array of 1..%lld labels", key,
                          (long long)d);
    e->info.n_cls_out = (int)n_labels;
    const bool has_cls = gguf_find_tensor(e->gguf, "cls.weight") != NULL;
    const bool has_out = gguf_find_tensor(e->gguf, "cls.output.weight") != NULL;
    if (!has_cls && !has_out)
        return errmsg_set(l->err, ERR_FORMAT,
                          "rank pooling needs a classification head ('cls.weight' or "
                          "'cls.output.weight')");
    rc = ERR_OK;
    if (has_cls) rc = load_wmat(l, "cls.weight", -1, d, d, true, &e->cls);
    if (rc == ERR_OK && has_cls) rc = load_vec(l, "cls.bias", -1, d, false, &e->cls_b);
    if (rc == ERR_OK && has_out)
        rc = load_wmat(l, "cls.output.weight", -1, d, n_labels, true, &e->cls_out);
    if (rc == ERR_OK && has_out)
        rc = load_vec(l, "cls.output.bias", -1, n_labels, false, &e->cls_out_b);
    if (rc == ERR_OK) e->info.n_out = e->info.n_cls_out;
    return rc;
}

/* Groups the weights reading one activation matrix by dot type. */
static int plan_build(struct bert_plan *p, const struct bert_wmat *const *ws, int n,
                      size_t *row_cap, struct errmsg *err)
{
    memset(p, 0, sizeof *p);
    p->n_w = n;
    for (int i = 0; i < n; i++) {
        uint32_t dt = quant_traits_of(ws[i]->type)->dot_type;
        size_t rb = matmul_input_row_bytes(ws[i]->type, ws[i]->n_in);
        if (rb == 0)
            return errmsg_set(err, ERR_UNSUPPORTED, "no input conversion for weight type %s",
                              gguf_type_name(ws[i]->type));
        int s = 0;
        while (s < p->n_slots && p->slot_type[s] != dt)
            s++;
        if (s == p->n_slots) {
            p->slot_type[s] = dt;
            p->slot_row_bytes[s] = rb;
            p->n_slots++;
        }
        p->w[i] = ws[i];
        p->w_slot[i] = s;
        if (rb > *row_cap) *row_cap = rb;
    }
    return ERR_OK;
}

static int plan_all(struct engine_encoder *e, struct errmsg *err)
{
    size_t cap = 0;
    int rc = ERR_OK;
    for (int il = 0; il < e->info.n_layer && rc == ERR_OK; il++) {
        struct bert_layer *L = &e->layers[il];
        const struct bert_wmat *qkv[3] = {&L->wq, &L->wk, &L->wv}, *fused[1] = {&L->wqkv};
        const struct bert_wmat *up2[2] = {&L->w_gate, &L->w_up};
        const struct bert_wmat *o[1] = {&L->wo}, *up[1] = {&L->w_up}, *down[1] = {&L->w_down};
        rc = L->wqkv.data ? plan_build(&L->plan_qkv, fused, 1, &cap, err)
                          : plan_build(&L->plan_qkv, qkv, 3, &cap, err);
        if (rc == ERR_OK) rc = plan_build(&L->plan_o, o, 1, &cap, err);
        if (rc == ERR_OK)
            rc = L->w_gate.data ? plan_build(&L->plan_up, up2, 2, &cap, err)
                                : plan_build(&L->plan_up, up, 1, &cap, err);
        if (rc == ERR_OK) rc = plan_build(&L->plan_down, down, 1, &cap, err);
    }
    const struct bert_wmat *cls[1] = {&e->cls}, *cls_out[1] = {&e->cls_out};
    if (rc == ERR_OK && e->cls.data) rc = plan_build(&e->plan_cls, cls, 1, &cap, err);
    if (rc == ERR_OK && e->cls_out.data) rc = plan_build(&e->plan_cls_out, cls_out, 1, &cap, err);
    e->sc.slot_row_cap = (cap + 63) & ~(size_t)63;
    for (int il = 0; il < e->info.n_layer && rc == ERR_OK; il++) {
        const struct bert_layer *L = &e->layers[il];
        const int n[4] = {L->plan_qkv.n_slots, L->plan_o.n_slots, L->plan_up.n_slots,
                          L->plan_down.n_slots};
        for (int k = 0; k < 4; k++)
            e->sc.n_slots = n[k] > e->sc.n_slots ? n[k] : e->sc.n_slots;
    }
    return rc;
}

/* Adds n elements of elem bytes, 64-byte aligned, to a running size. */
static bool carve(size_t *total, size_t n, size_t elem, size_t *offset)
{
    size_t bytes;
    if (!size_mul(n, elem, &bytes) || !size_add(bytes, 63, &bytes)) return false;
    *offset = *total;
    return size_add(*total, bytes & ~(size_t)63, total);
}

static bool has_fused(const struct engine_encoder *e)
{
    for (int il = 0; il < e->info.n_layer; il++)
        if (e->layers[il].wqkv.data) return true;
    return false;
}

static int alloc_scratch(struct engine_encoder *e, struct errmsg *err)
{
    struct bert_scratch *sc = &e->sc;
    const size_t B = (size_t)e->info.n_batch_tokens, d = (size_t)e->info.n_embd;
    const size_t f = (size_t)e->info.n_ff, rc = sc->slot_row_cap;
    struct {
        void **ptr;
        size_t n, elem;
    } parts[] = {
        {(void **)&sc->x, B * d, 4},
        {(void **)&sc->q, B * d, 4},
        {(void **)&sc->k, B * d, 4},
        {(void **)&sc->v, B * d, 4},
        {(void **)&sc->k16, B * d, 2},
        {(void **)&sc->vt, B * d, 4},
        {(void **)&sc->attn, B * d, 4},
        {(void **)&sc->proj, B * d, 4},
        {(void **)&sc->ff, B * f, 4},
        {(void **)&sc->ff_up, e->is_nomic ? B * f : 0, 4},
        {(void **)&sc->qkv, has_fused(e) ? B * 3 * d : 0, 4},
        {(void **)&sc->rope_cos, B * (size_t)(e->n_rot / 2), 4},
        {(void **)&sc->rope_sin, B * (size_t)(e->n_rot / 2), 4},
        {&sc->slot[0], B, rc},
        {&sc->slot[1], sc->n_slots > 1 ? B : 0, rc}, // only mixed-type plans need more
        {&sc->slot[2], sc->n_slots > 2 ? B : 0, rc},
        {(void **)&sc->row_input, B, 4},
        {(void **)&sc->in_start, B + 1, 4},
        {(void **)&sc->q_start, B + 1, 4},
        {(void **)&e->gelu, 65536, 4},
    };
    const size_t n_parts = sizeof parts / sizeof parts[0];
    size_t total = 0, offs[sizeof parts / sizeof parts[0]];
    for (size_t i = 0; i < n_parts; i++)
        if (!carve(&total, parts[i].n, parts[i].elem, &offs[i]))
            return errmsg_set(err, ERR_LIMIT, "batch scratch size overflows");
    uint8_t *mem = mem_alloc(total + 64);
    if (!mem)
        return errmsg_set(err, ERR_NOMEM, "out of memory for %zu bytes of batch scratch", total);
    e->scratch_mem = mem;
    e->info.scratch_bytes = total + 64;
    uint8_t *base = (uint8_t *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    for (size_t i = 0; i < n_parts; i++)
        *parts[i].ptr = base + offs[i];
    return ERR_OK;
}

/* ggml evaluates GELU through a table indexed by the input rounded to half, holding the
 * tanh approximation rounded to half (ggml-cpu.c, ggml_table_gelu_f16); reproducing it keeps
 * embeddings within rounding of the reference implementation. */
static void fill_gelu(float *tab)
{
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    for (uint32_t h = 0; h < 65536; h++) {
        const float x = ops_f16_to_f32((uint16_t)h);
        const float g = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x)));
        tab[h] = ops_f16_to_f32(ops_f32_to_f16(g));
    }
}

static int load_all(const struct ld *l, const struct engine_encoder_params *p)
{
    struct engine_encoder *e = l->e;
    if (!engine_encoder_handles(e->gguf))
        return errmsg_set(l->err, ERR_UNSUPPORTED,
                          "not an encoder architecture (bert, nomic-bert)");
    struct str arch = {"", 0};
    (void)gguf_get_str(e->gguf, "general.architecture", &arch);
    snprintf(e->arch_name, sizeof e->arch_name, "%.*s", (int)arch.len, arch.ptr);
    e->is_nomic = str_eq_cstr(arch, "nomic-bert");
    e->info.arch = e->arch_name;
    int rc = load_hparams(l, p);
    if (rc == ERR_OK) rc = load_globals(l);
    if (rc != ERR_OK) return rc;
    int n_batch = p && p->n_batch_tokens > 0 ? p->n_batch_tokens : ENGINE_ENCODER_BATCH_DEFAULT;
    if (!p || p->n_batch_tokens <= 0)
        n_batch = n_batch > e->info.n_ctx_train ? n_batch : e->info.n_ctx_train;
    if (n_batch > N_BATCH_MAX)
        return errmsg_set(l->err, ERR_INVALID, "batch of %d tokens is above %d", n_batch,
                          N_BATCH_MAX);
    e->info.n_batch_tokens = n_batch;
    e->layers = mem_calloc((size_t)e->info.n_layer, sizeof *e->layers);
    if (!e->layers) return errmsg_set(l->err, ERR_NOMEM, "out of memory");
    for (int il = 0; rc == ERR_OK && il < e->info.n_layer; il++)
        rc = load_layer(l, il);
    if (rc == ERR_OK) rc = load_head(l);
    if (rc == ERR_OK) rc = plan_all(e, l->err);
    if (rc == ERR_OK) rc = alloc_scratch(e, l->err);
    return rc;
}

int engine_encoder_load(const char *path, const struct engine_encoder_params *p,
                        struct engine_encoder **out, struct errmsg *err)
{
    kernels_init();
    if (p && p->n_batch_tokens < 0) return errmsg_set(err, ERR_INVALID, "negative batch size");
    struct engine_encoder *e = mem_calloc(1, sizeof *e);
    if (!e) return errmsg_set(err, ERR_NOMEM, "out of memory");
    const struct ld l = {.e = e, .err = err};
    int rc = gguf_open(path, &e->gguf, err);
    if (rc == ERR_OK) rc = load_all(&l, p);
    if (rc != ERR_OK) {
        engine_encoder_free(e);
        return rc;
    }
    fill_gelu(e->gelu);
    e->info.n_params = gguf_param_count(e->gguf);
    e->info.file_size = gguf_file_size(e->gguf);
    *out = e;
    return ERR_OK;
}

void engine_encoder_free(struct engine_encoder *e)
{
    if (!e) return;
    for (int i = 0; i < e->n_owned; i++)
        mem_free(e->owned[i]);
    mem_free(e->owned);
    mem_free(e->layers);
    mem_free(e->scratch_mem);
    gguf_close(e->gguf);
    mem_free(e);
}

const struct engine_encoder_info *engine_encoder_info(const struct engine_encoder *e)
{
    return &e->info;
}

const struct gguf *engine_encoder_gguf(const struct engine_encoder *e)
{
    return e->gguf;
}
