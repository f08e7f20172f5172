/*===- cuda_kernels.h - hand-written GPU kernels, C ABI ---------*- C -*-===*
 *
 * Part of dt, a compiler for declarative distributed training.
 *
 *===----------------------------------------------------------------------===*
 *
 * The GPU counterparts of kernels.h for what a library does not do well.
 * Same shapes and semantics as the CPU kernels (test/unit/kernels/
 * CudaKernelTest.cpp checks each against its CPU twin); every pointer is
 * device memory, every call is asynchronous on `stream`. Results are
 * deterministic: no kernel sums with atomics, so a run repeats bit for bit.
 * Scratch a kernel needs beyond its operands is an argument, so that the
 * static memory plan owns it like every other buffer.
 *
 * An id out of range traps the kernel, which the next synchronisation
 * reports as a launch failure (the CPU kernels stop the program instead).
 *
 *===----------------------------------------------------------------------===*/

#ifndef DTK_CUDA_KERNELS_H
#define DTK_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t, without the CUDA headers. */
typedef struct CUstream_st *dtk_stream;

/* The error of the last launch, as cudaGetErrorString gives it, or null. */
const char *dtk_cuda_last_error(void);

/* c[r, :] = bias (with `add`, c[r, :] += bias) for every row r of a
 * [rows, n] matrix (a product with a bias starts from it; one that
 * accumulates starts from C plus it). */
void dtk_cuda_fill_rows_f32(const float *bias, float *c, int64_t rows,
                            int64_t n, int add, dtk_stream stream);
void dtk_cuda_softmax_f32(const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, dtk_stream stream);

/* The element types of the _typed kernels' data. */
enum { DTK_CUDA_F32 = 0, DTK_CUDA_BF16 = 1, DTK_CUDA_F16 = 2 };

/* dtk_cuda_fill_rows_f32 with the bias and C of any of those types (the
 * bias's values rounded to C's type: exact for a 16-bit bias in a C of its
 * type, or an f32 C); `add` needs an f32 C (else nothing is written). */
void dtk_cuda_fill_rows_typed(const void *bias, int bias_type, void *c,
                              int c_type, int64_t rows, int64_t n, int add,
                              dtk_stream stream);

/* GELU (dt.gelu, the tanh approximation) where cuBLASLt's epilogue does not
 * compute it (dtrt/cuda/blas.h): `out` = gelu(`pre`), or with `grad`, `out`
 * *= gelu'(`pre`) in place (`out` holds the product); `total` elements, both
 * of `type`. */
void dtk_cuda_gelu_typed(const void *pre, void *out, int type, int64_t total,
                         int grad, dtk_stream stream);

/* A bias's gradient where cuBLASLt's epilogue does not compute it
 * (dtrt/cuda/blas.h): `sums`[c] = the f32 sum over the `rows` rows of `x`
 * (of `type`, rows `ld` elements apart) of column c, for c < `cols`; the same
 * order every run. */
void dtk_cuda_column_sums_typed(const void *x, int type, int64_t rows,
                                int64_t cols, int64_t ld, float *sums,
                                dtk_stream stream);

void dtk_cuda_layer_norm_f32(const float *x, const float *w, const float *b,
                             float *y, int64_t rows, int64_t cols, float eps,
                             dtk_stream stream);
/* `stats`: scratch of 2 * rows floats (each row's mean and 1/std), then
 * 2 * ceil(rows / 64) * cols (the weight and bias gradients' partial sums
 * over 64 rows at a time). */
void dtk_cuda_layer_norm_grad_f32(const float *x, const float *w,
                                  const float *dy, float *dx, float *dw,
                                  float *db, float *stats, int64_t rows,
                                  int64_t cols, float eps, dtk_stream stream);

/* The layer norm and its gradients over x of type `in` and dy of type
 * `grad` (DTK_CUDA_F32, _BF16, _F16; read as the f32 values they widen to),
 * writing y, or dx, of type `out` (16-bit: the f32 values rounded to
 * nearest). */
void dtk_cuda_layer_norm_typed(const void *x, int in, const float *w,
                               const float *b, void *y, int out, int64_t rows,
                               int64_t cols, float eps, dtk_stream stream);
void dtk_cuda_layer_norm_grad_typed(const void *x, int in, const float *w,
                                    const void *dy, int grad, void *dx, int out,
                                    float *dw, float *db, float *stats,
                                    int64_t rows, int64_t cols, float eps,
                                    dtk_stream stream);

/* RMS norm: as the layer norm without centring or bias. `stats`: 2 * rows
 * floats, then ceil(rows / 64) * cols (the weight gradient's partial sums). */
void dtk_cuda_rms_norm_f32(const float *x, const float *w, float *y,
                           int64_t rows, int64_t cols, float eps,
                           dtk_stream stream);
/* As dtk_cuda_layer_norm{,_grad}_typed. */
void dtk_cuda_rms_norm_typed(const void *x, int in, const float *w, void *y,
                             int out, int64_t rows, int64_t cols, float eps,
                             dtk_stream stream);
void dtk_cuda_rms_norm_grad_typed(const void *x, int in, const float *w,
                                  const void *dy, int grad, void *dx, int out,
                                  float *dw, float *stats, int64_t rows,
                                  int64_t cols, float eps, dtk_stream stream);
void dtk_cuda_rms_norm_grad_f32(const float *x, const float *w, const float *dy,
                                float *dx, float *dw, float *stats,
                                int64_t rows, int64_t cols, float eps,
                                dtk_stream stream);

/* Rotary position embedding (dtk_rope_f32). `table`: 2 * t * (d / 2) floats
 * (the angles' cosines and sines). */
void dtk_cuda_rope_f32(const float *x, float *y, float *table, int64_t outer,
                       int64_t t, int64_t d, float theta, float factor,
                       float low_freq_factor, float high_freq_factor,
                       float original, int32_t inverse, dtk_stream stream);

/* Inverted dropout (dtk_dropout_f32), its masks the CPU kernel's. The scalars
 * the CPU kernel takes as values are device pointers here: the step, the
 * micro-batch, and up to four block offsets (null: none), so that the base
 * index is micro * elements + sum of first_i * f_i. */
void dtk_cuda_dropout_f32(const float *x, float *y, const int64_t *step,
                          const int64_t *micro, const int64_t *first0,
                          const int64_t *first1, const int64_t *first2,
                          const int64_t *first3, int64_t n0, int64_t n1,
                          int64_t n2, int64_t n3, int64_t s0, int64_t s1,
                          int64_t s2, int64_t s3, int64_t elements, int64_t f0,
                          int64_t f1, int64_t f2, int64_t f3, int64_t seed,
                          int64_t site, float p, dtk_stream stream);

/* A product the caller runs (cuBLAS, in the runtime): C = op(A) op(B) for
 * `batch` consecutive row-major matrices, op(A) M x K and op(B) K x N, on
 * the kernels' stream; C += with `accumulate`. Returns 0, or an error code
 * the kernels pass on. */
typedef int (*dtk_cuda_gemm)(void *ctx, const float *a, const float *b,
                             float *c, int64_t batch, int64_t m, int64_t n,
                             int64_t k, int32_t trans_a, int32_t trans_b,
                             int32_t accumulate);

/* 2-D convolution (dtk_conv2d_f32 and its gradients) as one product a group
 * through `gemm`: the windows of all samples unrolled, then the product,
 * then NCHW order. `scratch`: dtk_cuda_conv2d_scratch_floats(...) floats,
 * (C kh kw + O) N oh ow. Each returns 0 or `gemm`'s error. */
int64_t dtk_cuda_conv2d_scratch_floats(int64_t n, int64_t c, int64_t h,
                                       int64_t w, int64_t o, int64_t kh,
                                       int64_t kw, int64_t oh, int64_t ow,
                                       int64_t sh, int64_t sw, int64_t ph,
                                       int64_t pw, int64_t dh, int64_t dw,
                                       int64_t groups);
int dtk_cuda_conv2d_f32(const float *x, const float *w, float *y,
                        float *scratch, int64_t n, int64_t c, int64_t h,
                        int64_t wd, int64_t o, int64_t kh, int64_t kw,
                        int64_t oh, int64_t ow, int64_t sh, int64_t sw,
                        int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                        int64_t groups, dtk_cuda_gemm gemm, void *ctx,
                        dtk_stream stream);
int dtk_cuda_conv2d_input_grad_f32(const float *dy, const float *w, float *dx,
                                   float *scratch, int64_t n, int64_t c,
                                   int64_t h, int64_t wd, int64_t o, int64_t kh,
                                   int64_t kw, int64_t oh, int64_t ow,
                                   int64_t sh, int64_t sw, int64_t ph,
                                   int64_t pw, int64_t dh, int64_t dw,
                                   int64_t groups, dtk_cuda_gemm gemm,
                                   void *ctx, dtk_stream stream);
int dtk_cuda_conv2d_weight_grad_f32(
    const float *x, const float *dy, float *dw_out, float *scratch, int64_t n,
    int64_t c, int64_t h, int64_t wd, int64_t o, int64_t kh, int64_t kw,
    int64_t oh, int64_t ow, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
    int64_t dh, int64_t dw, int64_t groups, dtk_cuda_gemm gemm, void *ctx,
    dtk_stream stream);

/* 2-D pooling (dtk_max_pool2d_f32, ...): the CPU kernels' choices and bits. */
void dtk_cuda_max_pool2d_f32(const float *x, float *y, int64_t planes,
                             int64_t h, int64_t w, int64_t oh, int64_t ow,
                             int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                             int64_t ph, int64_t pw, dtk_stream stream);
void dtk_cuda_max_pool2d_grad_f32(const float *x, const float *dy, float *dx,
                                  int64_t planes, int64_t h, int64_t w,
                                  int64_t oh, int64_t ow, int64_t kh,
                                  int64_t kw, int64_t sh, int64_t sw,
                                  int64_t ph, int64_t pw, dtk_stream stream);
void dtk_cuda_avg_pool2d_f32(const float *x, float *y, int64_t planes,
                             int64_t h, int64_t w, int64_t oh, int64_t ow,
                             int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                             int64_t ph, int64_t pw, dtk_stream stream);
void dtk_cuda_avg_pool2d_grad_f32(const float *dy, float *dx, int64_t planes,
                                  int64_t h, int64_t w, int64_t oh, int64_t ow,
                                  int64_t kh, int64_t kw, int64_t sh,
                                  int64_t sw, int64_t ph, int64_t pw,
                                  dtk_stream stream);

void dtk_cuda_embedding_f32(const float *table, const int32_t *ids, float *out,
                            int64_t n, int64_t count, int64_t width,
                            dtk_stream stream);
void dtk_cuda_embedding_grad_f32(const int32_t *ids, const float *dout,
                                 float *dtable, int64_t n, int64_t count,
                                 int64_t width, dtk_stream stream);

/* `scratch`: `rows` floats. */
void dtk_cuda_cross_entropy_f32(const float *logits, const int32_t *labels,
                                float *loss, float *scratch, int64_t rows,
                                int64_t classes, dtk_stream stream);
/* `scratch`: one float. */
void dtk_cuda_cross_entropy_grad_f32(const float *logits, const int32_t *labels,
                                     const float *dloss, float *dlogits,
                                     float *scratch, int64_t rows,
                                     int64_t classes, dtk_stream stream);
/* dtk_cuda_cross_entropy_f32 over logits of type `in`, read as the f32
 * values they widen to. */
void dtk_cuda_cross_entropy_typed(const void *logits, int in,
                                  const int32_t *labels, float *loss,
                                  float *scratch, int64_t rows, int64_t classes,
                                  dtk_stream stream);
/* dtk_cuda_cross_entropy_grad_f32 over logits of type `in`, writing dlogits
 * of type `out` (16-bit: the f32 values rounded to nearest). */
void dtk_cuda_cross_entropy_grad_typed(const void *logits, int in,
                                       const int32_t *labels,
                                       const float *dloss, void *dlogits,
                                       int out, float *scratch, int64_t rows,
                                       int64_t classes, dtk_stream stream);
/* The same with rows `ld` elements apart in the logits (and `ldOut` in
 * dlogits): a pitch past `classes` that keeps every row 16-byte aligned, so
 * that the products beside the loss take their fast kernels (GPT-2's
 * vocabulary of 50 257). */
void dtk_cuda_cross_entropy_pitched(const void *logits, int in, int64_t ld,
                                    const int32_t *labels, float *loss,
                                    float *scratch, int64_t rows,
                                    int64_t classes, dtk_stream stream);
void dtk_cuda_cross_entropy_grad_pitched(const void *logits, int in, int64_t ld,
                                         const int32_t *labels,
                                         const float *dloss, void *dlogits,
                                         int out, int64_t ldOut, float *scratch,
                                         int64_t rows, int64_t classes,
                                         dtk_stream stream);
/* The loss and its gradient in one pass over the logits, where nothing
 * between the two reads the loss: dtk_cuda_cross_entropy_grad_pitched's
 * dlogits and dtk_cuda_cross_entropy_pitched's loss, the same bits as the
 * two launches give. `scratch`: `rows` + 1 floats. */
void dtk_cuda_cross_entropy_with_grad_pitched(
    const void *logits, int in, int64_t ld, const int32_t *labels,
    const float *dloss, void *dlogits, int out, int64_t ldOut, float *loss,
    float *scratch, int64_t rows, int64_t classes, dtk_stream stream);
/* `scratch`: `rows` floats. */
void dtk_cuda_count_correct_f32(const float *logits, const int32_t *labels,
                                float *correct, float *scratch, int64_t rows,
                                int64_t classes, dtk_stream stream);

/* Vocabulary parallelism (kernels.h's dtk_embedding_shard_f32, ...): the
 * rank's block of `count` rows (or `classes` classes) of `total` starts at
 * `*first`, a device scalar the runtime computes per rank. Ids and labels are
 * checked against `total`. */
void dtk_cuda_embedding_shard_f32(const float *table, const int32_t *ids,
                                  float *out, int64_t n, const int64_t *first,
                                  int64_t count, int64_t total, int64_t width,
                                  dtk_stream stream);
/* The same bits as the CPU kernel (each row's terms added in index order). */
void dtk_cuda_embedding_grad_shard_f32(const int32_t *ids, const float *dout,
                                       float *dtable, int64_t n,
                                       const int64_t *first, int64_t count,
                                       int64_t total, int64_t width,
                                       dtk_stream stream);
/* `stats`: [4, rows], as dtk_class_stats_f32 lays them out. */
void dtk_cuda_class_stats_f32(const float *logits, const int32_t *labels,
                              float *stats, int64_t rows, int64_t classes,
                              const int64_t *first, int64_t total,
                              dtk_stream stream);
/* `stats`: [blocks, 4, rows]. `scratch`: `rows` floats. */
void dtk_cuda_cross_entropy_stats_f32(const float *stats, const int32_t *labels,
                                      float *loss, float *scratch,
                                      int64_t blocks, int64_t rows,
                                      dtk_stream stream);
/* `scratch`: one float. */
void dtk_cuda_cross_entropy_grad_shard_f32(
    const float *logits, const int32_t *labels, const float *stats,
    const float *dloss, float *dlogits, float *scratch, int64_t blocks,
    int64_t rows, int64_t classes, const int64_t *first, int64_t total,
    dtk_stream stream);
/* `scratch`: `rows` floats. */
void dtk_cuda_count_correct_stats_f32(const float *stats, const int32_t *labels,
                                      float *correct, float *scratch,
                                      int64_t blocks, int64_t rows,
                                      dtk_stream stream);

/* FlashAttention's algorithm: the t x t scores are never in global memory;
 * each query row runs an online softmax over tiles of keys. d <= 256. The
 * forward also writes each query row's natural log-sum-exp of its scaled,
 * masked scores into `lse` ([slices, t]); the gradient takes O and lse back
 * (FlashAttention-2: P = exp(s - lse), rowsum(P * dP) = dO . O, so no pass
 * over the keys for the statistics). `scratch` of the gradient:
 * 2 * slices * t floats (each query row's log-sum-exp and dO . O). */
void dtk_cuda_attention_f32(const float *q, const float *k, const float *v,
                            float *o, float *lse, int64_t slices, int64_t t,
                            int64_t d, int32_t causal, dtk_stream stream);
void dtk_cuda_attention_grad_f32(const float *q, const float *k, const float *v,
                                 const float *o, const float *lse,
                                 const float *dout, float *dq, float *dk,
                                 float *dv, float *scratch, int64_t slices,
                                 int64_t t, int64_t d, int32_t causal,
                                 dtk_stream stream);
/* The same on tensor cores (TF32 products, f32 sums), for inputs that are
 * 16-bit values: exact scores; the probabilities and their gradients round
 * to TF32. Heads not a multiple of 16 wide, wider than 128, or operands not
 * 16-byte aligned take the f32 kernels above. */
void dtk_cuda_attention_tf32(const float *q, const float *k, const float *v,
                             float *o, float *lse, int64_t slices, int64_t t,
                             int64_t d, int32_t causal, dtk_stream stream);
void dtk_cuda_attention_grad_tf32(const float *q, const float *k,
                                  const float *v, const float *o,
                                  const float *lse, const float *dout,
                                  float *dq, float *dk, float *dv,
                                  float *scratch, int64_t slices, int64_t t,
                                  int64_t d, int32_t causal, dtk_stream stream);
/* The same on bf16 tensor cores (mma.sync, f32 sums, FlashAttention-2's
 * register-resident softmax), for inputs that are bf16 values: exact scores;
 * the probabilities and their gradients round to bf16. Heads not a multiple
 * of 16 wide, wider than 128, or operands not 16-byte aligned take the TF32
 * kernels above. */
void dtk_cuda_attention_bf16(const float *q, const float *k, const float *v,
                             float *o, float *lse, int64_t slices, int64_t t,
                             int64_t d, int32_t causal, dtk_stream stream);
void dtk_cuda_attention_grad_bf16(const float *q, const float *k,
                                  const float *v, const float *o,
                                  const float *lse, const float *dout,
                                  float *dq, float *dk, float *dv,
                                  float *scratch, int64_t slices, int64_t t,
                                  int64_t d, int32_t causal, dtk_stream stream);
/* The same with inputs (Q, K, V, and for the gradient O and dO) stored as
 * `in` and results (O, dQ, dK, dV) as `out`: DTK_CUDA_F32, or DTK_CUDA_BF16
 * (bf16 values where the program's narrowings would store them; results
 * rounded to nearest, as they round). lse is f32 always. Returns 0 when
 * launched, else 1 (a pairing other than f32 with f32 takes heads of 32, 64
 * or 128 only; every pointer must be 16-byte aligned), launching nothing:
 * these have no TF32 fallback. */
int dtk_cuda_attention_bf16_typed(const void *q, const void *k, const void *v,
                                  void *o, float *lse, int in, int out,
                                  int64_t slices, int64_t t, int64_t d,
                                  int32_t causal, dtk_stream stream);
int dtk_cuda_attention_grad_bf16_typed(const void *q, const void *k,
                                       const void *v, const void *o,
                                       const float *lse, const void *dout,
                                       void *dq, void *dk, void *dv, int in,
                                       int out, float *scratch, int64_t slices,
                                       int64_t t, int64_t d, int32_t causal,
                                       dtk_stream stream);
/* Whether the bf16 attention kernels load the next tile of keys (or
 * queries) by cp.async while they work on this one (1, the default), or
 * load each tile once the last is done (0: the kernels before the pipeline,
 * to compare; DTRT_CUDA_ATTENTION_PIPELINE=0). The same bits either way. */
void dtk_cuda_attention_pipeline(int on);
/* The query rows a warp of the bf16 attention's forward kernel owns, for
 * heads of 32 and 64: 32 (the default: each fragment of K and V loaded from
 * shared memory serves two groups of 16 rows) or 16 (one group, to compare;
 * DTRT_CUDA_ATTENTION_WARP_ROWS=16). The same bits either way. */
void dtk_cuda_attention_warp_rows(int rows);
/* Where an attention operand's rows lie, in elements: slice s (batch
 * b = s / heads, head h = s % heads) starts at b * batch + h * head, and its
 * t rows lie `row` apart. {1, t * d, 0, d} is the [slices, t, d] layout of
 * the entry points above; {H, t * H * d, d, H * d} is a [B, t, H, d]
 * tensor's heads where they lie, before the transpose to [B, H, t, d] that
 * attention's inputs take (and after the one its results take). */
typedef struct dtk_attention_layout {
  int64_t heads, batch, head, row;
} dtk_attention_layout;
/* The _typed entry points with each operand in its own layout: `layouts`
 * has one per pointer but lse (always [slices, t]), in their order
 * (q, k, v, o; q, k, v, o, dout, dq, dk, dv). Returns 1, launching nothing,
 * also when a layout's strides are not multiples of 8 elements (16-byte rows
 * of bf16). */
int dtk_cuda_attention_bf16_strided(const void *q, const void *k, const void *v,
                                    void *o, float *lse, int in, int out,
                                    const dtk_attention_layout *layouts,
                                    int64_t slices, int64_t t, int64_t d,
                                    int32_t causal, dtk_stream stream);
int dtk_cuda_attention_grad_bf16_strided(
    const void *q, const void *k, const void *v, const void *o,
    const float *lse, const void *dout, void *dq, void *dk, void *dv, int in,
    int out, const dtk_attention_layout *layouts, float *scratch,
    int64_t slices, int64_t t, int64_t d, int32_t causal, dtk_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* DTK_CUDA_KERNELS_H */
