/*===- kernels.h - hand-written CPU kernels called by generated code ------===*
 *
 * Generated code calls these with plain pointers into the arena; shapes are
 *passed as 64-bit integers. Every kernel writes its outputs completely (no
 *accumulation into existing contents) and checks the data-dependent assumptions
 *it makes (ids and labels in range), reporting a violation through dtk_fail,
 *which the runtime provides.
 *
 *===----------------------------------------------------------------------------===*/

#ifndef DTK_KERNELS_H
#define DTK_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Reports a fault in the data (an id or label out of range) and does not
/// return. Defined by the runtime (libdtrt), which prints it and exits with
/// status 1.
void dtk_fail(const char *message) __attribute__((noreturn));

/// A range of iterations of a parallel loop: [begin, end) of its `n`.
typedef void (*dtk_body)(void *ctx, int64_t begin, int64_t end);

/// Runs body over [0, n) split into one contiguous range per thread of the
/// kernels' pool, the caller running the first, and returns when all are
/// done. Below 2 * grain iterations, or with one thread, the caller runs it
/// whole. The ranges depend only on n and the thread count, so a kernel
/// whose ranges share no reduction gives the same bits on any thread count.
void dtk_parallel_for(int64_t n, int64_t grain, dtk_body body, void *ctx);

/// Sizes the pool (the runtime's --threads; 1: no workers, the default).
/// Call it while no kernel runs.
void dtk_set_threads(int threads);
int dtk_threads(void);

/// C = op(A) op(B) for `batch` consecutive matrices; op(A) is M x K, op(B) is K
/// x N. A is stored M x K (K x M when trans_a), B is stored K x N (N x K when
/// trans_b).
void dtk_matmul_f32(const float *a, const float *b, float *c, int64_t batch,
                    int64_t m, int64_t n, int64_t k, int32_t trans_a,
                    int32_t trans_b);
/// dtk_matmul_f32 plus `bias` (N values) added to every row of every C.
void dtk_matmul_bias_f32(const float *a, const float *b, const float *bias,
                         float *c, int64_t batch, int64_t m, int64_t n,
                         int64_t k, int32_t trans_a, int32_t trans_b);

/// Softmax of x viewed as [outer, n, inner] along the middle dimension.
void dtk_softmax_f32(const float *x, float *y, int64_t outer, int64_t n,
                     int64_t inner);

/// Layer norm of each of `rows` rows of `cols` values (biased variance).
void dtk_layer_norm_f32(const float *x, const float *w, const float *b,
                        float *y, int64_t rows, int64_t cols, float eps);
/// Gradients of dtk_layer_norm_f32 given dy; statistics are recomputed.
void dtk_layer_norm_grad_f32(const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float *db, int64_t rows,
                             int64_t cols, float eps);

/// RMS norm (LLaMA's): each row times 1/sqrt(mean(x^2) + eps), times w.
void dtk_rms_norm_f32(const float *x, const float *w, float *y, int64_t rows,
                      int64_t cols, float eps);
/// Gradients of dtk_rms_norm_f32 given dy; statistics are recomputed.
void dtk_rms_norm_grad_f32(const float *x, const float *w, const float *dy,
                           float *dx, float *dw, int64_t rows, int64_t cols,
                           float eps);

/// Rotary position embedding of x viewed as [outer, t, d] (d even): the pairs
/// (i, i + d/2) of row p rotate by p * f_i, f_i = theta^(-2i/d), or back with
/// `inverse`. factor != 1 scales f_i as Hugging Face's rope_scaling does
/// (dt.rope's `scaling`): all of them with original == 0 ("linear"), else by
/// wavelength, LLaMA 3's rule with low_freq_factor and high_freq_factor.
void dtk_rope_f32(const float *x, float *y, int64_t outer, int64_t t,
                  int64_t d, float theta, float factor, float low_freq_factor,
                  float high_freq_factor, float original, int32_t inverse);

/// 2-D convolution (dt.conv2d), NCHW: y [n, o, oh, ow] from x [n, c, h, w] and
/// w [o, c / groups, kh, kw] with strides (sh, sw), zero padding (ph, pw),
/// dilation (dh, dw) and groups. The gradients take the same sizes: dx from
/// dy and w, dw from x and dy (both overwritten).
void dtk_conv2d_f32(const float *x, const float *w, float *y, int64_t n,
                    int64_t c, int64_t h, int64_t wd, int64_t o, int64_t kh,
                    int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw,
                    int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                    int64_t groups);
void dtk_conv2d_input_grad_f32(const float *dy, const float *w, float *dx,
                               int64_t n, int64_t c, int64_t h, int64_t wd,
                               int64_t o, int64_t kh, int64_t kw, int64_t oh,
                               int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                               int64_t pw, int64_t dh, int64_t dw,
                               int64_t groups);
void dtk_conv2d_weight_grad_f32(const float *x, const float *dy, float *dw_out,
                                int64_t n, int64_t c, int64_t h, int64_t wd,
                                int64_t o, int64_t kh, int64_t kw, int64_t oh,
                                int64_t ow, int64_t sh, int64_t sw, int64_t ph,
                                int64_t pw, int64_t dh, int64_t dw,
                                int64_t groups);

/// 2-D pooling (dt.max_pool2d, dt.avg_pool2d) over `planes` planes of h x w
/// (samples x channels) into oh x ow, windows kh x kw with strides (sh, sw)
/// and padding (ph, pw); max skips the padding, average counts it. The
/// gradients overwrite dx.
void dtk_max_pool2d_f32(const float *x, float *y, int64_t planes, int64_t h,
                        int64_t w, int64_t oh, int64_t ow, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                        int64_t pw);
void dtk_max_pool2d_grad_f32(const float *x, const float *dy, float *dx,
                             int64_t planes, int64_t h, int64_t w, int64_t oh,
                             int64_t ow, int64_t kh, int64_t kw, int64_t sh,
                             int64_t sw, int64_t ph, int64_t pw);
void dtk_avg_pool2d_f32(const float *x, float *y, int64_t planes, int64_t h,
                        int64_t w, int64_t oh, int64_t ow, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                        int64_t pw);
void dtk_avg_pool2d_grad_f32(const float *dy, float *dx, int64_t planes,
                             int64_t h, int64_t w, int64_t oh, int64_t ow,
                             int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                             int64_t ph, int64_t pw);

/// Inverted dropout (dt.dropout): y = x / (1 - p) where element e's draw
/// (dtk/philox.h: group g / 4 of seed, site and step; word g % 4) is at least
/// p 2^32, else 0. The local tensor is four nested runs, outermost first, of
/// n0..n3 elements whose global indices g step by s0..s3 from `base`.
void dtk_dropout_f32(const float *x, float *y, int64_t n0, int64_t n1,
                     int64_t n2, int64_t n3, int64_t s0, int64_t s1,
                     int64_t s2, int64_t s3, int64_t base, int64_t seed,
                     int64_t site, int64_t step, float p);

/// out[i, :] = table[ids[i], :] for n ids into a [count, width] table.
void dtk_embedding_f32(const float *table, const int32_t *ids, float *out,
                       int64_t n, int64_t count, int64_t width);
/// dtable = 0, then dtable[ids[i], :] += dout[i, :].
void dtk_embedding_grad_f32(const int32_t *ids, const float *dout,
                            float *dtable, int64_t n, int64_t count,
                            int64_t width);

/// Mean softmax cross-entropy over rows whose label is >= 0 (0 if none).
void dtk_cross_entropy_f32(const float *logits, const int32_t *labels,
                           float *loss, int64_t rows, int64_t classes);
/// dlogits = (softmax - onehot) * dloss / count on labelled rows, 0 elsewhere.
void dtk_cross_entropy_grad_f32(const float *logits, const int32_t *labels,
                                const float *dloss, float *dlogits,
                                int64_t rows, int64_t classes);
/// Number of labelled rows whose arg-max (first maximum) is the label.
void dtk_count_correct_f32(const float *logits, const int32_t *labels,
                           float *correct, int64_t rows, int64_t classes);

/* Vocabulary parallelism: each rank holds `count` rows (or classes) of `total`,
 * starting at `first`. */

/// dtk_embedding_f32 on rows [first, first + count) of a table of `total`
/// rows: ids in the block read their row, the others zeros.
void dtk_embedding_shard_f32(const float *table, const int32_t *ids, float *out,
                             int64_t n, int64_t first, int64_t count,
                             int64_t total, int64_t width);
/// Rows [first, first + count) of dtk_embedding_grad_f32's result.
void dtk_embedding_grad_shard_f32(const int32_t *ids, const float *dout,
                                  float *dtable, int64_t n, int64_t first,
                                  int64_t count, int64_t total, int64_t width);
/// stats[k * rows + r], k = 0..3: the block's maximum logit (-inf if none),
/// sum of exp(logit - maximum), the label's logit if the label is in the block
/// (else 0), the global index of its first maximum (-1 if none); for logits of
/// classes [first, first + classes) of `total`. Unlabelled rows get (-inf, 0,
/// 0, -1).
void dtk_class_stats_f32(const float *logits, const int32_t *labels,
                         float *stats, int64_t rows, int64_t classes,
                         int64_t first, int64_t total);
/// dtk_cross_entropy_f32 from the stats of `blocks` blocks ([blocks, 4, rows]).
void dtk_cross_entropy_stats_f32(const float *stats, const int32_t *labels,
                                 float *loss, int64_t blocks, int64_t rows);
/// dtk_cross_entropy_grad_f32 for classes [first, first + classes) of `total`,
/// the log-sum-exp from the stats of every block.
void dtk_cross_entropy_grad_shard_f32(const float *logits,
                                      const int32_t *labels, const float *stats,
                                      const float *dloss, float *dlogits,
                                      int64_t blocks, int64_t rows,
                                      int64_t classes, int64_t first,
                                      int64_t total);
/// dtk_count_correct_f32 from the stats of every block.
void dtk_count_correct_stats_f32(const float *stats, const int32_t *labels,
                                 float *correct, int64_t blocks, int64_t rows);

/// Scaled dot-product attention over `slices` independent [t, d] slices:
/// O, and each query row's natural log-sum-exp of its scaled, masked scores
/// into `lse` ([slices, t]).
void dtk_attention_f32(const float *q, const float *k, const float *v, float *o,
                       float *lse, int64_t slices, int64_t t, int64_t d,
                       int32_t causal);
/// Its gradients, given the forward's O and log-sum-exp: the probabilities
/// are exp(s - lse), and each row's sum_j P_j dP_j is dO . O.
void dtk_attention_grad_f32(const float *q, const float *k, const float *v,
                            const float *o, const float *lse, const float *dout,
                            float *dq, float *dk, float *dv, int64_t slices,
                            int64_t t, int64_t d, int32_t causal);

#ifdef __cplusplus
}
#endif

#endif /* DTK_KERNELS_H */
