//! Locks held across `fork`, one rule for the crate's two (the worker pool's
//! in `threads`, the result buffers' in `pool`).
//!
//! A child process gets only the thread that called `fork`: a lock that any
//! other thread held at that moment stays held in the child for ever, and
//! the child's first call needing it would wait for ever. So just before a
//! fork the forking thread takes the lock itself, and right after it
//! releases it, in the parent and in the child alike; in the child, the
//! owner may first reset what it guards ([`HeldAcrossFork::in_child`]).

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A lock of the crate that `fork` must not copy while another thread
/// holds it.
pub(crate) trait HeldAcrossFork: 'static {
    /// What the lock guards.
    type Guarded: 'static;

    /// The lock.
    fn lock() -> &'static Mutex<Self::Guarded>;

    /// Whether the handlers are registered.
    fn installed() -> &'static AtomicBool;

    /// Run in the child, lock held, before it is released.
    fn in_child(_guarded: &mut Self::Guarded) {}
}

thread_local! {
    /// The locks the forking thread holds across `fork` (in the child the
    /// same thread, with the same thread-local storage).
    static HELD: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// The lock of `L`, poisoned or not: a poisoned lock only means another
/// thread panicked while holding it, and what it guards is kept whole by
/// its owner's code.
pub(crate) fn lock<L: HeldAcrossFork>() -> MutexGuard<'static, L::Guarded> {
    L::lock().lock().unwrap_or_else(|e| e.into_inner())
}

extern "C" fn before_fork<L: HeldAcrossFork>() {
    let held = lock::<L>();
    HELD.with(|h| h.borrow_mut().push(Box::new(held)));
}

/// The guard of `L` that `before_fork` stored.
fn held<L: HeldAcrossFork>() -> Option<MutexGuard<'static, L::Guarded>> {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        let i = h
            .iter()
            .position(|g| g.is::<MutexGuard<'static, L::Guarded>>())?;
        h.remove(i).downcast().ok().map(|g| *g)
    })
}

extern "C" fn after_fork_in_parent<L: HeldAcrossFork>() {
    drop(held::<L>());
}

extern "C" fn after_fork_in_child<L: HeldAcrossFork>() {
    // The C library's own locks (malloc's) are usable again here.
    if let Some(mut guard) = held::<L>() {
        L::in_child(&mut guard);
    }
}

/// Registers `L`'s handlers, once per process (a child inherits them).
///
/// Called when the extension module is initialised, before any other
/// thread can make a call: registering lazily, on the first parallel call,
/// left a child forked during the registration with a one-time lock held
/// for ever.
///
/// What keeps a fork from deadlocking in `before_fork`, which waits for the
/// lock's holder while the forking thread holds the GIL (Python forks with
/// it) and the other handlers' locks, is each owner's rule: no holder of
/// its lock ever waits for the GIL, another of ndgather's locks, or
/// anything else that could block for ever.
pub(crate) fn install<L: HeldAcrossFork>() -> std::io::Result<()> {
    if L::installed().swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    // SAFETY: the handlers are plain functions that live as long as the
    // program; what keeps them from deadlocking is said above.
    let rc = unsafe {
        libc::pthread_atfork(
            Some(before_fork::<L>),
            Some(after_fork_in_parent::<L>),
            Some(after_fork_in_child::<L>),
        )
    };
    if rc != 0 {
        L::installed().store(false, Ordering::Release);
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}
