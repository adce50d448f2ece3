//! The kernel timer (`ContextOptions::profile_kernels`): on OpenCL it names every kernel launched
//! and device-side copy with its launch count, reading resets it, results are unchanged by it,
//! and more launches than its event list holds between two reads are all counted. Without the
//! option, and on every other backend (profiled with Nsight Compute instead), there is no table.

use std::collections::BTreeMap;

use rnn::{Context, KernelTime, Ops};

use crate::support::{self, Target, rel_err};

const N: usize = 1000;
/// More launches than the timer keeps events for between two reads (its `MAX_PENDING`, 4096), so
/// the launch that fills the list folds it.
const MANY: u64 = 4100;

fn by_name(times: &[KernelTime]) -> BTreeMap<&str, u64> {
    times
        .iter()
        .map(|t| (t.entry.as_str(), t.launches))
        .collect()
}

/// fill x3, scale x2, copy, axpy, a synchronize (the timer folds there), fill again; checks the
/// values and returns the table, if any.
fn some_ops(ctx: &Context) -> rnn::Result<Option<Vec<KernelTime>>> {
    let ops = ctx.ops();
    let x = ops.alloc(N)?;
    let y = ops.alloc(N)?;
    let z = ops.alloc(N)?;
    ops.fill(x.view(), 1.0)?;
    ops.fill(y.view(), 0.5)?;
    ops.fill(z.view(), -1.0)?;
    ops.scale(x.view(), 3.0)?;
    ops.scale(x.view(), 2.0)?;
    ops.copy(x.view(), y.view())?;
    ops.axpy(0.25, y.view(), z.view())?;
    ops.synchronize()?;
    ops.fill(x.view(), 7.0)?;
    let mut got = vec![f32::NAN; 3 * N];
    ops.download(x.view(), &mut got[..N])?;
    ops.download(y.view(), &mut got[N..2 * N])?;
    ops.download(z.view(), &mut got[2 * N..])?;
    let want: Vec<f32> = [7.0, 6.0, 0.5]
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, N))
        .collect();
    let err = rel_err(&got, &want);
    assert!(err < 1e-6, "{}: values off by {err:e}", ctx.id());
    ops.kernel_times()
}

fn assert_timed(ctx: &Context) -> rnn::Result<()> {
    let ops: &dyn Ops = ctx.ops();
    // Whatever compiling the op set or allocating launched is not part of what is checked.
    ops.warm_up()?;
    ops.kernel_times()?.expect("the timer is on");
    let times = some_ops(ctx)?.expect("the timer is on");
    let expected = BTreeMap::from([("axpy", 1), ("copy", 1), ("fill", 4), ("scale", 2)]);
    assert_eq!(by_name(&times), expected, "{}: {times:?}", ctx.id());
    assert!(
        times.windows(2).all(|w| w[0].nanos >= w[1].nanos),
        "{}: not most time first: {times:?}",
        ctx.id()
    );
    assert_eq!(
        ops.kernel_times()?,
        Some(vec![]),
        "{}: reading resets the table",
        ctx.id()
    );
    let one = ops.alloc(1)?;
    for _ in 0..MANY {
        ops.fill(one.view(), 1.0)?;
    }
    let times = ops.kernel_times()?.expect("the timer is on");
    assert_eq!(
        by_name(&times),
        BTreeMap::from([("fill", MANY)]),
        "{}",
        ctx.id()
    );
    // Each launch takes some device time; a zero sum means the timestamps were not read.
    assert!(times[0].nanos > 0, "{}: {times:?}", ctx.id());
    Ok(())
}

pub fn kernel_times(t: Target) {
    // RNN_PROFILE_KERNELS=1 in the test's environment turns the timer on everywhere.
    let env_on = std::env::var("RNN_PROFILE_KERNELS")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "true"));
    for ctx in support::contexts(t, "gpu_kernel_times_off") {
        let times = some_ops(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        if !env_on {
            assert_eq!(times, None, "{}: no timer without the option", ctx.id());
        }
    }
    for ctx in support::contexts_with(t, "gpu_kernel_times", |o| o.profile_kernels = true) {
        if t == Target::OpenCl {
            assert_timed(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        } else {
            // Only OpenCL has the timer; the option is ignored elsewhere.
            let times = some_ops(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
            assert_eq!(times, None, "{}", ctx.id());
        }
    }
}
