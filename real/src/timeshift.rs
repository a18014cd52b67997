//! Real clock faults: a server's clocks moved by a small library preloaded into it.
//!
//! `timeshift/timeshift.c` (in this crate) overrides `clock_gettime`, `gettimeofday` and `time`
//! for the server it is preloaded into (`LD_PRELOAD`), reading the real clocks with raw syscalls
//! and a shift from a file that [`ClockFile`] rewrites while the server runs. The model is the
//! simulator's (`lockcheck_core::clock`): a jump moves the wall clock only, a drift changes the rate
//! of every clock, each change rebased at the moment it is made so that a rate change never moves
//! a clock. libfaketime is not used: it deadlocks Debian's jemalloc-linked `redis-server` at
//! start-up (its `dlsym` allocates, jemalloc's initialisation reads the clock); the library here
//! allocates nothing and resolves nothing. Timed condition waits (`pthread_cond_timedwait`) are
//! translated too: a JVM or mariadbd takes its deadline on the moved clock and the kernel waits
//! on the real one, which would wait a moved clock's offset too long, or not at all.
//!
//! The library is compiled once per source ([`crate::preload::build`]), with the system C
//! compiler (`cc`, which building lockcheck needs anyway), into the user's private directory.
//!
//! The shift lives in a file, not in the server's memory, so it outlives a crash: a restarted
//! server still runs on the wrong clock, as it would on a real machine whose clock is wrong.

use crate::error::RealError;
use lockcheck_core::clock::NodeClock;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// The library's source.
pub const SOURCE: &str = include_str!("../timeshift/timeshift.c");
/// The variable that names the shift file to the library.
pub const FILE_VAR: &str = "LOCKCHECK_TIMESHIFT";

/// The compiled library's path, compiling it on first use; checked each time it is asked for,
/// before a server loads it ([`crate::preload`]).
pub fn library() -> Result<PathBuf, RealError> {
    crate::preload::build("timeshift", SOURCE).map_err(RealError::TimeShift)
}

/// The shift file's layout, shared with `struct shift` in the C source.
#[repr(C)]
struct Shift {
    seq: AtomicU64,
    active: u64,
    base_true_ns: i64,
    wall_base_ns: i64,
    mono_base_ns: i64,
    rate: f64,
}

/// One node's clocks: the host's until the first change, then moved as the simulator moves a
/// node's clocks (the simulator's own [`NodeClock`], on the host's monotonic clock as true time).
/// Servers read theirs through a [`ClockFile`]; a real client's `Env` reads its own directly.
#[derive(Clone, Debug, Default)]
pub struct ClockShift {
    /// `None` until the first change: the host's clocks.
    clock: Option<NodeClock>,
}

impl ClockShift {
    /// Steps the wall clock by `by_ns` (negative: backwards) from now on.
    pub fn jump(&mut self, by_ns: i64) {
        let now = true_ns();
        self.current(now).jump(now, by_ns);
    }

    /// From now on every clock runs at `rate` × true time.
    pub fn drift(&mut self, rate: f64) {
        let now = true_ns();
        self.current(now).set_rate(now, rate);
    }

    /// The wall clock now, in ns since the Unix epoch.
    pub fn wall_ns(&self) -> i64 {
        match &self.clock {
            None => real_ns(libc::CLOCK_REALTIME),
            Some(c) => c.wall_ns(true_ns()),
        }
    }

    /// The monotonic clock now (`CLOCK_MONOTONIC`'s scale), in ns.
    pub fn mono_ns(&self) -> i64 {
        match &self.clock {
            None => true_ns() as i64,
            Some(c) => c.mono_ns(true_ns()) as i64,
        }
    }

    /// How fast the clocks run against true time.
    pub fn rate(&self) -> f64 {
        self.clock.as_ref().map_or(1.0, NodeClock::rate)
    }

    /// The real time that passes while these clocks advance by `local`.
    pub fn true_duration(&self, local: std::time::Duration) -> std::time::Duration {
        self.clock
            .as_ref()
            .map_or(local, |c| c.true_duration(local))
    }

    /// How far the wall clock is from the host's now, in ns.
    pub fn wall_offset_ns(&self) -> i64 {
        self.wall_ns() - real_ns(libc::CLOCK_REALTIME)
    }

    /// The clock to change: the host's as read at `now`, the first time.
    fn current(&mut self, now: u64) -> &mut NodeClock {
        self.clock
            .get_or_insert_with(|| NodeClock::reading(now, real_ns(libc::CLOCK_REALTIME), now))
    }
}

/// The shift file of one server, mapped into memory for writing. The server maps it for
/// reading and sees every change at once, under a sequence lock.
pub struct ClockFile {
    path: PathBuf,
    map: *mut Shift,
    shift: ClockShift,
}

impl ClockFile {
    /// A new shift file at `path` that leaves the clocks alone until the first change.
    pub fn create(path: &Path) -> Result<ClockFile, RealError> {
        let io = |source| RealError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io)?;
        let size = std::mem::size_of::<Shift>();
        file.set_len(size as u64).map_err(io)?;
        // SAFETY: a fresh shared mapping of a file of exactly `size` bytes, which we own; it is
        // unmapped in Drop and never handed out.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(ClockFile {
            path: path.to_path_buf(),
            map: map.cast(),
            shift: ClockShift::default(),
        })
    }

    /// The environment a server needs to run on these clocks: the library preloaded, and told
    /// where the file is.
    pub fn env(&self, library: &Path) -> Vec<(OsString, OsString)> {
        vec![
            ("LD_PRELOAD".into(), library.into()),
            (FILE_VAR.into(), self.path.clone().into()),
        ]
    }

    /// Steps the server's wall clock by `by_ns` (negative: backwards) from now on.
    pub fn jump(&mut self, by_ns: i64) {
        self.shift.jump(by_ns);
        self.publish();
    }

    /// From now on every clock of the server runs at `rate` × true time.
    pub fn drift(&mut self, rate: f64) {
        self.shift.drift(rate);
        self.publish();
    }

    /// The server's clocks, as it reads them.
    pub fn shift(&self) -> &ClockShift {
        &self.shift
    }

    fn publish(&mut self) {
        let Some(clock) = &self.shift.clock else {
            return;
        };
        let (base_true_ns, wall_base_ns, mono_base_ns) = clock.base();
        let rate = clock.rate();
        // SAFETY: `map` is our live mapping of a whole `Shift`; the only other party reads it
        // under the sequence lock below (odd `seq`: being written).
        unsafe {
            let shift = &*self.map;
            let seq = shift.seq.load(Ordering::Relaxed);
            shift.seq.store(seq + 1, Ordering::Relaxed);
            fence(Ordering::Release);
            std::ptr::write_volatile(&raw mut (*self.map).active, 1);
            std::ptr::write_volatile(&raw mut (*self.map).base_true_ns, base_true_ns as i64);
            std::ptr::write_volatile(&raw mut (*self.map).wall_base_ns, wall_base_ns);
            std::ptr::write_volatile(&raw mut (*self.map).mono_base_ns, mono_base_ns as i64);
            std::ptr::write_volatile(&raw mut (*self.map).rate, rate);
            shift.seq.store(seq + 2, Ordering::Release);
        }
    }
}

impl Drop for ClockFile {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `create`, exactly once.
        unsafe {
            libc::munmap(self.map.cast(), std::mem::size_of::<Shift>());
        }
    }
}

/// True time: this process's (unshifted) `CLOCK_MONOTONIC`, the library's reference.
fn true_ns() -> u64 {
    real_ns(libc::CLOCK_MONOTONIC) as u64
}

fn real_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preload::COMPILER;
    use std::process::Command;

    /// A small C program that prints its wall and monotonic clocks in ns, run with the library.
    fn probe(dir: &Path, file: &ClockFile) -> (i64, i64) {
        let probe = dir.join("probe");
        if !probe.exists() {
            let source = dir.join("probe.c");
            std::fs::write(
                &source,
                "#include <stdio.h>\n#include <time.h>\n#include <sys/time.h>\n\
                 int main(void){struct timeval tv; struct timespec m;\n\
                 gettimeofday(&tv, 0); clock_gettime(CLOCK_MONOTONIC, &m);\n\
                 printf(\"%lld %lld\\n\", (long long)tv.tv_sec*1000000000LL+tv.tv_usec*1000LL,\n\
                 (long long)m.tv_sec*1000000000LL+m.tv_nsec); return 0;}\n",
            )
            .unwrap();
            let status = Command::new(COMPILER)
                .arg("-o")
                .arg(&probe)
                .arg(&source)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let out = Command::new(&probe)
            .envs(file.env(&library().unwrap()))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let v: Vec<i64> = text
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        (v[0], v[1])
    }

    /// A small C program that waits `wait_ms` by its own (moved) clock on a condition variable
    /// that waits on `clock`, and prints how long that took in true time (ns).
    fn wait_probe(dir: &Path, file: &ClockFile, clock: &str, wait_ms: u64) -> i64 {
        let probe = dir.join(format!("wait-probe-{clock}"));
        if !probe.exists() {
            let source = dir.join(format!("wait-probe-{clock}.c"));
            std::fs::write(
                &source,
                format!(
                    "#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
                     #include <sys/syscall.h>\n#include <time.h>\n#include <unistd.h>\n\
                     static long long true_ns(void){{struct timespec t;\n\
                     syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);\n\
                     return t.tv_sec*1000000000LL+t.tv_nsec;}}\n\
                     int main(int argc, char **argv){{long long ms=atoll(argv[1]);\n\
                     pthread_condattr_t a; pthread_condattr_init(&a);\n\
                     pthread_condattr_setclock(&a, {clock});\n\
                     pthread_cond_t c; pthread_cond_init(&c, &a);\n\
                     pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; pthread_mutex_lock(&m);\n\
                     struct timespec d; clock_gettime({clock}, &d);\n\
                     long long ns = d.tv_nsec + ms*1000000LL;\n\
                     d.tv_sec += ns/1000000000LL; d.tv_nsec = ns%1000000000LL;\n\
                     long long start = true_ns();\n\
                     while (pthread_cond_timedwait(&c, &m, &d) == 0) {{}}\n\
                     printf(\"%lld\\n\", true_ns()-start); return 0;}}\n"
                ),
            )
            .unwrap();
            let status = Command::new(COMPILER)
                .arg("-o")
                .arg(&probe)
                .arg(&source)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let out = Command::new(&probe)
            .arg(wait_ms.to_string())
            .envs(file.env(&library().unwrap()))
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn timed_condition_waits_last_their_time_on_the_moved_clock() {
        let dir = std::env::temp_dir().join(format!(
            "lockcheck-timeshift-wait-test-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut file = ClockFile::create(&dir.join("clock")).unwrap();
        const MS: i64 = 1_000_000;
        // Only a hang (a deadline taken on the moved clock and waited on the real one) can fail
        // these bounds: ten hours ahead, or behind, is waited out in milliseconds.
        const HANG: i64 = 60_000 * MS;

        // A wall clock ten hours ahead: a 300 ms wait on it still takes 300 ms, not ten hours.
        file.jump(10 * 3_600_000 * MS);
        let waited = wait_probe(&dir, &file, "CLOCK_REALTIME", 300);
        assert!((300 * MS..HANG).contains(&waited), "{waited}");

        // Clocks at half speed: 200 ms on them is 400 ms of true time; the moved monotonic clock
        // falls behind the real one, so an untranslated deadline would already have passed.
        file.drift(0.5);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let waited = wait_probe(&dir, &file, "CLOCK_MONOTONIC", 200);
        assert!((400 * MS..HANG).contains(&waited), "{waited}");

        // A thousand times fast, 10 s on them is 10 ms of true time; untranslated, the wait
        // would last at least the 10 s (only a stall of seconds can fail the bound).
        file.drift(1000.0);
        let waited = wait_probe(&dir, &file, "CLOCK_MONOTONIC", 10_000);
        assert!(
            waited < 5_000 * MS,
            "the rate did not shorten the wait: {waited}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_jump_moves_the_wall_clock_only_and_a_drift_changes_the_rate() {
        let dir =
            std::env::temp_dir().join(format!("lockcheck-timeshift-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut file = ClockFile::create(&dir.join("clock")).unwrap();
        const HOUR: i64 = 3_600_000_000_000;

        // Untouched: the real clocks (the probe's wall clock within an hour of ours).
        let (wall, _) = probe(&dir, &file);
        assert!((wall - real_ns(libc::CLOCK_REALTIME)).abs() < HOUR);

        // Ten hours forward: the wall clock is ahead by about that, the monotonic one is not.
        file.jump(10 * HOUR);
        let (wall, mono) = probe(&dir, &file);
        let ahead = wall - real_ns(libc::CLOCK_REALTIME);
        assert!(ahead > 9 * HOUR && ahead < 11 * HOUR, "{ahead}");
        assert!(
            (mono - true_ns() as i64).abs() < HOUR,
            "the monotonic clock jumped"
        );
        assert_eq!(
            (file.shift().wall_offset_ns() as f64 / HOUR as f64).round(),
            10.0
        );

        // A rate of 1000: after a real 20 ms, the monotonic clock has moved on by 20 s or so,
        // at least 10 s (the rate only speeds it up, whatever the machine's pace).
        file.drift(1000.0);
        let (_, before) = probe(&dir, &file);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (_, after) = probe(&dir, &file);
        assert!(after - before >= 10_000_000_000, "{}", after - before);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
