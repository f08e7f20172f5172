/*===- philox.h - the counter-based generator of dropout's masks -*- C -*-===*
 *
 * Part of dt, a compiler for declarative distributed training.
 *
 *===----------------------------------------------------------------------===*
 *
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011; the generator cuRAND and PyTorch's CUDA dropout use): four
 * 32-bit words from a 128-bit counter and a 64-bit key, with no state. A
 * mask drawn from the coordinates of an element is the same wherever the
 * element lives, which is what makes dropout independent of the layout.
 * Header-only C so the CPU kernel, the compiler's interpreter and a CUDA
 * kernel share one definition.
 *
 *===----------------------------------------------------------------------===*/

#ifndef DTK_PHILOX_H
#define DTK_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define DTK_PHILOX_FN static inline __host__ __device__
#else
#define DTK_PHILOX_FN static inline
#endif

/* out = Philox4x32-10(counter, key). */
DTK_PHILOX_FN void dtk_philox4x32(const uint32_t counter[4],
                                  const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0;
    c1 = (uint32_t)p1;
    c2 = n2;
    c3 = (uint32_t)p0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* The four draws of dropout element group `group` (elements 4 group ..
 * 4 group + 3 of the step's batch, docs/operations.md): counter (group, step,
 * site), key seed. */
DTK_PHILOX_FN void dtk_dropout_draws(uint64_t seed, uint32_t site,
                                     uint64_t step, uint64_t group,
                                     uint32_t out[4]) {
  uint32_t counter[4] = {(uint32_t)group, (uint32_t)(group >> 32),
                         (uint32_t)step, site};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  dtk_philox4x32(counter, key, out);
}

/* Whether a draw keeps its element: dropped with probability p, that is when
 * the draw is below p 2^32. */
DTK_PHILOX_FN uint32_t dtk_dropout_threshold(float p) {
  double t = (double)p * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

#undef DTK_PHILOX_FN

#endif /* DTK_PHILOX_H */
