/*===- dropout.c - inverted dropout with layout-independent masks ---------===*
 *
 * y = x * keep / (1 - p), keep drawn by Philox from the element's index in
 * the optimizer step's whole batch (dtk/philox.h), not from where it lives:
 * a rank's slice of a split tensor gets the masks the whole tensor would,
 * and so does a micro-batch of an accumulating step.
 *
 * The local tensor is walked as up to four nested runs (outermost first):
 * run r has n[r] elements whose global indices step by s[r]. The compiler
 * merges dimensions that are whole into their outer neighbour's run, so a
 * tensor split along k dimensions other than the first has k + 1 runs.
 *
 *===----------------------------------------------------------------------===*/

#include "dtk/kernels.h"
#include "dtk/philox.h"

struct dropout_args {
  const float *x;
  float *y;
  int64_t n[4], s[4];
  int64_t base;
  uint64_t seed, step;
  uint32_t site, threshold;
  float scale;
};

/* Elements [begin, end) of the innermost run of outer position `o` (an index
 * over the three outer runs). */
static void dropout_rows(void *ctx, int64_t begin, int64_t end) {
  const struct dropout_args *a = ctx;
  int64_t inner = a->n[3];
  for (int64_t o = begin; o < end; ++o) {
    int64_t i0 = o / (a->n[1] * a->n[2]), rest = o % (a->n[1] * a->n[2]);
    int64_t i1 = rest / a->n[2], i2 = rest % a->n[2];
    int64_t first = a->base + i0 * a->s[0] + i1 * a->s[1] + i2 * a->s[2];
    const float *x = a->x + o * inner;
    float *y = a->y + o * inner;
    uint32_t draws[4];
    int64_t group = -1;
    for (int64_t j = 0; j < inner; ++j) {
      uint64_t g = (uint64_t)(first + j * a->s[3]);
      if ((int64_t)(g >> 2) != group) {
        group = (int64_t)(g >> 2);
        dtk_dropout_draws(a->seed, a->site, a->step, (uint64_t)group, draws);
      }
      y[j] = draws[g & 3] >= a->threshold ? x[j] * a->scale : 0.0f;
    }
  }
}

void dtk_dropout_f32(const float *x, float *y, int64_t n0, int64_t n1,
                     int64_t n2, int64_t n3, int64_t s0, int64_t s1,
                     int64_t s2, int64_t s3, int64_t base, int64_t seed,
                     int64_t site, int64_t step, float p) {
  struct dropout_args a = {x,
                           y,
                           {n0, n1, n2, n3},
                           {s0, s1, s2, s3},
                           base,
                           (uint64_t)seed,
                           (uint64_t)step,
                           (uint32_t)site,
                           dtk_dropout_threshold(p),
                           1.0f / (1.0f - p)};
  int64_t outer = n0 * n1 * n2;
  /* About 16K elements per range. */
  int64_t grain = n3 >= 16384 ? 1 : 16384 / (n3 > 0 ? n3 : 1);
  dtk_parallel_for(outer, grain, dropout_rows, &a);
}
