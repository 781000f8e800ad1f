//! A pool of large output buffers whose pages are already mapped.
//!
//! A fresh large allocation costs a page fault and a zeroed page per 4 KiB
//! on first write: for a gather that is often more time than the copy
//! itself. Runtimes avoid it with an arena (onnxruntime); this pool does the
//! same for ndgather's results: when a result array is freed, its buffer
//! comes back here and the next result of about the same size reuses it.
//!
//! What it keeps is bounded three ways, so that a long-running process does
//! not sit on memory it no longer uses:
//! - only buffers of at least [`POOL_MIN_BYTES`] are pooled, up to a total
//!   [`set_limit`] sets (default [`DEFAULT_POOL_BYTES`]; 0 turns pooling off);
//! - a buffer nobody reused for [`IDLE_RELEASE`] is returned to the system
//!   by a small thread that runs only while the pool holds something;
//! - [`release`] returns everything at once;
//! - a child process drops what it inherited from its parent as it is
//!   forked (see [`Buffers`]).
//!
//! Buffers are mapped straight from the kernel (`mmap`) so that freeing one
//! really gives its memory back: the C allocator would keep buffers of a few
//! MiB in its heap, where they still count in the process's RSS.

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::fork::{self, HeldAcrossFork};
use crate::kept;

/// Smaller buffers come from the ordinary allocator, which recycles them
/// well enough.
pub(crate) const POOL_MIN_BYTES: usize = 1 << 20;

/// What the pool may keep when no limit is set.
pub(crate) const DEFAULT_POOL_BYTES: usize = 1 << 30;

/// How long a freed buffer waits for reuse before it goes back to the
/// system. Long enough for a process that makes a large result every few
/// seconds to keep its buffer (the interleaved benchmark's rounds take up
/// to 5 s on a loaded machine); short enough that a process that stopped
/// making large results gives the memory back soon after.
#[cfg(not(test))]
pub(crate) const IDLE_RELEASE: Duration = Duration::from_secs(10);
/// The same, short, so that the unit test of idle release is quick.
#[cfg(test)]
pub(crate) const IDLE_RELEASE: Duration = Duration::from_millis(300);

/// A pooled allocation of `capacity` bytes, page-aligned.
#[derive(Debug)]
pub(crate) struct Buffer {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: a Buffer is a uniquely owned mapping, like a Box<[u8]>.
unsafe impl Send for Buffer {}

impl Buffer {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn allocate(capacity: usize) -> Option<Buffer> {
        // SAFETY: an anonymous private mapping of a non-zero length (callers
        // ask for at least POOL_MIN_BYTES); it aliases nothing.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                capacity,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // A result is written right after it is made: 2 MiB pages take a
        // fault where 4 KiB ones take 512 (AMD kind, `rows_1m_256b`'s first
        // new array: 78 -> 33-40 ms; docs/performance.md).
        crate::huge_pages::advise(ptr.cast(), capacity);
        NonNull::new(ptr.cast()).map(|ptr| Buffer { ptr, capacity })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `allocate` with exactly this
        // length, and nothing refers to it any more (we own it).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.capacity) };
    }
}

/// The free buffers, oldest first, each with the time it came back.
pub(crate) struct FreeBuffers {
    free: Vec<(Buffer, Instant)>,
    bytes: usize,
    /// Whether the release thread runs (or is being started).
    releasing: bool,
}

impl FreeBuffers {
    /// Takes out the buffers that went over `keep` bytes (oldest first) or
    /// that waited longer than [`IDLE_RELEASE`]; the caller frees them
    /// after unlocking.
    fn evict(&mut self, keep: usize, now: Instant) -> Vec<(Buffer, Instant)> {
        let stale = self
            .free
            .iter()
            .take_while(|(_, since)| now.duration_since(*since) >= IDLE_RELEASE)
            .count();
        let mut n = stale;
        let mut bytes: usize = self.free[n..].iter().map(|(b, _)| b.capacity).sum();
        while bytes > keep {
            bytes -= self.free[n].0.capacity;
            n += 1;
        }
        self.bytes = bytes;
        self.free.drain(..n).collect()
    }
}

/// The freed result buffers waiting for reuse.
static RESULT_BUFFERS: Mutex<FreeBuffers> = Mutex::new(FreeBuffers {
    free: Vec::new(),
    bytes: 0,
    releasing: false,
});

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_POOL_BYTES);

fn lock() -> MutexGuard<'static, FreeBuffers> {
    // Nothing panics while holding the lock; the free list is always whole.
    fork::lock::<Buffers>()
}

/// The most bytes of freed buffers the pool keeps.
pub(crate) fn limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// Sets the most bytes of freed buffers the pool keeps (0: none, pooling
/// off), releasing what is over the new limit.
pub(crate) fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
    let evicted = lock().evict(bytes, Instant::now());
    drop(evicted); // freed outside the lock
}

/// The bytes of freed buffers the pool holds now.
pub(crate) fn held_bytes() -> usize {
    lock().bytes
}

/// Returns every pooled buffer to the system; how many bytes that was.
pub(crate) fn release() -> usize {
    // Freed after the lock, which the statement's end releases.
    let free = lock().evict(0, Instant::now());
    free.iter().map(|(b, _)| b.capacity).sum()
}

/// A buffer of at least `len` bytes: a pooled one of a close size if there
/// is one, else a new mapping. `None` if `len` is below [`POOL_MIN_BYTES`],
/// the pool is off, or memory is exhausted.
pub(crate) fn take(len: usize) -> Option<Buffer> {
    if len < POOL_MIN_BYTES || limit() == 0 {
        return None;
    }
    {
        let mut pool = lock();
        // Best fit among buffers at most 25% larger than asked for.
        let most = len.saturating_add(len / 4);
        let best = pool
            .free
            .iter()
            .enumerate()
            .filter(|(_, (b, _))| (len..=most).contains(&b.capacity))
            .min_by_key(|(_, (b, _))| b.capacity)
            .map(|(i, _)| i);
        if let Some(i) = best {
            // `remove`, not `swap_remove`: the list stays oldest first.
            let (buffer, _) = pool.free.remove(i);
            pool.bytes -= buffer.capacity;
            return Some(buffer);
        }
    }
    Buffer::allocate(len)
}

/// Returns a buffer to the pool, freeing the oldest pooled buffers if it
/// would hold more than its limit, and those idle too long.
pub(crate) fn give_back(buffer: Buffer) {
    let limit = limit();
    if buffer.capacity > limit {
        return;
    }
    let now = Instant::now();
    // The most recently used buffer is the likeliest to be asked for again:
    // make room for it by freeing the oldest ones.
    let (evicted, start) = {
        let mut pool = lock();
        let evicted = pool.evict(limit - buffer.capacity, now);
        pool.bytes += buffer.capacity;
        pool.free.push((buffer, now));
        let start = !pool.releasing;
        pool.releasing = true;
        (evicted, start)
    };
    drop(evicted); // freed outside the lock

    // Started outside the lock too: a fork waits for the lock's holder, so
    // the lock is only ever held to look at or edit the list.
    if start {
        start_releaser();
    }
}

/// A call's own buffer of at least `len` bytes ([`Scratch::take`]): a
/// pooled one for a large `len`, else the calling thread's kept one
/// (`kept`) or, over what is kept, a new allocation; a pooled one goes back
/// to the pool, a kept one to its thread, when the scratch is dropped.
pub(crate) struct Scratch {
    pooled: Option<Buffer>,
    fresh: Vec<u8>,
    len: usize,
}

thread_local! {
    /// The scratch a calling thread keeps (see `kept`).
    static KEPT_SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Scratch {
    /// `None` if no buffer could be had.
    pub(crate) fn take(len: usize) -> Option<Scratch> {
        let pooled = take(len);
        let fresh = if pooled.is_some() {
            Vec::new()
        } else if kept::fits::<u8>(len) {
            kept::take(&KEPT_SCRATCH, len)?
        } else {
            // Left unwritten until `initialised` asks: the saved-rows path
            // writes it through `as_mut_ptr`.
            let mut fresh = Vec::new();
            fresh.try_reserve_exact(len).ok()?;
            fresh
        };
        Some(Scratch { pooled, fresh, len })
    }

    /// Where its `len` bytes start, for writing them through raw pointers
    /// (a new allocation's bytes are uninitialised until written).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        match &self.pooled {
            Some(buffer) => buffer.as_ptr(),
            None => self.fresh.as_mut_ptr(),
        }
    }

    /// Its `len` bytes as a slice, holding whatever they held (zeros, or
    /// what an earlier call left in a kept buffer; a new allocation's
    /// zeroed first).
    pub(crate) fn initialised(&mut self) -> &mut [u8] {
        match &self.pooled {
            // SAFETY: a pool buffer is a mapping of at least `len` bytes
            // (`take(len)`), readable and writable, which only this scratch
            // holds until it is dropped, and the slice borrows it.
            Some(buffer) => unsafe { std::slice::from_raw_parts_mut(buffer.as_ptr(), self.len) },
            None => {
                // Within the capacity reserved in `take`: no allocation.
                if self.fresh.len() < self.len {
                    self.fresh.resize(self.len, 0);
                }
                &mut self.fresh[..self.len]
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(buffer) = self.pooled.take() {
            give_back(buffer);
        } else {
            kept::keep(&KEPT_SCRATCH, std::mem::take(&mut self.fresh));
        }
    }
}

/// Starts the thread that frees idle buffers. If it cannot start, idle
/// buffers are still freed by the next `give_back` (which tries again) or
/// `release`.
fn start_releaser() {
    let started = std::thread::Builder::new()
        .name("ndgather-pool".into())
        .spawn(release_idle_buffers);
    if started.is_err() {
        lock().releasing = false;
    }
}

/// The release thread: sleeps until the oldest buffer has idled for
/// [`IDLE_RELEASE`], frees what has, and ends when the pool is empty.
fn release_idle_buffers() {
    loop {
        let (evicted, wait) = {
            let mut pool = lock();
            let now = Instant::now();
            let evicted = pool.evict(limit(), now);
            match pool.free.first() {
                Some((_, since)) => (
                    evicted,
                    IDLE_RELEASE.saturating_sub(now.duration_since(*since)),
                ),
                None => {
                    pool.releasing = false;
                    return;
                }
            }
        };
        drop(evicted);
        std::thread::sleep(wait);
    }
}

/// The pool's lock, held across `fork` (see `fork`); the child empties the
/// pool. It drops every buffer it inherited: they are the parent's pages,
/// shared copy-on-write, so reusing one would copy each page on its first
/// write (no faster than fresh memory) while the pages stay counted in the
/// child's memory; and the release thread that would free them after
/// [`IDLE_RELEASE`] is not there in the child. A pre-fork server that warmed
/// up before forking would otherwise keep its whole pool in every worker for
/// as long as the worker lives. No holder of the lock ever waits for
/// anything that could block for ever: it is held only to look at or edit
/// the free list; buffers are unmapped, and the release thread started,
/// after unlocking.
pub(crate) struct Buffers;

impl HeldAcrossFork for Buffers {
    type Guarded = FreeBuffers;

    fn lock() -> &'static Mutex<FreeBuffers> {
        &RESULT_BUFFERS
    }

    fn installed() -> &'static AtomicBool {
        static INSTALLED: AtomicBool = AtomicBool::new(false);
        &INSTALLED
    }

    fn in_child(pool: &mut FreeBuffers) {
        pool.bytes = 0;
        pool.releasing = false;
        // Unmapped here, lock held: only this thread is left in the child.
        pool.free.clear();
    }
}

/// Held by a test that counts the pool's bytes, and by every other test
/// whose gathers take buffers from it, so that the count sees no buffer of
/// another test running beside it.
#[cfg(test)]
pub(crate) fn tests_alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test, since every part shares the process-wide pool.
    #[test]
    fn buffers_are_reused_bounded_and_released() {
        let _alone = tests_alone();
        // Buffers an earlier test gave back are still held: start empty.
        release();
        assert!(take(1000).is_none(), "small requests are not pooled");

        let a = take(3 << 20).expect("allocation");
        let p = a.as_ptr();
        give_back(a);
        assert_eq!(held_bytes(), 3 << 20);
        let b = take((3 << 20) - 100).expect("allocation");
        assert_eq!(b.as_ptr(), p, "a close size reuses the buffer");
        assert!(b.capacity() >= (3 << 20) - 100);
        assert_eq!(held_bytes(), 0);
        // Far smaller requests get a buffer of their own.
        let c = take(1 << 20).expect("allocation");
        assert_ne!(c.as_ptr(), p);
        give_back(b);
        give_back(c);
        assert_eq!(held_bytes(), 4 << 20);

        // A lower limit frees the oldest first.
        set_limit(2 << 20);
        assert_eq!(held_bytes(), 1 << 20);
        set_limit(DEFAULT_POOL_BYTES);

        assert_eq!(release(), 1 << 20);
        assert_eq!(held_bytes(), 0);

        // Idle buffers leave by themselves.
        give_back(take(2 << 20).expect("allocation"));
        assert_eq!(held_bytes(), 2 << 20);
        std::thread::sleep(IDLE_RELEASE + Duration::from_millis(500));
        assert_eq!(held_bytes(), 0);

        // A call's scratch: a small one is a zeroed allocation of its
        // own, a large one a pool buffer that goes back when dropped.
        let mut small = Scratch::take(1000).expect("allocation");
        assert!(small.pooled.is_none());
        assert_eq!(small.initialised().len(), 1000);
        let mut large = Scratch::take(2 << 20).expect("allocation");
        let at = large.as_mut_ptr();
        assert_eq!(large.initialised().len(), 2 << 20);
        drop(large);
        assert_eq!(held_bytes(), 2 << 20);
        let again = take(2 << 20).expect("allocation");
        assert_eq!(again.as_ptr(), at, "the scratch's buffer is reused");
        give_back(again);
        release();
    }
}
