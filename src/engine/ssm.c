/* Reference kernels of the recurrent layers (ssm.h). Plain C, one token per call; SIMD
 * variants, when they come, live beside the other ISA folders with their own selection. */
#include "engine/ssm.h"

#include <math.h>
#include <string.h>

void ssm_conv_step_ref(int c0, int c1, int d_conv, float *tail, const float *x, const float *w,
                       float *out)
{
    const int n_tap = d_conv + 1;
    for (int c = c0; c < c1; c++) {
        float *t = tail + (size_t)c * (size_t)d_conv;
        const float *wc = w + (size_t)c * (size_t)n_tap;
        float sum = 0.0f;
        for (int k = 0; k < d_conv; k++)
            sum = fmaf(t[k], wc[k], sum);
        sum = fmaf(x[c], wc[d_conv], sum);
        out[c] = sum;
        if (d_conv > 0) {
            memmove(t, t + 1, (size_t)(d_conv - 1) * sizeof *t);
            t[d_conv - 1] = x[c];
        }
    }
}
