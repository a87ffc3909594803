/* Scalar reference kernels of the recurrent layers of hybrid models: the causal short
 * convolution over a per-sequence tail of past inputs (LFM2's gated short-conv blocks, and the
 * conv in front of Mamba-2 and Gated DeltaNet scans). One token at a time, so a token's result
 * is the same however its sequence was chunked or batched. Not the layers' projections (those
 * are ordinary weight products, model_forward.c). */
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

#endif
