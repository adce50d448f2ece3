//! A product checked against the host, for the tests of what runs a GEMM on a cold start.

use rnn::Gemm;

/// One `m x n x k` product on `ctx`, checked against the host; whether the context's kernels
/// were final right after it.
pub(super) fn checked_product(ctx: &rnn::Context, (m, n, k): (usize, usize, usize)) -> bool {
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let ops = ctx.ops();
    let (da, db, dc) = (
        ops.alloc(m * k).unwrap(),
        ops.alloc(k * n).unwrap(),
        ops.alloc(m * n).unwrap(),
    );
    ops.upload(da.view(), &a).unwrap();
    ops.upload(db.view(), &b).unwrap();
    ops.fill(dc.view(), f32::NAN).unwrap();
    ops.gemm(Gemm::new(m, n, k), da.view(), db.view(), dc.view())
        .unwrap();
    let finished = ctx.execution().kernels_final();
    let mut c = vec![0.0; m * n];
    ops.download(dc.view(), &mut c).unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            let got = c[i * n + j];
            assert!(
                (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "c[{i}][{j}] = {got}, expected {want}"
            );
        }
    }
    finished
}
