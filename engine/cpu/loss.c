/* Softmax cross-entropy over class logits. */
#include <math.h>

#include "cpu/cpu_ops.h"

// logits, dlogits: (n, k); labels: (n); dlogits may be NULL; correct may be NULL
double ct_cpu_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int n, int k,
                           float grad_scale, long *correct)
{
    double loss = 0.0;
    long hits = 0;
#pragma omp parallel for schedule(static) reduction(+ : loss, hits)
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        int label = labels[i], best = 0;
        /* subtracting the row max keeps exp in range; the first maximum is the prediction */
        for (int j = 1; j < k; j++) {
            if (z[j] > z[best]) best = j;
        }
        const float zmax = z[best];
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += exp((double)z[j] - zmax);
        int valid = label >= 0 && label < k;
        /* an out-of-range label poisons the loss instead of reading out of bounds */
        loss += valid ? log(sum) - ((double)z[label] - zmax) : NAN;
        hits += valid && best == label;
        if (dlogits) {
            float *d = dlogits + (size_t)i * k;
            for (int j = 0; j < k; j++) {
                double p = exp((double)z[j] - zmax) / sum;
                d[j] = (float)((p - (j == label)) * grad_scale);
            }
        }
    }
    if (correct) *correct = hits;
    return loss;
}
