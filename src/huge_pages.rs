//! Asking the kernel for 2 MiB pages for a large buffer, as NumPy does for
//! its arrays from 4 MiB: a buffer written right after it is made costs a
//! fault per 4 KiB page otherwise, and its walk a TLB miss per 4 KiB.

/// The size of a huge page on x86-64 (and of the pages NumPy asks for).
const HUGE_PAGE: usize = 2 << 20;

/// Asks for huge pages for the whole 2 MiB pages among the `bytes` from
/// `start`, when those are 4 MiB or more (NumPy's threshold). A hint only:
/// the kernel may refuse it (transparent huge pages off), and nothing is
/// read or written.
pub(crate) fn advise(start: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    if bytes >= 2 * HUGE_PAGE {
        let lead = start.align_offset(HUGE_PAGE).min(bytes);
        let len = (bytes - lead) / HUGE_PAGE * HUGE_PAGE;
        if len != 0 {
            // SAFETY: madvise only gives the kernel a hint about these pages
            // (the aligned whole huge pages inside the caller's `bytes`, which
            // it owns); it changes no byte the program sees, and a failure is
            // harmless and ignored.
            unsafe { libc::madvise(start.wrapping_add(lead).cast(), len, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_leaves_the_bytes_alone_whatever_the_start_and_size() {
        let mut buf: Vec<u8> = (0..9 << 20).map(|i| (i % 251) as u8).collect();
        let before = buf.clone();
        for (from, bytes) in [
            (0, 9 << 20),
            (1, (9 << 20) - 1),
            (4095, 5 << 20),
            (7, 100),
            (0, 0),
        ] {
            advise(buf[from..].as_mut_ptr(), bytes);
        }
        assert_eq!(buf, before);
    }
}
