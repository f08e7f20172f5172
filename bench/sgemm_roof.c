/* sgemm_roof.c - the machine's single-precision matrix-product roof through
 * OpenBLAS.
 *
 *   sgemm_roof M N K [REPEATS]
 *
 * Times C = A B (row-major, M x K times K x N) with the threads OpenBLAS is
 * given (OPENBLAS_NUM_THREADS) and prints the best GFLOP/s over REPEATS runs.
 * The benchmark uses it for the roof of a large square product and for the
 * model's own shapes.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: sgemm_roof M N K [REPEATS]\n");
    return 2;
  }
  int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
  int repeats = argc > 4 ? atoi(argv[4]) : 20;
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
        *c = malloc(sizeof(float) * m * n);
  for (long i = 0; i < (long)m * k; ++i)
    a[i] = (float)(i % 7) * 0.1f;
  for (long i = 0; i < (long)k * n; ++i)
    b[i] = (float)(i % 5) * 0.1f;
  /* Enough products per timing to last ~50 ms. */
  double flop = 2.0 * m * n * k;
  int inner = (int)(5e9 / flop) + 1;
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    double t0 = now();
    for (int i = 0; i < inner; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a,
                  k, b, n, 0.0f, c, n);
    double gflops = flop * inner / (now() - t0) / 1e9;
    if (gflops > best)
      best = gflops;
  }
  printf("%.2f\n", best);
  free(a);
  free(b);
  free(c);
  return 0;
}
