//! Tests of `chunked/flat/`.

use super::*;
use crate::chunked::grid::locate;

/// Every position of an axis finds the chunk `locate` finds (the last
/// one starting at or before it), through either kind of table, on
/// random cuts with empty chunks anywhere.
#[test]
fn every_position_finds_its_chunk() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let (mut exact, mut split) = (0, 0);
    for _ in 0..20_000 {
        let size = next(7) as usize;
        let parts = 1 + next(4) as usize;
        let mut cuts: Vec<usize> = (1..parts).map(|_| next(size as u64 + 1) as usize).collect();
        cuts.sort_unstable();
        let mut st = vec![0];
        st.extend(cuts);
        st.push(size);
        let gs = 1 + next(3);
        let total = (st.len() as u64 - 1) * gs;
        let Some(axes) = tuple_axes(&vec![st.clone()], [(0, gs)].into_iter(), total) else {
            continue;
        };
        let axis = &axes[0];
        if axis.exact() {
            exact += 1;
        } else {
            split += 1;
        }
        let lookup = axis.lookup();
        for p in 0..size {
            let want = (locate(&st, p).0 as u64 * gs) as u32;
            // SAFETY: p < size.
            assert_eq!(unsafe { lookup.id::<false>(p) }, want, "{st:?} at {p}");
        }
    }
    assert!(exact > 1000 && split > 300, "{exact} exact, {split} split");
}
