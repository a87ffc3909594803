/* Which activation conversions each weight product reads: the weights that consume one
 * activation matrix grouped by the dot type their kernels take, one slot per type, fixed at
 * load for every layer's blocks (attention, recurrent, dense or expert FFN) and the output. */
#include "engine/model/model_plan.h"

#include "engine/matmul.h"
#include "engine/quants/quants.h"

#include <string.h>

/* Groups the weights reading one activation matrix by dot type. */
static int plan_build(struct qplan *p, const struct wmat *const *ws, int n, size_t *row_cap,
                      struct errmsg *err)
{
    memset(p, 0, sizeof *p);
    p->n_w = n;
    for (int i = 0; i < n; i++) {
        uint32_t dt = quant_traits_of(ws[i]->type)->dot_type;
        size_t rb = matmul_input_row_bytes(ws[i]->type, ws[i]->n_in);
        uint32_t rnd = QUANT_F32;
        if (dt == QUANT_F32 && (ws[i]->type == QUANT_F16 || ws[i]->type == QUANT_BF16))
            rnd = ws[i]->type;
        if (rb == 0)
            return errmsg_set(err, ERR_UNSUPPORTED, "no input conversion for weight type %s",
                              gguf_type_name(ws[i]->type));
        int s = 0;
        while (s < p->n_slots && (p->slot_type[s] != dt || p->slot_round[s] != rnd))
            s++;
        if (s == p->n_slots) {
            p->slot_type[s] = dt;
            p->slot_round[s] = rnd;
            p->slot_row_bytes[s] = rb;
            p->n_slots++;
        }
        p->w[i] = ws[i];
        p->w_slot[i] = s;
        if (rb > *row_cap) *row_cap = rb;
    }
    return ERR_OK;
}

/* The router, the experts (every expert has the first one's types and shapes, checked at load)
 * and the shared expert. */
static int plan_moe(struct engine_model *m, struct layer *L, size_t *cap, struct errmsg *err)
{
    const struct wmat *r[1] = {&L->gate_inp}, *gu[2] = {&L->exp_gate[0], &L->exp_up[0]};
    const struct wmat *d[1] = {&L->exp_down[0]};
    // ReLU^2 experts (nemotron_h_moe) read up alone, into the gate buffer the activation reads
    const bool is_relu2 = m->feat.relu2_ffn;
    const struct wmat *up[1] = {&L->exp_up[0]}, *sup[1] = {&L->sh_up};
    int rc = plan_build(&L->plan_router, r, 1, cap, err);
    if (rc == ERR_OK)
        rc = plan_build(&L->plan_exp_gu, is_relu2 ? up : gu, is_relu2 ? 1 : 2, cap, err);
    if (rc == ERR_OK) rc = plan_build(&L->plan_exp_down, d, 1, cap, err);
    if (rc == ERR_OK && m->feat.n_ff_shexp > 0) {
        // the shared expert's gate (qwen35moe) reads the same rows as its gate and up
        const struct wmat *sgu[3] = {&L->sh_gate, &L->sh_up, &L->sh_gate_inp};
        const struct wmat *sd[1] = {&L->sh_down};
        if (is_relu2)
            rc = plan_build(&L->plan_sh_gu, sup, 1, cap, err);
        else
            rc = plan_build(&L->plan_sh_gu, sgu, L->sh_gate_inp.data ? 3 : 2, cap, err);
        if (rc == ERR_OK) rc = plan_build(&L->plan_sh_down, sd, 1, cap, err);
    }
    return rc;
}

int model_plan_all(struct engine_model *m, struct errmsg *err)
{
    size_t cap = 0;
    int rc = ERR_OK;
    for (int il = 0; il < m->info.n_layer && rc == ERR_OK; il++) {
        struct layer *L = &m->layers[il];
        const struct wmat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        const struct wmat *gu[2] = {&L->w_gate, &L->w_up};
        const struct wmat *o[1] = {&L->wo}, *down[1] = {&L->w_down};
        const struct wmat *cin[2] = {&L->conv_in, &L->gdn_z}, *cout[1] = {&L->conv_out};
        const struct wmat *ab[2] = {&L->gdn_beta, &L->gdn_alpha};
        if (L->is_recr) {
            rc = plan_build(&L->plan_conv_in, cin, L->gdn_z.data ? 2 : 1, &cap, err);
            if (rc == ERR_OK) rc = plan_build(&L->plan_conv_out, cout, 1, &cap, err);
            if (rc == ERR_OK && L->gdn_beta.data) rc = plan_build(&L->plan_ab, ab, 2, &cap, err);
        }
        if (rc == ERR_OK && layer_has_kv(L)) {
            rc = plan_build(&L->plan_qkv, qkv, 3, &cap, err);
            if (rc == ERR_OK) rc = plan_build(&L->plan_o, o, 1, &cap, err);
        }
        if (L->no_ffn) continue;
        if (rc == ERR_OK && L->gate_inp.data) { // lfm2moe's leading layers are dense
            rc = plan_moe(m, L, &cap, err);
            continue;
        }
        // ReLU^2 has no gate: up alone, into the gate buffer the activation reads
        const struct wmat *up[1] = {&L->w_up};
        if (rc == ERR_OK && m->feat.relu2_ffn) rc = plan_build(&L->plan_gu, up, 1, &cap, err);
        if (rc == ERR_OK && !m->feat.relu2_ffn) rc = plan_build(&L->plan_gu, gu, 2, &cap, err);
        if (rc == ERR_OK) rc = plan_build(&L->plan_down, down, 1, &cap, err);
    }
    const struct wmat *out[1] = {&m->output};
    if (rc == ERR_OK) rc = plan_build(&m->plan_out, out, 1, &cap, err);
    m->sc.slot_row_cap = (cap + 63) & ~(size_t)63;
    return rc;
}
