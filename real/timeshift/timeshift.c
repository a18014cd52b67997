/*
 * lockcheck's time-shift library: LD_PRELOAD it into a server to move that server's clocks.
 *
 * Why not libfaketime: it resolves the real functions with dlsym() at start-up, which allocates;
 * Debian's redis-server is linked with jemalloc, whose initialisation reads the clock, and the
 * two wait on each other for ever. This library allocates nothing, resolves nothing and takes no
 * lock: the real clocks are read with raw syscalls, and the shift is read from a small file that
 * the nemesis rewrites, mapped into memory on first use and read under a sequence lock.
 *
 * The model is the simulator's (sim/src/clock.rs): from the moment of the last change, each clock
 * reads its base plus rate x (true time elapsed), where true time is the host's real
 * CLOCK_MONOTONIC. A jump moves only the wall clock (CLOCK_REALTIME and its variants,
 * gettimeofday, time); a rate applies to every clock. Until the file says otherwise (active = 0)
 * every call reads the real clock.
 *
 * A process that reads moved clocks also computes its deadlines on them, and hands them to the
 * kernel, which waits on the real clocks: a JVM's or MariaDB's timed condition waits
 * (pthread_cond_timedwait) would wait a moved clock's offset too long, or not at all. So timed
 * condition waits are translated: the time left to the deadline, on the moved clock the
 * condition variable waits on, is converted to true time at the clock's rate and waited on the
 * real CLOCK_MONOTONIC (pthread_cond_clockwait, which resolves nothing). Relative waits (poll,
 * epoll_wait, nanosleep) run on true time, unscaled by a rate.
 *
 * The file (LOCKCHECK_TIMESHIFT names it) holds one struct shift, native endian, written by
 * lockcheck-real's timeshift.rs; its layout is part of the contract with that file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct shift {
    uint64_t seq;          /* odd while the writer is changing the fields below */
    uint64_t active;       /* 0: read the real clocks */
    int64_t base_true_ns;  /* real CLOCK_MONOTONIC at the last change */
    int64_t wall_base_ns;  /* the shifted wall clock at that moment */
    int64_t mono_base_ns;  /* the shifted monotonic clocks at that moment */
    double rate;           /* how fast the shifted clocks run against true time */
};

/* 0: not mapped yet; 1: someone is mapping it; 2: done (shift may still be NULL: no file). */
static int state;
static const volatile struct shift *shift;

static long real_clock(clockid_t id, struct timespec *ts) {
    return syscall(SYS_clock_gettime, id, ts);
}

static void map_file(void) {
    int expected = 0;
    if (!__atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return; /* mapped, or being mapped by another thread: it reads the real clock meanwhile */
    const char *path = getenv("LOCKCHECK_TIMESHIFT");
    if (path != NULL) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            void *p = (void *)syscall(SYS_mmap, NULL, sizeof(struct shift), PROT_READ, MAP_SHARED,
                                      fd, 0);
            syscall(SYS_close, fd);
            if (p != MAP_FAILED)
                shift = p;
        }
    }
    __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
}

/* A consistent copy of the shift; 0 when the clocks are not shifted. */
static int read_shift(struct shift *out) {
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2) {
        map_file();
        if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2)
            return 0;
    }
    if (shift == NULL)
        return 0;
    for (;;) {
        uint64_t before = __atomic_load_n(&shift->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        out->active = shift->active;
        out->base_true_ns = shift->base_true_ns;
        out->wall_base_ns = shift->wall_base_ns;
        out->mono_base_ns = shift->mono_base_ns;
        out->rate = shift->rate;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&shift->seq, __ATOMIC_RELAXED) == before)
            return out->active != 0;
    }
}

static int is_wall(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

static int is_shifted(clockid_t id) {
    return is_wall(id) || id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE ||
           id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    struct shift s;
    if (!is_shifted(id) || !read_shift(&s))
        return (int)real_clock(id, ts);
    struct timespec now;
    long r = real_clock(CLOCK_MONOTONIC, &now);
    if (r != 0)
        return (int)r;
    int64_t true_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    int64_t elapsed = (int64_t)((double)(true_ns - s.base_true_ns) * s.rate);
    int64_t ns = (is_wall(id) ? s.wall_base_ns : s.mono_base_ns) + elapsed;
    if (id == CLOCK_TAI)
        ns += 37 * (int64_t)1000000000; /* TAI - UTC since 2017 */
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec -= 1;
    }
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz; /* obsolete; glibc fills nothing into it either */
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r != 0)
        return r;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out != NULL)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

static int64_t ns_of(const struct timespec *ts) {
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int pthread_cond_timedwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           const struct timespec *restrict abstime) {
    /* glibc (since 2.25) keeps the condition variable's clock in bit 1 of __wrefs
     * (__PTHREAD_COND_CLOCK_MONOTONIC_MASK); bit 0 is process-shared. */
    clockid_t clock = (cond->__data.__wrefs & 2) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    struct shift s;
    if (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000 ||
        !read_shift(&s))
        return pthread_cond_clockwait(cond, mutex, clock, abstime);
    struct timespec moved, now;
    if (clock_gettime(clock, &moved) != 0 || real_clock(CLOCK_MONOTONIC, &now) != 0)
        return EINVAL;
    int64_t left = ns_of(abstime) - ns_of(&moved);
    if (left < 0)
        left = 0;
    double rate = s.rate > 0 ? s.rate : 1.0;
    int64_t deadline = ns_of(&now) + (int64_t)((double)left / rate);
    struct timespec real_deadline = {.tv_sec = deadline / 1000000000,
                                     .tv_nsec = deadline % 1000000000};
    return pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &real_deadline);
}
