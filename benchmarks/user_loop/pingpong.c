/* How far apart two of the machine's cores are now: one cache line handed between a thread pinned to core A and one
 * pinned to core B, N round trips (default 20000); prints the mean round trip in nanoseconds.
 *
 *     cc -O2 -pthread pingpong.c -o pingpong && ./pingpong [N [A B]]     (A, B default 0 and 1)
 *
 * Each side waits for the other's write before it writes back, so a round trip is two writes crossing between
 * the cores: what a BLAS or OpenMP thread pays each time it waits on its partner. The clock starts once both
 * threads are pinned and ready. Used by ../core_distance_check.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { GO = 1, BACK = 0, READY = 3, FAILED = 4 };
static _Alignas(64) _Atomic int ball = BACK;
static long trips;
static int cores[2] = {0, 1};

static int pin(int core) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *partner(void *arg) {
    (void)arg;
    if (pin(cores[1]) != 0) {
        atomic_store_explicit(&ball, FAILED, memory_order_release);
        return NULL;
    }
    atomic_store_explicit(&ball, READY, memory_order_release);
    for (long i = 0; i < trips; i++) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != GO)
            ;
        atomic_store_explicit(&ball, BACK, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    trips = argc > 1 ? atol(argv[1]) : 20000;
    if (argc > 3) {
        cores[0] = atoi(argv[2]);
        cores[1] = atoi(argv[3]);
    }
    if (trips < 1 || cores[0] == cores[1] || pin(cores[0]) != 0) {
        fprintf(stderr, "pingpong: needs a positive count and two distinct cores it may run on (%d, %d)\n",
                cores[0], cores[1]);
        return 2;
    }
    pthread_t other;
    if (pthread_create(&other, NULL, partner, NULL) != 0) {
        fprintf(stderr, "pingpong: could not start the partner thread\n");
        return 2;
    }
    int state;
    while ((state = atomic_load_explicit(&ball, memory_order_acquire)) != READY && state != FAILED)
        ;
    if (state == FAILED) {
        pthread_join(other, NULL);
        fprintf(stderr, "pingpong: could not pin the partner thread to core %d\n", cores[1]);
        return 2;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < trips; i++) {
        atomic_store_explicit(&ball, GO, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != BACK)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(other, NULL);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / trips);
    return 0;
}
