/* Shared pieces of the synthetic projector writers; see clip_synth_gen.h. */
#include "engine/mtmd/clip_synth_gen.h"

#include "engine/gguf/gguf.h"
#include "engine/quants/quants.h"
#include "util/checked.h"
#include "util/mem.h"

static float uniform(uint64_t *s) // splitmix64 -> [-1, 1)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 4503599627370496.0 - 1.0);
}

int synth_add(struct synth_gen *g, const char *name, uint32_t type, const int64_t ne[4],
              float scale, float center)
{
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    const struct quant_traits *tr = quant_traits_of(type);
    size_t row_bytes = 0, bytes;
    if (!tr || !tr->from_float || quant_row_bytes(type, ne[0], &row_bytes) != ERR_OK ||
        !size_mul(row_bytes, (size_t)(n / ne[0]), &bytes))
        return errmsg_set(g->err, ERR_INVALID, "%s: type %s does not fit rows of %lld", name,
                          gguf_type_name(type), (long long)ne[0]);
    float *x = mem_alloc((size_t)ne[0] * sizeof(float));
    uint8_t *q = mem_alloc(bytes ? bytes : 1);
    int rc = x && q ? ERR_OK : ERR_NOMEM;
    for (int64_t r = 0; rc == ERR_OK && r < n / ne[0]; r++) {
        for (int64_t i = 0; i < ne[0]; i++)
            x[i] = center + scale * uniform(&g->rng);
        tr->from_float(x, q + (size_t)r * row_bytes, ne[0]);
    }
    int n_dims = ne[3] > 1 ? 4 : ne[2] > 1 ? 3 : ne[1] > 1 ? 2 : 1;
    if (rc == ERR_OK) rc = gguf_writer_add_tensor(g->w, name, type, n_dims, ne, q, bytes);
    mem_free(x);
    mem_free(q);
    if (rc != ERR_OK) return errmsg_set(g->err, rc, "tensor %s: %s", name, err_str(rc));
    return ERR_OK;
}

int synth_vec(struct synth_gen *g, const char *name, int64_t n, float scale, float center)
{
    const int64_t ne[4] = {n, 1, 1, 1};
    return synth_add(g, name, QUANT_F32, ne, scale, center);
}
