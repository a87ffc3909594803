/* Kernels of the recurrent layers of hybrid models: the causal short convolution over a
 * per-sequence tail of past inputs (LFM2's gated short-conv blocks, and the conv in front of
 * Mamba-2 and Gated DeltaNet scans), the gated delta rule and the Mamba-2 scan. One token at a
 * time, so a token's result is the same however its sequence was chunked or batched. Scalar
 * references here; the two scans, where the time goes, also have AVX2, AVX-512 and NEON
 * variants (x86/ssm_avx2.c, x86/ssm_avx512.c, arm/ssm_neon.c), installed once per process by kernels_init
 * (engine/kernels.c) like every other kernel table. Not the layers' projections (ordinary weight products,
 * model_forward.c). */
#ifndef ENGINE_SSM_H
#define ENGINE_SSM_H

/* One token through a depthwise causal convolution of d_conv + 1 taps, channels [c0, c1):
 * for each channel c, out[c] = sum over k of window[k] * w[c * (d_conv + 1) + k], where the
 * window is the channel's d_conv past inputs tail[c * d_conv ..] (oldest first) followed by
 * x[c]; the sum runs k = 0 upwards in float with one fused multiply-add per tap, as the
 * reference's x86 build computes it. The tail then drops its oldest input and appends x[c].
 * tail: (n_ch, d_conv) floats, updated in place; w: (n_ch, d_conv + 1); x, out: (n_ch).
 * out may not alias x or tail. Cannot fail. */
void ssm_conv_step_ref(int c0, int c1, int d_conv, float *tail, const float *x, const float *w,
                       float *out);

/* Head widths the delta-rule kernels accept (Qwen3.5 uses 128). */
#define SSM_D_STATE_MAX 256

/* y = x / max(|x|, ~sqrt(eps)) the way the reference computes it for Gated DeltaNet queries and
 * keys: an RMS norm with epsilon eps / n (squares summed in double), then times 1 / sqrt(n).
 * y may be x. Cannot fail. */
void ssm_l2norm_ref(int n, const float *x, float eps, float *y);

/* One token through one head of the gated delta rule (Gated DeltaNet), with the reference's
 * state layout: state holds the head's (n, n) matrix S transposed, row j = column j of S.
 * S = S * decay; then for each j: d[j] = (v[j] - dot(row j, k)) * beta and row j += d[j] * k;
 * then out[j] = dot(row j, q) * scale. The dots add the float products i = 0 upwards in
 * double (the reference's portable code), the row update is one fused multiply-add per element. k and q are
 * the head's key and query (already L2-normalized), v its value.
 * out may not alias the inputs. Cannot fail. */
void ssm_delta_step_ref(int n, float *state, const float *q, const float *k, const float *v,
                        float decay, float beta, float scale, float *out);

/* One token through one Mamba-2 head (selective state space, scalar decay): for each of its
 * head_dim channels i, the channel's state row (n floats) becomes state * decay +
 * b * (x[i] * dt) (a product and a sum, rounded apart as the reference does) and y[i] is the
 * sum over the row of state * c, in float with one fused multiply-add per element. state:
 * (head_dim, n); b, c: the head's group's (n); x, y: (head_dim). Cannot fail. */
void ssm_ssd_step_ref(int head_dim, int n, float *state, const float *x, const float *b,
                      const float *c, float decay, float dt, float *y);

/* The scans of the selected kernel set. Every variant sums in its own fixed order, so a given
 * set gives the same bits for a token whatever its batch. */
struct ssm_kernels {
    void (*delta_step)(int n, float *state, const float *q, const float *k, const float *v,
                       float decay, float beta, float scale, float *out);
    void (*ssd_step)(int head_dim, int n, float *state, const float *x, const float *b,
                     const float *c, float decay, float dt, float *y);
};

/* Installs k as the set ssm_get returns; kernels_init calls it once, before any worker runs. */
void ssm_select(const struct ssm_kernels *k);

#if defined(__x86_64__) || defined(__i386__)
/* The AVX2 scans, in the reference's AVX2 summation order. Cannot fail. */
const struct ssm_kernels *ssm_avx2_kernels(void);

/* The AVX-512 scans, in the reference's AVX-512 summation order. Cannot fail. */
const struct ssm_kernels *ssm_avx512_kernels(void);
#endif

#if defined(__aarch64__)
/* The NEON scans, in the reference's ARM summation order. Cannot fail. */
const struct ssm_kernels *ssm_neon_kernels(void);
#endif

/* The selected set (the references before kernels_init). Cannot fail. */
const struct ssm_kernels *ssm_get(void);

/* The scalar references, for tests. Cannot fail. */
const struct ssm_kernels *ssm_ref_kernels(void);

#endif
