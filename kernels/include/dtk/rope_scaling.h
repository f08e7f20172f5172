/*===- rope_scaling.h - Hugging Face's RoPE frequency scaling ----*- C -*-===*
 *
 * Part of dt, a compiler for declarative distributed training.
 *
 *===----------------------------------------------------------------------===*
 *
 * The inverse frequency of one rotary pair as Hugging Face's rope_scaling
 * changes it (dt.rope's `scaling`). Header-only C, so that the CPU kernel
 * and the CUDA kernel tabulate the same angles from one definition.
 *
 *===----------------------------------------------------------------------===*/

#ifndef DTK_ROPE_SCALING_H
#define DTK_ROPE_SCALING_H

#ifdef __CUDACC__
#define DTK_ROPE_FN static inline __host__ __device__
#else
#define DTK_ROPE_FN static inline
#endif

/* "linear" (original == 0) divides every inverse frequency by the factor;
 * "llama3" divides those of long wavelengths, keeps those of short ones and
 * blends the band between. factor == 1: no scaling. */
DTK_ROPE_FN double dtk_rope_scaled(double inv_freq, double factor,
                                   double low_freq_factor,
                                   double high_freq_factor, double original) {
  if (factor == 1.0)
    return inv_freq;
  if (original == 0.0)
    return inv_freq / factor;
  const double pi = 3.14159265358979323846;
  double wavelen = 2 * pi / inv_freq;
  if (wavelen > original / low_freq_factor)
    return inv_freq / factor;
  if (wavelen < original / high_freq_factor)
    return inv_freq;
  double smooth = (original / wavelen - low_freq_factor) /
                  (high_freq_factor - low_freq_factor);
  return (1 - smooth) * inv_freq / factor + smooth * inv_freq;
}

#undef DTK_ROPE_FN

#endif /* DTK_ROPE_SCALING_H */
