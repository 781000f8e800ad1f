//! A pool of large output buffers whose pages are already mapped.
//!
//! A fresh large allocation costs a page fault and a zeroed page per 4 KiB
//! on first write: for a gather that is often more time than the copy
//! itself. Runtimes avoid it with an arena (onnxruntime); this pool does the
//! same for ndgather's results: when a result array is freed, its buffer
//! comes back here and the next result of about the same size reuses it.
//! Only buffers of at least [`POOL_MIN_BYTES`] are pooled, up to a total set
//! by `NDGATHER_POOL_BYTES` (default [`DEFAULT_POOL_BYTES`]; 0 disables it).

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Smaller buffers come from the ordinary allocator, which recycles them
/// well enough.
pub const POOL_MIN_BYTES: usize = 1 << 20;

/// What the pool may keep when no limit is set.
pub const DEFAULT_POOL_BYTES: usize = 1 << 30;

/// Alignment of pooled buffers: a cache line, more than any dtype needs.
const ALIGN: usize = 64;

/// A pooled allocation: `capacity` bytes aligned to [`ALIGN`].
#[derive(Debug)]
pub struct Buffer {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: a Buffer is a uniquely owned heap allocation, like a Box<[u8]>.
unsafe impl Send for Buffer {}

impl Buffer {
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn layout(capacity: usize) -> Option<Layout> {
        Layout::from_size_align(capacity, ALIGN).ok()
    }

    fn allocate(capacity: usize) -> Option<Buffer> {
        let layout = Buffer::layout(capacity)?;
        // SAFETY: capacity >= POOL_MIN_BYTES > 0, so the layout is not zero-sized.
        let ptr = NonNull::new(unsafe { alloc::alloc(layout) })?;
        Some(Buffer { ptr, capacity })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(layout) = Buffer::layout(self.capacity) {
            // SAFETY: allocated in `allocate` with exactly this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

struct Pool {
    free: Vec<Buffer>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    free: Vec::new(),
    bytes: 0,
});

/// `usize::MAX` until set: read `NDGATHER_POOL_BYTES` on first use.
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

fn limit() -> usize {
    match LIMIT.load(Ordering::Relaxed) {
        usize::MAX => {
            let n = std::env::var("NDGATHER_POOL_BYTES")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(DEFAULT_POOL_BYTES)
                .min(usize::MAX - 1);
            LIMIT.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

fn lock() -> std::sync::MutexGuard<'static, Pool> {
    // A panic while holding the lock leaves a valid (if partial) free list.
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A buffer of at least `len` bytes: a pooled one of a close size if there
/// is one, else a new allocation. `None` if `len` is below
/// [`POOL_MIN_BYTES`], the pool is disabled, or memory is exhausted.
pub fn take(len: usize) -> Option<Buffer> {
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
            .filter(|(_, b)| (len..=most).contains(&b.capacity))
            .min_by_key(|(_, b)| b.capacity)
            .map(|(i, _)| i);
        if let Some(i) = best {
            let buffer = pool.free.swap_remove(i);
            pool.bytes -= buffer.capacity;
            return Some(buffer);
        }
    }
    Buffer::allocate(len)
}

/// Returns a buffer to the pool, freeing the oldest pooled buffers if it
/// would hold more than its limit.
pub fn give_back(buffer: Buffer) {
    let limit = limit();
    if buffer.capacity > limit {
        return;
    }
    // The most recently used buffer is the likeliest to be asked for again:
    // make room for it by freeing the oldest ones.
    let evicted = {
        let mut pool = lock();
        let mut evicted = Vec::new();
        while pool.bytes + buffer.capacity > limit && !pool.free.is_empty() {
            let old = pool.free.remove(0);
            pool.bytes -= old.capacity;
            evicted.push(old);
        }
        pool.bytes += buffer.capacity;
        pool.free.push(buffer);
        evicted
    };
    drop(evicted); // freed outside the lock
}

/// Frees every pooled buffer.
pub fn clear() {
    let free = {
        let mut pool = lock();
        pool.bytes = 0;
        std::mem::take(&mut pool.free)
    };
    drop(free);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_are_not_pooled() {
        assert!(take(1000).is_none());
    }

    #[test]
    fn a_returned_buffer_is_reused() {
        let a = take(3 << 20).expect("allocation");
        let p = a.as_ptr();
        give_back(a);
        let b = take((3 << 20) - 100).expect("allocation");
        assert_eq!(b.as_ptr(), p);
        assert!(b.capacity() >= (3 << 20) - 100);
        give_back(b);
        // Far smaller requests get a buffer of their own.
        let c = take(1 << 20).expect("allocation");
        assert_ne!(c.as_ptr(), p);
        clear();
    }
}
