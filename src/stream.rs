//! Copies that bypass the cache on their way out.
//!
//! A large output written with ordinary stores is first read into the cache
//! (write-allocate), so every output byte crosses the memory bus twice.
//! Non-temporal stores write whole lines straight to memory: on a
//! bandwidth-bound gather that is a third less traffic. They are only worth
//! it when the output is far larger than the caches, and they are weakly
//! ordered: a thread must [`fence`] before others may read what it wrote.

/// Copies `len` bytes from `src` to `dst` with non-temporal stores where
/// `dst` is 16-byte aligned, ordinary copies for the unaligned head and the
/// tail.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, len)`.
#[inline(always)]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.align_offset(16).min(len);
        // SAFETY: the caller's contract covers all `len` bytes; each step
        // below stays within them.
        unsafe {
            if head != 0 {
                crate::kernel::copy_small(src, dst, head);
            }
            let (mut s, mut d, mut n) = (src.add(head), dst.add(head), len - head);
            while n >= 64 {
                // `d` is 16-aligned here, as `_mm_stream_si128` requires.
                let v0 = _mm_loadu_si128(s.cast::<__m128i>());
                let v1 = _mm_loadu_si128(s.add(16).cast::<__m128i>());
                let v2 = _mm_loadu_si128(s.add(32).cast::<__m128i>());
                let v3 = _mm_loadu_si128(s.add(48).cast::<__m128i>());
                _mm_stream_si128(d.cast::<__m128i>(), v0);
                _mm_stream_si128(d.add(16).cast::<__m128i>(), v1);
                _mm_stream_si128(d.add(32).cast::<__m128i>(), v2);
                _mm_stream_si128(d.add(48).cast::<__m128i>(), v3);
                s = s.add(64);
                d = d.add(64);
                n -= 64;
            }
            while n >= 16 {
                _mm_stream_si128(d.cast::<__m128i>(), _mm_loadu_si128(s.cast::<__m128i>()));
                s = s.add(16);
                d = d.add(16);
                n -= 16;
            }
            if n != 0 {
                crate::kernel::copy_small(s, d, n);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded from the caller.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    }
}

/// Orders this thread's non-temporal stores before its later stores (for
/// instance, the signal that its part of the output is done).
#[inline]
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions; SSE2 is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..300u32).map(|v| (v * 7 % 251) as u8).collect();
        for offset in 0..17 {
            for len in [0, 1, 15, 16, 17, 63, 64, 65, 130, 200] {
                let mut dst = vec![0u8; 300];
                // SAFETY: both ranges are inside their vectors.
                unsafe { super::copy(src.as_ptr().add(3), dst.as_mut_ptr().add(offset), len) };
                super::fence();
                assert_eq!(&dst[offset..offset + len], &src[3..3 + len]);
                assert!(dst[..offset].iter().all(|&b| b == 0));
                assert!(dst[offset + len..].iter().all(|&b| b == 0));
            }
        }
    }
}
