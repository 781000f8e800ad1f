//! Tests of `threads.rs`.

use super::*;

#[test]
fn thread_counts_outside_1_to_max_are_errors() {
    assert!(set_num_threads(0).is_err());
    assert!(set_num_threads(-3).is_err());
    assert!(set_num_threads(MAX_THREADS as i64 + 1).is_err());
    assert!(set_num_threads(1 << 61).is_err());
    assert!(set_num_threads(i64::MAX).is_err());
}

#[test]
fn huge_thread_counts_are_capped() {
    let counts: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
    for_each_task(usize::MAX, counts.len(), &|i| {
        counts[i].fetch_add(1, Ordering::Relaxed);
    });
    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
}

#[test]
fn a_worker_panic_reaches_the_caller_with_its_message() {
    let caught = std::panic::catch_unwind(|| {
        for_each_task(2, 200, &|_| {
            let on_worker = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("ndgather-"));
            if on_worker {
                panic!("worker says no");
            }
            // Slow enough that a worker wakes before the caller is done.
            std::thread::sleep(std::time::Duration::from_millis(1));
        })
    });
    let payload = caught.expect_err("the worker's panic");
    let message = payload.downcast_ref::<&str>().copied();
    assert_eq!(message, Some("worker says no"));
}

#[test]
fn every_task_runs_once() {
    for threads in [1, 2, 4] {
        for n in [0, 1, 2, 3, 100] {
            let counts: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            for_each_task(threads, n, &|i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
    }
}

#[test]
fn a_panicking_task_reaches_the_caller() {
    for threads in [1, 2] {
        let caught = std::panic::catch_unwind(|| {
            for_each_task(threads, 64, &|i| {
                if i % 7 == 3 {
                    panic!("task {i}");
                }
            })
        });
        assert!(caught.is_err());
    }
}

#[test]
fn worker_pool_runs_work() {
    // Sized for the threads set (the CPUs here) when that is more.
    let pool = worker_pool(3).expect("a pool");
    let want = 3.max(num_threads() - 1);
    assert_eq!(pool.install(rayon::current_num_threads), want);
}

#[test]
fn back_to_back_splits_from_several_callers_run_every_task_once() {
    // Helpers linger after a split and join whichever split was posted
    // last: every task of every caller's split must still run exactly once,
    // and no split may wait for a helper that joined another.
    std::thread::scope(|s| {
        for caller in 0..4 {
            s.spawn(move || {
                for round in 0..300 {
                    let n = 1 + (caller * 7 + round) % 40;
                    let counts: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    for_each_task(3, n, &|i| {
                        counts[i].fetch_add(1, Ordering::Relaxed);
                    });
                    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
                }
            });
        }
    });
}

/// A linger of 50 ms while it lives, the default after: the default 200 us
/// is shorter than a busy 2-core test machine may keep a helper off its
/// core (CI saw that). Other tests only see helpers yield longer.
struct LongLinger;

impl LongLinger {
    fn new() -> LongLinger {
        set_linger_us(50_000).expect("within bounds");
        LongLinger
    }
}

impl Drop for LongLinger {
    fn drop(&mut self) {
        LINGER_NOW_US.store(LINGER_US, Ordering::Relaxed);
    }
}

#[test]
fn a_helper_stays_awake_after_its_split() {
    // After its last task the helper lingers (linger_us) before it sleeps,
    // so that the next split finds it awake instead of paying for a wake-up.
    let _linger = LongLinger::new();
    let caller = std::thread::current().id();
    // A split where no helper got a task (the pool's thread was late) shows
    // nothing: try again, a few times at most.
    let mut helped = false;
    let mut seen = false;
    for _ in 0..20 {
        let helper_ran = AtomicBool::new(false);
        for_each_task(2, 8, &|_| {
            if std::thread::current().id() != caller {
                helper_ran.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        });
        if !helper_ran.load(Ordering::Relaxed) {
            continue;
        }
        helped = true;
        let start = std::time::Instant::now();
        while !seen && start.elapsed() < std::time::Duration::from_millis(40) {
            seen = BOARD.lingering.load(Ordering::SeqCst) > 0;
        }
        break;
    }
    assert!(helped, "no helper took a task in 20 splits");
    assert!(seen, "no helper lingered");
}

#[test]
fn calls_close_together_wake_a_helper_for_the_calls_after() {
    let _linger = LongLinger::new();
    // The first call notes its time; the second, well within the linger,
    // wakes a helper, which lingers for the calls after it.
    wake_for_the_next_calls(2, 1000);
    wake_for_the_next_calls(2, 1000);
    let start = std::time::Instant::now();
    let mut seen = false;
    while !seen && start.elapsed() < std::time::Duration::from_secs(5) {
        seen = helpers_awake() > 0;
        std::thread::yield_now();
    }
    assert!(seen, "no helper woke to linger");
    // Its wake-up was timed: splits now know what waking costs.
    assert!(wake_ns() > 0);
}

/// Held by the tests that set the wake-up time, which the process shares.
static WAKE_SETTING: Mutex<()> = Mutex::new(());

#[test]
fn wake_up_times_outside_0_to_a_second_are_errors() {
    let _setting = WAKE_SETTING.lock().unwrap_or_else(|e| e.into_inner());
    assert!(set_wake_us(Some(-1)).is_err());
    assert!(set_wake_us(Some(MAX_LINGER_US as i64 + 1)).is_err());
    assert!(set_wake_us(None).is_ok());
}

#[test]
fn the_wake_up_estimate_follows_fast_wake_ups_and_shrugs_off_slow_ones() {
    assert_eq!(next_wake_estimate(0, 45_000), 45_000);
    assert_eq!(next_wake_estimate(45_000, 15_000), 30_000);
    // A helper kept off its core for 20 ms moves the estimate by at most
    // 3/16 of itself.
    assert_eq!(next_wake_estimate(40_000, 20_000_000), 47_500);
    assert_eq!(next_wake_estimate(40_000, 48_000), 40_500);
    // Ten such in a row, then fast ones again: back within twice the truth
    // after a handful.
    let mut estimate = 45_000;
    for _ in 0..10 {
        estimate = next_wake_estimate(estimate, WAKE_SAMPLE_MAX_NS);
    }
    assert!(estimate < 6 * 45_000, "{estimate}");
    for _ in 0..4 {
        estimate = next_wake_estimate(estimate, 45_000);
    }
    assert!(estimate < 2 * 45_000, "{estimate}");
}

#[test]
fn one_call_in_a_few_that_ran_alone_measures_a_wake_up_anew() {
    // Other tests' wake-ups restart the count: splits come at most one in
    // REMEASURE_EVERY calls, and come.
    let calls = 100 * REMEASURE_EVERY;
    let splits = (0..calls).filter(|_| remeasure_wake_now()).count();
    assert!(splits >= 1 && splits <= calls / REMEASURE_EVERY, "{splits}");
    // A wake-up time set by the user is not measured.
    let _setting = WAKE_SETTING.lock().unwrap_or_else(|e| e.into_inner());
    set_wake_us(Some(45)).expect("within bounds");
    let splits = (0..calls).filter(|_| remeasure_wake_now()).count();
    set_wake_us(None).expect("no time");
    assert_eq!(splits, 0);
}

#[test]
fn a_stale_post_joins_nothing() {
    fn nothing(_: usize) {}
    let erased: &'static (dyn Fn(usize) + Sync) = &nothing;
    let slot = Slot::take().expect("a free slot");
    let task = TaskRef(erased);
    // SAFETY: the slot was just taken: closed, nobody inside; `task` lives
    // to the end of the test.
    let first = unsafe { slot.open(4, &task, 1) };
    let mut team = Team(Some(slot));
    assert!(team.finish().is_none());
    // Taken again (or another), opened again: the first post is stale.
    let slot = Slot::take().expect("a free slot");
    // SAFETY: as above.
    let second = unsafe { slot.open(4, &task, 1) };
    let mut team = Team(Some(slot));
    assert_ne!(first, second);
    assert!(Slot::join(first, Seat::Woken).is_none());
    let joined = Slot::join(second, Seat::Woken).expect("an open slot");
    assert!(!joined.empty());
    joined.leave();
    assert!(joined.empty());
    assert!(team.finish().is_none());
    // Once closed, not even the latest post joins.
    assert!(Slot::join(second, Seat::Woken).is_none());
    // Posts naming no slot.
    assert!(Slot::join(0, Seat::Woken).is_none());
    assert!(Slot::join((1 << GEN_SHIFT) | (SLOTS as u64 + 1), Seat::Woken).is_none());
}

#[test]
fn lingering_helpers_take_seats_and_woken_ones_need_none() {
    fn nothing(_: usize) {}
    let erased: &'static (dyn Fn(usize) + Sync) = &nothing;
    let slot = Slot::take().expect("a free slot");
    let task = TaskRef(erased);
    // SAFETY: the slot was just taken: closed, nobody inside; `task` lives
    // to the end of the test.
    let post = unsafe { slot.open(8, &task, 3) };
    let mut team = Team(Some(slot));
    // Two of the three helpers woken by the pool: one seat left.
    slot.keep_seats(2);
    let lingering = Slot::join(post, Seat::Lingering).expect("a seat");
    assert!(Slot::join(post, Seat::Lingering).is_none(), "no seat left");
    let woken = Slot::join(post, Seat::Woken).expect("no seat needed");
    assert_eq!(slot.take_seats(), 0);
    lingering.leave();
    woken.leave();
    assert!(team.finish().is_none());
}

#[test]
fn the_caller_waits_for_a_slow_helper() {
    // The helper's task outlasts the caller's wait awake: the caller sleeps
    // and the helper, leaving last, wakes it; its writes are seen.
    let _linger = LongLinger::new();
    let caller = std::thread::current().id();
    for _ in 0..20 {
        let done: Vec<AtomicBool> = (0..2).map(|_| AtomicBool::new(false)).collect();
        let helper_ran = AtomicBool::new(false);
        for_each_task(2, 2, &|i| {
            if std::thread::current().id() != caller {
                helper_ran.store(true, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(3));
            } else {
                // Long enough for the helper to take the other task.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            done[i].store(true, Ordering::Relaxed);
        });
        assert!(done.iter().all(|d| d.load(Ordering::Relaxed)));
        if helper_ran.load(Ordering::Relaxed) {
            return;
        }
    }
    panic!("no helper took a task in 20 splits");
}

#[test]
fn with_every_slot_taken_a_split_still_runs_every_task() {
    // The caller runs its tasks alone (unless another test's split gives
    // a slot back meanwhile: then it splits, which must be as good).
    let taken: Vec<&'static Slot> = std::iter::from_fn(Slot::take).collect();
    let counts: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
    for_each_task(2, 16, &|i| {
        counts[i].fetch_add(1, Ordering::Relaxed);
    });
    for slot in taken {
        slot.owned.store(false, Ordering::Release);
    }
    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
}
