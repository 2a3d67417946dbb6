/* The SIMD C spelling's prelude (compiler/render_c.py reads this file as text and puts it
 * first in every generated module). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include "tf_numerics.h"

/* Program instances over threads: pthreads created and joined within the call (no persistent
 * pool, so a process that forks after running a kernel has nothing left to inherit; libgomp's
 * pool hangs a forked child). Threads: $TILEFOUNDRY_NUM_THREADS, else the CPUs this process may
 * run on. */
typedef void (*tf__range_fn)(char *const *P, char *const *Q, int64_t lo, int64_t hi);
/* the instances are taken in chunks from a shared counter (D405), so a thread the OS leaves
 * waiting holds no fixed share: the others take its chunks */
struct tf__job { tf__range_fn fn; char *const *P; char *const *Q; int64_t *next, n, chunk; };
static void *tf__run_job(void *arg)
{
    const struct tf__job *j = (const struct tf__job *)arg;
    for (;;) {
        const int64_t lo = __atomic_fetch_add(j->next, j->chunk, __ATOMIC_RELAXED);
        if (lo >= j->n) break;
        j->fn(j->P, j->Q, lo, lo + j->chunk < j->n ? lo + j->chunk : j->n);
    }
    return NULL;
}
static int tf__threads(void)
{
    const char *env = getenv("TILEFOUNDRY_NUM_THREADS");
    if (env && *env) {
        const long v = strtol(env, NULL, 10);
        return v < 1 ? 1 : (v > 64 ? 64 : (int)v);
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        return n < 1 ? 1 : (n > 64 ? 64 : n);
    }
    return 1;
}
static void tf__parallel(tf__range_fn fn, char *const *P, char *const *Q, int64_t n)
{
    int t = tf__threads();
    if ((int64_t)t > n) t = (int)n;
    if (t <= 1) { fn(P, Q, 0, n); return; }
    pthread_t th[64];
    int started[64];
    int64_t next = 0;
    int64_t chunk = n / ((int64_t)t * 16);
    struct tf__job job;
    job.fn = fn; job.P = P; job.Q = Q; job.next = &next; job.n = n;
    job.chunk = chunk < 1 ? 1 : chunk;
    for (int i = 1; i < t; ++i) started[i] = pthread_create(&th[i], NULL, tf__run_job, &job) == 0;
    tf__run_job(&job); /* this thread takes chunks too, so every chunk runs even if no thread starts */
    for (int i = 1; i < t; ++i)
        if (started[i]) pthread_join(th[i], NULL);
}

/* the math functions the shared prelude calls (libm in double; D208) */
#define TF__DDIV(a, b) ((a) / (b))
#define TF__DSQRT(a) sqrt(a)
#if defined(TF_LIBMVEC) && defined(__GLIBC__)
/* glibc's libmvec has vector variants of these; declared under new names whose assembler name
 * is the libm one, GCC calls _ZGV*_exp and friends from the omp simd loops (glibc declares
 * them itself only under -ffast-math, which this build does not use) */
#define TF__VEC __attribute__((__simd__("notinbranch")))
TF__VEC double tf__vexp(double) __asm__("exp");
TF__VEC double tf__vlog(double) __asm__("log");
TF__VEC double tf__vexp2(double) __asm__("exp2");
TF__VEC double tf__vlog2(double) __asm__("log2");
TF__VEC double tf__vtanh(double) __asm__("tanh");
TF__VEC double tf__verfc(double) __asm__("erfc");
#define TF_EXP tf__vexp
#define TF_LOG tf__vlog
#define TF_EXP2 tf__vexp2
#define TF_LOG2 tf__vlog2
#define TF_TANH tf__vtanh
#define TF_ERFC tf__verfc
#else
#define TF_EXP exp
#define TF_LOG log
#define TF_EXP2 exp2
#define TF_LOG2 log2
#define TF_TANH tanh
#define TF_ERFC erfc
#endif
