//! Index element types, read in place from any alignment.

/// The integer dtypes accepted for `indices`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexType {
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
}

impl IndexType {
    /// From NumPy's dtype kind (`b'i'` or `b'u'`) and itemsize; `None` for
    /// anything else.
    pub fn from_kind(kind: u8, itemsize: usize) -> Option<Self> {
        use IndexType::*;
        let types = match kind {
            b'i' => [I8, I16, I32, I64],
            b'u' => [U8, U16, U32, U64],
            _ => return None,
        };
        types.into_iter().find(|t| t.itemsize() == itemsize)
    }

    /// Bytes per index element.
    pub fn itemsize(self) -> usize {
        match self {
            IndexType::I8 | IndexType::U8 => 1,
            IndexType::I16 | IndexType::U16 => 2,
            IndexType::I32 | IndexType::U32 => 4,
            IndexType::I64 | IndexType::U64 => 8,
        }
    }
}

/// One index element type, read as the hot path reads it (for error
/// messages, [`load_exact`] reads the exact value).
pub(crate) trait IndexElem: Copy + Send + Sync + 'static {
    /// Reads the value at `ptr` as `i64`. Unsigned values above `i64::MAX`
    /// saturate to `i64::MAX`, which is out of range for every axis
    /// (an axis size is at most `isize::MAX`).
    ///
    /// # Safety
    /// `ptr` must be valid for reading `size_of::<Self>()` bytes; any
    /// alignment is fine.
    unsafe fn load(ptr: *const u8) -> i64;
}

macro_rules! index_elem {
    ($($t:ty),*) => {$(
        impl IndexElem for $t {
            #[inline(always)]
            unsafe fn load(ptr: *const u8) -> i64 {
                // SAFETY: the caller guarantees `ptr` is readable for
                // size_of::<$t>() bytes; read_unaligned accepts any alignment.
                let v = unsafe { ptr.cast::<$t>().read_unaligned() };
                i64::try_from(v).unwrap_or(i64::MAX)
            }
        }
    )*};
}

index_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Runs `$body` with `$T` bound to the Rust type of an [`IndexType`].
macro_rules! with_index_type {
    ($ty:expr, $T:ident => $body:expr) => {
        $crate::index::with_index_type!(@ $ty, $T, $body,
            I8 i8, I16 i16, I32 i32, I64 i64, U8 u8, U16 u16, U32 u32, U64 u64)
    };
    (@ $ty:expr, $T:ident, $body:expr, $($v:ident $t:ty),*) => {
        match $ty {
            $($crate::index::IndexType::$v => {
                type $T = $t;
                $body
            })*
        }
    };
}
pub(crate) use with_index_type;

/// [`with_index_type`] and then `mode::with_mode`: every loop over indices
/// is compiled once per index type and mode.
macro_rules! with_index_and_mode {
    ($ty:expr, $mode:expr, $T:ident, $clip:ident, $zero:ident => $body:expr) => {
        $crate::index::with_index_type!($ty, $T =>
            $crate::mode::with_mode!($mode, $clip, $zero => $body))
    };
}
pub(crate) use with_index_and_mode;

/// Reads one stored index of type `ty` exactly (for error messages).
///
/// # Safety
/// `ptr` must be valid for reading `ty.itemsize()` bytes.
pub(crate) unsafe fn load_exact(ty: IndexType, ptr: *const u8) -> i128 {
    // SAFETY: forwarded from the caller; read_unaligned accepts any
    // alignment.
    with_index_type!(ty, T => i128::from(unsafe { ptr.cast::<T>().read_unaligned() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_unsigned_saturates() {
        let v = u64::MAX.to_ne_bytes();
        // SAFETY: an 8-byte buffer read as u64.
        assert_eq!(unsafe { u64::load(v.as_ptr()) }, i64::MAX);
        // SAFETY: the same 8-byte buffer, read as u64.
        let exact = unsafe { load_exact(IndexType::U64, v.as_ptr()) };
        assert_eq!(exact, u64::MAX as i128);
    }

    #[test]
    fn unaligned_reads() {
        let mut buf = [0u8; 9];
        buf[1..9].copy_from_slice(&(-5i64).to_ne_bytes());
        // SAFETY: bytes 1..9 hold an i64 at an odd address.
        assert_eq!(unsafe { i64::load(buf.as_ptr().add(1)) }, -5);
    }

    #[test]
    fn kinds() {
        assert_eq!(IndexType::from_kind(b'u', 2), Some(IndexType::U16));
        assert_eq!(IndexType::from_kind(b'f', 8), None);
        assert_eq!(IndexType::from_kind(b'b', 1), None);
        assert_eq!(IndexType::I32.itemsize(), 4);
    }
}
