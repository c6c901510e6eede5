/* How far apart the machine's first two cores are now: one cache line handed between a thread pinned to core 0
 * and one pinned to core 1, N round trips (default 20000); prints the mean round trip in nanoseconds.
 *
 *     cc -O2 -pthread pingpong.c -o pingpong && ./pingpong [N]
 *
 * Each side waits for the other's write before it writes back, so a round trip is two writes crossing between
 * the cores: what a BLAS or OpenMP thread pays each time it waits on its partner. Used by
 * ../core_distance_check.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic int ball = 0;
static long trips;

static int pin(int core) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *partner(void *arg) {
    (void)arg;
    pin(1);
    for (long i = 0; i < trips; i++) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != 1)
            ;
        atomic_store_explicit(&ball, 0, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    trips = argc > 1 ? atol(argv[1]) : 20000;
    if (trips < 1 || pin(0) != 0) {
        fprintf(stderr, "pingpong: needs a positive count and two cores to pin to\n");
        return 2;
    }
    pthread_t other;
    if (pthread_create(&other, NULL, partner, NULL) != 0)
        return 2;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < trips; i++) {
        atomic_store_explicit(&ball, 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != 0)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(other, NULL);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / trips);
    return 0;
}
