//! The data ops (row gathers, one-hot encoding) on every GPU target against the CPU backend.

use proptest::prelude::*;
use rnn::ops::IndexedRows;

use super::{Values, compare_ids, nan, prop};
use crate::support::Target;

pub fn data(t: Target) {
    let s = (1..=50usize, 1..=40usize, 1..=300usize, any::<u64>());
    prop(t, "gpu_data", 10, s, |ctx, (src_rows, nidx, cols, seed)| {
        let mut r = Values(seed);
        let src = r.vec(src_rows * cols, -1.0, 1.0);
        let idx = r.ints(nidx, src_rows);
        compare_ids(
            ctx,
            "gather_rows",
            (&[src, idx.clone(), nan(nidx * cols)], &[1]),
            &[2],
            0.0,
            &|o, v| o.gather_rows(IndexedRows::new(v[0], v[1], v[2], cols)),
        )?;
        // u32 rows (labels moved with their samples): ids up to 2^24 survive the f32 harness.
        let ids = r.ints(src_rows * cols, 1 << 24);
        compare_ids(
            ctx,
            "gather_rows of u32 rows",
            (&[ids, idx.clone(), vec![0.0; nidx * cols]], &[0, 1, 2]),
            &[2],
            0.0,
            &|o, v| o.gather_rows(IndexedRows::new(v[0], v[1], v[2], cols)),
        )?;
        let classes = src_rows;
        compare_ids(
            ctx,
            "one_hot",
            (&[idx, nan(nidx * classes)], &[0]),
            &[1],
            0.0,
            &|o, v| o.one_hot(v[0], v[1], classes),
        )
    });
}
