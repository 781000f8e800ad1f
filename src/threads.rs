//! The worker threads: their number (`set_num_threads`) and a lazily built
//! rayon pool of them, so that importing ndgather or making small calls
//! never starts a thread. A forked child builds workers of its own, whatever
//! other threads were doing at the fork (see [`Workers`]).

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

use crate::error::{GatherError, Result};
use crate::fork::{self, HeldAcrossFork};

/// The most worker threads a call may use.
///
/// A gather is bound by memory bandwidth long before it runs out of cores,
/// so more threads than any machine has CPUs buy nothing; 1024 is four times
/// the hardware threads of today's largest two-socket servers. Each thread
/// also reserves a stack, and rayon itself handles at most 65,535.
pub const MAX_THREADS: usize = 1024;

/// Requested thread count; 0 means "not set": use every CPU.
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

/// The worker pool and the process it was built in.
pub(crate) struct WorkerSlot {
    /// Built on first parallel use, rebuilt when the size changes or in a
    /// child process after `fork` (which copies the pool but not its
    /// threads).
    pool: Option<(u32, Arc<ThreadPool>)>,
}

static WORKERS: Mutex<WorkerSlot> = Mutex::new(WorkerSlot { pool: None });

/// How long a helper stays awake after its last task, looking for the next
/// split to join before it goes back to sleep in the pool, by default
/// (`set_linger_us` changes it). Waking a sleeping thread costs tens of
/// microseconds on a VM (a sleeping vCPU is descheduled by the host), as
/// long as a whole call of a few thousand rows: calls made one after another
/// (a service's batches, a loop over arrays) then find their helper awake,
/// as OpenMP's and TBB's workers (numba's `prange`) are found. The wait
/// yields the core between looks, so other runnable threads are not
/// starved; it costs a helper's core up to this long after each split call.
pub(crate) const LINGER_US: u64 = 200;

/// The most `set_linger_us` accepts: one second.
pub const MAX_LINGER_US: u64 = 1_000_000;

static LINGER_NOW_US: AtomicU64 = AtomicU64::new(LINGER_US);

/// Sets how long helpers stay awake after a split, in microseconds, `0 <=
/// us <= MAX_LINGER_US` (0: they sleep as soon as they are done).
pub fn set_linger_us(us: i64) -> Result<()> {
    match u64::try_from(us) {
        Ok(us) if us <= MAX_LINGER_US => {
            LINGER_NOW_US.store(us, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(GatherError::InvalidArgument(format!(
            "set_linger_us: the time must be between 0 and {MAX_LINGER_US} microseconds, got {us}"
        ))),
    }
}

/// How long helpers stay awake after a split.
pub fn linger_us() -> u64 {
    LINGER_NOW_US.load(Ordering::Relaxed)
}

/// How long a sleeping helper takes to start on its job, in nanoseconds,
/// from the start of the wake-up call (which itself takes the caller's
/// time): a moving average over the wake-ups this process made, 0 until
/// the first (see [`wake_ns`]). On the Intel VM of issue 31 the call took
/// 13 us and the helper started 45 us after it (p90: 90 us); a helper that
/// starts after the caller ran out of tasks only cost the caller the call.
static WAKE_NS: AtomicU64 = AtomicU64::new(0);

/// A wake-up latency set by `set_wake_us` (`NDGATHER_WAKE_US`), in
/// nanoseconds plus one; 0: none set, the measured one is used.
static WAKE_SET_NS: AtomicU64 = AtomicU64::new(0);

/// Sets the wake-up latency the split assumes, in microseconds, `0 <= us
/// <= MAX_LINGER_US`, instead of the one measured; `None` goes back to
/// measuring.
pub fn set_wake_us(us: Option<i64>) -> Result<()> {
    match us.map(u64::try_from) {
        None => WAKE_SET_NS.store(0, Ordering::Relaxed),
        Some(Ok(us)) if us <= MAX_LINGER_US => WAKE_SET_NS.store(us * 1000 + 1, Ordering::Relaxed),
        Some(_) => {
            return Err(GatherError::InvalidArgument(format!(
                "set_wake_us: the time must be between 0 and {MAX_LINGER_US} microseconds, got {}",
                us.unwrap_or_default()
            )))
        }
    }
    Ok(())
}

/// The wake-up latency of a sleeping helper the split assumes, in
/// nanoseconds: the one set, or the one measured (0 before the first
/// wake-up: splits then behave as if waking were free, and the first one
/// measures it).
pub(crate) fn wake_ns() -> u64 {
    match WAKE_SET_NS.load(Ordering::Relaxed) {
        0 => WAKE_NS.load(Ordering::Relaxed),
        set => set - 1,
    }
}

/// Counts a wake-up that began at `called` and whose helper starts now.
/// The estimate follows faster wake-ups at once (half way: a helper found
/// still awake in the pool's own idle loop took 1 us) and slower ones only
/// a sixteenth of the way, each sample taken at most four times the
/// estimate and at most [`WAKE_SAMPLE_MAX_NS`]: a helper kept off its core
/// by other threads (another runtime's workers spinning, as OpenMP's do for
/// 200 ms after their work; 1-20 ms were measured next to numba's
/// `prange`), or a core idle long enough for the host to deschedule it (the
/// first wake-ups of a process measured 0.15-1 ms, the later ones 30-70 us,
/// AMD EPYC Zen 3 VM), says little about the next wake-up.
fn record_wake(called: std::time::Instant) {
    let ns = u64::try_from(called.elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .clamp(1, WAKE_SAMPLE_MAX_NS);
    // Racing updates lose a sample at worst.
    let old = WAKE_NS.load(Ordering::Relaxed);
    WAKE_NS.store(next_wake_estimate(old, ns), Ordering::Relaxed);
    ALONE_SINCE_WAKE.store(0, Ordering::Relaxed);
}

/// The longest wake-up sample counted: a millisecond.
const WAKE_SAMPLE_MAX_NS: u64 = 1_000_000;

/// The wake-up estimate after `old` (0: none yet) and a sample of `ns`.
fn next_wake_estimate(old: u64, ns: u64) -> u64 {
    if old == 0 {
        ns
    } else if ns <= old {
        old - (old - ns) / 2
    } else {
        old + (ns.min(old.saturating_mul(4)) - old) / 16
    }
}

/// Calls that would have split were a helper awake but ran alone since the
/// last wake-up was measured (see [`remeasure_wake_now`]).
static ALONE_SINCE_WAKE: AtomicUsize = AtomicUsize::new(0);

/// One in this many calls that would split were a helper awake, but whose
/// work is less than twice the estimated wake-up, splits all the same while
/// no wake-up was measured in between: the estimate is refreshed only by
/// wake-ups, and one too high (the first of a process can take a
/// millisecond) would otherwise keep every such call alone for good. AMD
/// EPYC Zen 3 VM, 4,096 random rows of 512 bytes back to back on two
/// threads: in one fresh process in three the estimate stuck at 150 us to
/// 1 ms and every call took 650-950 us alone, against 320-460 us split
/// (docs/performance.md). A split made now costs its caller the wake-up
/// call and at worst the wait for the helper's last task (the caller never
/// waits for a wake-up, `for_each_task`), a few percent of one call in 16.
const REMEASURE_EVERY: usize = 16;

/// Called by a call that would split were a helper awake but finds none and
/// has less work than the estimated wake-up is worth: whether to split it
/// all the same, to measure a wake-up anew ([`REMEASURE_EVERY`]). Never
/// while a wake-up time is set (`set_wake_us`).
pub(crate) fn remeasure_wake_now() -> bool {
    if WAKE_SET_NS.load(Ordering::Relaxed) != 0 {
        return false;
    }
    // Racing calls may both split or count one call short: harmless.
    let alone = ALONE_SINCE_WAKE.load(Ordering::Relaxed) + 1;
    let due = alone >= REMEASURE_EVERY;
    ALONE_SINCE_WAKE.store(if due { 0 } else { alone }, Ordering::Relaxed);
    due
}

/// How many helpers linger now: a split would find them awake.
pub(crate) fn helpers_awake() -> usize {
    BOARD.lingering.load(Ordering::SeqCst)
}

/// When the last call that wanted a split but found every helper asleep
/// will have ended (its start and the time its work takes), in nanoseconds
/// since [`epoch`]; 0: none yet.
static LAST_ASLEEP_NS: AtomicU64 = AtomicU64::new(0);

/// The process's clock origin for [`LAST_ASLEEP_NS`].
fn epoch() -> std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Called by a call that would split if a helper were awake but runs on
/// its own thread instead, its work taking about `work_ns`: if such calls
/// come closer together than helpers linger (from the end of one to the
/// start of the next), wakes one helper to linger, so that the next calls
/// find it awake (the caller pays the wake-up call once, not the wait for
/// it). A service making a call now and then pays nothing.
pub(crate) fn wake_for_the_next_calls(threads: usize, work_ns: u64) {
    let threads = threads.min(MAX_THREADS);
    let linger_ns = linger_us().saturating_mul(1000);
    if threads < 2 || linger_ns == 0 {
        return;
    }
    let now = u64::try_from(epoch().elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1);
    let last_end = LAST_ASLEEP_NS.swap(now.saturating_add(work_ns), Ordering::Relaxed);
    if last_end == 0 || now.saturating_sub(last_end) > linger_ns {
        return;
    }
    let Some(pool) = worker_pool(threads - 1) else {
        return;
    };
    let called = std::time::Instant::now();
    pool.spawn(move || {
        record_wake(called);
        linger(BOARD.post.load(Ordering::SeqCst));
    });
}

/// At most this many helpers linger at once; the others go back to sleep
/// after their split. When 15 helpers of a 16-thread pool lingered, they all
/// joined the next split at once and contended for its locks: 4,096 rows of
/// 256 bytes took 2.5x the time. One is all a two-core machine has.
const MAX_LINGERING: usize = 3;

/// Sets the number of worker threads, `1 <= n <= MAX_THREADS`.
pub fn set_num_threads(n: i64) -> Result<()> {
    match usize::try_from(n) {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => {
            REQUESTED.store(n, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(GatherError::InvalidArgument(format!(
            "set_num_threads: the number of threads must be between 1 and {MAX_THREADS}, got {n}"
        ))),
    }
}

/// The number of worker threads large calls use.
pub fn num_threads() -> usize {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => cpus(),
        n => n,
    }
}

/// The CPUs this process may use ([`crate::machine::cpus`]), at most
/// [`MAX_THREADS`].
pub(crate) fn cpus() -> usize {
    crate::machine::cpus().min(MAX_THREADS)
}

/// The pool for splits needing `helpers` workers, built or rebuilt on
/// demand; `None` if no thread could be started. A split of `n` threads uses a pool of `n - 1`,
/// its caller being the n-th: with a worker more, on two cores, the pool
/// woke the second worker whenever the lingering one had not joined by the
/// caller's first task, and both then lingered, three threads yielding to
/// one another on two cores (a profile of `ov_gnd8_xml1`'s loop: the
/// helpers did a third of the copying and spent most of their time
/// switching; docs/performance.md).
///
/// The pool has a worker for each of [`num_threads`]' helpers, or
/// `helpers` if more: a split that uses fewer threads than set (with only
/// some helpers awake, `split::threads_now`) takes fewer of its workers.
/// Sizing it by the split instead rebuilt it, its threads stopped and
/// started, whenever two calls chose differently (CI saw a pool of one
/// after 3 threads were set).
fn worker_pool(helpers: usize) -> Option<Arc<ThreadPool>> {
    let threads = helpers.max(num_threads().saturating_sub(1));
    // A poisoned lock only means another call panicked while swapping the
    // pool; the Option inside is still whole.
    let mut slot = fork::lock::<Workers>();
    let pid = std::process::id();
    match slot.pool.take() {
        Some((owner, p)) if owner == pid && p.current_num_threads() == threads => {
            slot.pool = Some((owner, Arc::clone(&p)));
            return Some(p);
        }
        // Dropping the parent's pool in a forked child would signal threads
        // that are not there; it is small, so it is left alone.
        Some((owner, p)) if owner != pid => std::mem::forget(p),
        _ => {}
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("ndgather-{i}"))
        .build()
        .ok()?;
    let p = Arc::new(p);
    slot.pool = Some((pid, Arc::clone(&p)));
    Some(p)
}

/// The worker pool's lock, held across `fork` (see `fork`). The parent's
/// workers are not there in the child: [`worker_pool`] sees the pool was
/// built in another process and builds a new one. No holder of the lock
/// ever waits for anything that could block for ever: it is held only to
/// look at or swap the pool, and while rayon starts or stops its threads,
/// which never wait for Python.
pub(crate) struct Workers;

impl HeldAcrossFork for Workers {
    type Guarded = WorkerSlot;

    fn lock() -> &'static Mutex<WorkerSlot> {
        &WORKERS
    }

    fn installed() -> &'static AtomicBool {
        static INSTALLED: AtomicBool = AtomicBool::new(false);
        &INSTALLED
    }

    /// The parent's lingering helpers are not in the child, nor the
    /// callers of the splits posted: no helper of the child may join them
    /// (their slots stay taken, the callers' frames are gone).
    fn in_child(_slot: &mut WorkerSlot) {
        BOARD.post.store(0, Ordering::SeqCst);
        BOARD.lingering.store(0, Ordering::SeqCst);
    }
}

/// A value whose raw addresses point into memory its owner borrows shared
/// (read-only) while the tasks of a split use it: the one way the crate
/// shares such a value between threads.
pub(crate) struct ReadShared<T>(T);

// SAFETY: by `new`'s contract, through the value the tasks only read
// memory that is borrowed shared, which is what a shared borrow allows from
// any number of threads at once.
unsafe impl<T> Sync for ReadShared<T> {}

impl<T> ReadShared<T> {
    /// Shares `value` with the tasks of a split.
    ///
    /// # Safety
    /// Every address `value` holds points into memory borrowed shared for
    /// as long as the share is used, and `value` has no interior
    /// mutability: through it, tasks only read.
    pub(crate) unsafe fn new(value: T) -> Self {
        ReadShared(value)
    }
}

impl<T> std::ops::Deref for ReadShared<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The base of a buffer whose disjoint parts the tasks of a split write:
/// the one way the crate shares a buffer for writing between threads.
/// Holding the address is safe; every use of it is `unsafe`, and says why
/// its part is its own.
pub(crate) struct Disjoint<T>(*mut T);

// SAFETY: tasks only ever reach disjoint elements through the pointer (each
// use says how its parts are disjoint), as disjoint `chunks_mut` of the
// buffer would be reached; the elements themselves may move between
// threads (`T: Send`).
unsafe impl<T: Send> Sync for Disjoint<T> {}

impl<T> Disjoint<T> {
    /// Shares the buffer at `base` (a slice's or a vector's, whose
    /// capacity the tasks fill).
    pub(crate) fn new(base: *mut T) -> Self {
        Disjoint(base)
    }

    /// Element `i`'s address (a method, so that closures capture the whole
    /// `Sync` wrapper rather than its raw pointer field).
    #[inline(always)]
    pub(crate) fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }

    /// Writes `v` at element `i`.
    ///
    /// # Safety
    /// `i` is inside the buffer, and no other thread reads or writes it
    /// meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn put(&self, i: usize, v: T) {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.add(i).write(v) };
    }
}

/// Runs `task(0) .. task(n - 1)`, each exactly once, on the calling thread
/// and up to `threads - 1` pool workers.
///
/// The caller does not hand the work over and wait, as `install` would: it
/// claims tasks itself from the first moment, and workers join as they wake
/// up. A worker that wakes after the last task was claimed does nothing, and
/// the caller never waits for one to wake, only for those that took a task to
/// finish it. So a split costs the caller a wake-up call, not a wake-up: on a
/// VM, where waking a sleeping vCPU takes tens of microseconds, that is what
/// lets calls of a few tens of microseconds use a second core.
///
/// With helpers awake (lingering after an earlier split) the split costs a
/// few cache lines crossing between cores: the caller takes a [`Slot`],
/// writes the task into it and posts it on the [`Board`], which the helpers
/// watch; each joins with one atomic update of the slot's state. No lock,
/// no allocation, no pool lookup (see [`Slot`] and docs/performance.md).
pub(crate) fn for_each_task(threads: usize, n: usize, task: &(dyn Fn(usize) + Sync)) {
    let threads = threads.min(MAX_THREADS);
    let helpers = threads.min(n).saturating_sub(1);
    let Some(slot) = (helpers > 0).then(Slot::take).flatten() else {
        (0..n).for_each(task);
        return;
    };
    // SAFETY: only the lifetime is erased. `Team::drop` below (which also
    // runs if `task` panics on this thread) closes the slot and waits until
    // no helper is inside `task` before this frame, and `task` with it, can
    // end; a helper that comes later cannot join a closed slot.
    let erased: &'static (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(task) };
    // Declared before `team`, so dropped after it.
    let task_ref = TaskRef(erased);
    // SAFETY: the slot is this caller's (`take`) and closed, every helper of
    // its last split has left (its last owner waited for that in `finish`);
    // `task_ref` outlives `team`, whose drop waits for the helpers.
    let post = unsafe { slot.open(n, &task_ref, helpers) };
    let mut team = Team(Some(slot));
    // Helpers still awake from an earlier split take seats in this one; the
    // pool wakes the rest. The post comes before the count (both SeqCst),
    // so a helper counted here sees the post when it stops lingering, at
    // the latest (see `linger`).
    BOARD.post.store(post, Ordering::SeqCst);
    let awake = BOARD.lingering.load(Ordering::SeqCst).min(helpers);
    // Seats only for the helpers counted awake (more may have sat down
    // already, from a count this split did not see).
    slot.keep_seats(helpers - awake);
    let spawn = |count: usize| {
        if count == 0 {
            return;
        }
        let Some(pool) = worker_pool(threads - 1) else {
            return;
        };
        let called = std::time::Instant::now();
        for _ in 0..count {
            pool.spawn(move || {
                record_wake(called);
                let seen = BOARD.post.load(Ordering::SeqCst);
                // A helper that came too late for this split lingers all
                // the same: its wake-up is paid for, and the next call may
                // find it awake.
                if let Some(slot) = Slot::join(post, Seat::Woken) {
                    slot.help();
                }
                linger(seen);
            });
        }
    };
    spawn(helpers - awake);
    // The caller's first task, then a look at the seats.
    let _ = slot.claim_one(task);
    // Helpers counted awake that have not sat down by now went to another
    // caller's split: the pool wakes as many in their place.
    if slot.next.load(Ordering::Relaxed) < n {
        spawn(slot.take_seats());
    }
    slot.claim(task);
    if let Some(payload) = team.finish() {
        // The worker's own panic, message and all, continues on the caller.
        std::panic::resume_unwind(payload);
    }
}

/// A task borrowed from a [`for_each_task`] caller's frame, lifetime erased.
#[derive(Clone, Copy)]
struct TaskRef(&'static (dyn Fn(usize) + Sync));

/// Where lingering helpers look for work: the latest split posted, and how
/// many of them look. One cache line, which the helpers read while they
/// wait and a split writes once.
#[repr(align(128))]
struct Board {
    /// The latest split: its slot's number plus one in the low 32 bits, the
    /// slot's generation for it in the high ones; 0: none.
    post: AtomicU64,
    /// Helpers lingering now (see [`LINGER_US`]).
    lingering: AtomicUsize,
}

static BOARD: Board = Board {
    post: AtomicU64::new(0),
    lingering: AtomicUsize::new(0),
};

/// How a helper comes to a split: woken by the pool for it, or lingering
/// after an earlier one (which takes one of the seats the caller counted).
#[derive(Clone, Copy, PartialEq)]
enum Seat {
    Woken,
    Lingering,
}

/// Splits that can be posted at once; a caller that finds all taken (more
/// than this many threads splitting at the same moment, every core busy
/// already) runs its tasks alone.
const SLOTS: usize = 32;

static SLOT: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

// The slot's state word: helpers inside, seats left for lingering helpers
// (11 bits each: at most MAX_THREADS - 1 helpers), whether helpers may
// still join, whether the caller sleeps waiting for them, whether the last
// helper out is waking it, and the generation (the high 32 bits).
const INSIDE_ONE: u64 = 1;
const INSIDE: u64 = 0x7ff;
const SEAT_ONE: u64 = 1 << 11;
const SEATS: u64 = 0x7ff << 11;
const OPEN: u64 = 1 << 22;
const SLEEPING: u64 = 1 << 23;
const WAKING: u64 = 1 << 24;
const GEN_SHIFT: u32 = 32;

/// One split's meeting place, static so that a helper holding a stale post
/// reads a live slot (whose generation has moved on) rather than freed
/// memory: joining is then one atomic update that checks the generation.
///
/// A slot's life: a caller takes it (`owned`), writes the split into it and
/// opens it (`open`: a new generation), posts it; helpers join (`join`:
/// inside + 1, a seat fewer if lingering) and leave (inside - 1); the
/// caller closes it and waits for inside to reach 0 (`Team::finish`), then
/// gives it back. `n` and `task` are written by the owner before opening,
/// and read by helpers after joining, which acquires them.
#[repr(align(128))]
struct Slot {
    owned: AtomicBool,
    state: AtomicU64,
    /// The next unclaimed task number.
    next: AtomicUsize,
    /// The split's number of tasks.
    n: AtomicUsize,
    /// The caller's task, in the caller's frame (see `open`).
    task: AtomicPtr<TaskRef>,
    /// The caller while it sleeps waiting for the helpers inside (a lock
    /// taken only then).
    caller: Mutex<Option<std::thread::Thread>>,
    /// The payload of the first helper's task that panicked.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            owned: AtomicBool::new(false),
            state: AtomicU64::new(0),
            next: AtomicUsize::new(0),
            n: AtomicUsize::new(0),
            task: AtomicPtr::new(std::ptr::null_mut()),
            caller: Mutex::new(None),
            panic: Mutex::new(None),
        }
    }

    /// A free slot, now the caller's; `None` if every one is taken.
    fn take() -> Option<&'static Slot> {
        SLOT.iter().find(|s| {
            s.owned
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Writes the split of `n` tasks of `task` for up to `helpers` helpers
    /// (every seat given, see `keep_seats`) and opens it; its post.
    ///
    /// # Safety
    /// The slot is the caller's, closed, and no helper is inside it; `task`
    /// stays where it is until the caller has closed the slot and every
    /// helper has left it (`Team::finish`): helpers read it through its
    /// address.
    unsafe fn open(&self, n: usize, task: &TaskRef, helpers: usize) -> u64 {
        // Published by the store of `state` below (Release), which a
        // helper's join acquires.
        self.n.store(n, Ordering::Relaxed);
        self.task
            .store(std::ptr::from_ref(task).cast_mut(), Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        let gen = (self.state.load(Ordering::Relaxed) >> GEN_SHIFT).wrapping_add(1) & 0xffff_ffff;
        let seats = (helpers as u64).min(INSIDE) * SEAT_ONE;
        self.state
            .store((gen << GEN_SHIFT) | OPEN | seats, Ordering::Release);
        let number = SLOT.iter().position(|s| std::ptr::eq(s, self)).unwrap_or(0);
        (gen << GEN_SHIFT) | (number as u64 + 1)
    }

    /// Leaves seats for all but `woken` of the helpers: those the pool
    /// wakes come without one.
    fn keep_seats(&self, woken: usize) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                let seats = ((s & SEATS) / SEAT_ONE).saturating_sub(woken as u64);
                Some((s & !SEATS) | (seats * SEAT_ONE))
            });
    }

    /// Takes the seats no lingering helper sat in; how many.
    fn take_seats(&self) -> usize {
        let s = self.state.fetch_and(!SEATS, Ordering::AcqRel);
        ((s & SEATS) / SEAT_ONE) as usize
    }

    /// The slot of `post`, joined (one more helper inside) if it is still
    /// open in that generation and, for a lingering helper, has a seat.
    fn join(post: u64, seat: Seat) -> Option<&'static Slot> {
        let number = usize::try_from(post & 0xffff_ffff).ok()?.checked_sub(1)?;
        let slot = SLOT.get(number)?;
        let gen = post >> GEN_SHIFT;
        slot.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                let live = s >> GEN_SHIFT == gen && s & OPEN != 0 && s & INSIDE < INSIDE;
                match seat {
                    _ if !live => None,
                    Seat::Woken => Some(s + INSIDE_ONE),
                    Seat::Lingering if s & SEATS == 0 => None,
                    Seat::Lingering => Some(s + INSIDE_ONE - SEAT_ONE),
                }
            })
            .ok()
            .map(|_| slot)
    }

    /// Runs the next unclaimed task; whether there was one.
    fn claim_one(&self, task: &(dyn Fn(usize) + Sync)) -> bool {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let claimed = i < self.n.load(Ordering::Relaxed);
        if claimed {
            task(i);
        }
        claimed
    }

    /// Runs unclaimed tasks until none is left.
    fn claim(&self, task: &(dyn Fn(usize) + Sync)) {
        while self.claim_one(task) {}
    }

    /// A joined helper's part: claims tasks until none is left, then leaves.
    fn help(&self) {
        let task = self.task.load(Ordering::Relaxed);
        // SAFETY: joined, so the owner's store of the address is acquired,
        // and the task it points to stays in place until this helper has
        // left (`open`'s contract).
        if let Some(&task) = unsafe { task.as_ref() } {
            // A panic must reach the caller, not abort the process (rayon's
            // default for a panicking spawned job).
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.claim(task.0)));
            if let Err(payload) = ok {
                let mut first = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(payload);
            }
        }
        self.leave();
    }

    /// One helper fewer inside; the last one out wakes the caller if it
    /// sleeps. Nothing of the split may be touched after this.
    fn leave(&self) {
        let before = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                let s = s - INSIDE_ONE;
                Some(if s & INSIDE == 0 && s & SLEEPING != 0 {
                    s | WAKING
                } else {
                    s
                })
            })
            .unwrap_or_else(|s| s);
        let after = before - INSIDE_ONE;
        if after & INSIDE == 0 && after & SLEEPING != 0 {
            // The caller stored its handle before it set SLEEPING, and
            // waits for WAKING to clear before it gives the slot back.
            let caller = self
                .caller
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            self.state.fetch_and(!WAKING, Ordering::Release);
            if let Some(caller) = caller {
                caller.unpark();
            }
        }
    }

    /// Whether every helper has left, the last one done waking the caller.
    fn empty(&self) -> bool {
        self.state.load(Ordering::Acquire) & (INSIDE | WAKING) == 0
    }
}

/// A helper's wait after its split, `seen` the post it knew of last: for up
/// to [`linger_us`] it looks for a newer post and joins it, then waits
/// again; otherwise it returns to the pool, which puts it to sleep.
///
/// For the first [`SPIN_BEFORE_YIELD`] it looks without giving up its core
/// (a `pause` between looks), so that calls made back to back (a service's
/// batches) find it looking; then it yields between looks, so that other
/// runnable threads are not starved.
fn linger(mut seen: u64) {
    loop {
        let time = std::time::Duration::from_micros(linger_us());
        if time.is_zero() {
            return;
        }
        if BOARD.lingering.fetch_add(1, Ordering::SeqCst) < MAX_LINGERING {
            let start = std::time::Instant::now();
            while BOARD.post.load(Ordering::SeqCst) == seen {
                let waited = start.elapsed();
                if waited >= time {
                    break;
                }
                if waited < SPIN_BEFORE_YIELD {
                    for _ in 0..16 {
                        std::hint::spin_loop();
                    }
                } else {
                    std::thread::yield_now();
                }
            }
        }
        BOARD.lingering.fetch_sub(1, Ordering::SeqCst);
        // A caller that counted this helper posted before counting, so the
        // post shows here even if the wait above timed out just then (or
        // was skipped, enough others lingering).
        let now = BOARD.post.load(Ordering::SeqCst);
        if now == seen {
            return;
        }
        seen = now;
        if let Some(slot) = Slot::join(now, Seat::Lingering) {
            slot.help();
        }
    }
}

/// How long a lingering helper, or a caller waiting for its helpers,
/// looks without yielding its core (see [`linger`]).
const SPIN_BEFORE_YIELD: std::time::Duration = std::time::Duration::from_micros(20);

/// How long the caller waits awake for helpers still inside a task before
/// it sleeps. A helper that woke late is usually in its last task when the
/// caller runs out of them; had the caller slept, the helper's wake-up call
/// would have cost it a wake-up, tens of microseconds on a VM. After
/// [`SPIN_BEFORE_YIELD`] the wait yields the core between looks
/// (`sched_yield`), so that a dask thread on the other core is not starved.
const SPIN_BEFORE_SLEEP: std::time::Duration = std::time::Duration::from_micros(100);

/// The caller's handle on its slot: dropping it (normally or while
/// unwinding) closes the slot and waits for the helpers inside.
struct Team(Option<&'static Slot>);

impl Team {
    /// Closes the slot, waits for the helpers inside and gives the slot
    /// back; what the first helper that panicked panicked with.
    fn finish(&mut self) -> Option<Box<dyn Any + Send>> {
        let slot = self.0.take()?;
        let state = slot.state.fetch_and(!OPEN, Ordering::AcqRel);
        if state & INSIDE != 0 {
            // A helper is finishing its last task, a few microseconds of
            // work: wait for it awake. Sleeping costs a wake-up, tens of
            // microseconds on a VM, which calls of that size cannot afford.
            let start = std::time::Instant::now();
            while !slot.empty() {
                let waited = start.elapsed();
                if waited >= SPIN_BEFORE_SLEEP {
                    break;
                }
                if waited < SPIN_BEFORE_YIELD {
                    std::hint::spin_loop();
                } else {
                    // Yielding rather than spinning in place: with more
                    // threads than cores (a dask worker's threads each
                    // making calls), the helper, or whatever else is
                    // runnable, gets this core.
                    std::thread::yield_now();
                }
            }
            if !slot.empty() {
                *slot.caller.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(std::thread::current());
                slot.state.fetch_or(SLEEPING, Ordering::AcqRel);
                while !slot.empty() {
                    std::thread::park();
                }
                slot.state.fetch_and(!SLEEPING, Ordering::AcqRel);
                *slot.caller.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        let panic = slot.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        slot.owned.store(false, Ordering::Release);
        panic
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
#[path = "threads_tests.rs"]
mod tests;
