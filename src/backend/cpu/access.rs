//! Turning an op's views into slices: one lock per distinct buffer, taken in address order.
//!
//! Several views of one buffer may reach the same op (a flat parameter buffer read by one view and
//! written through another, or `add(a, b, a)` in place). Locking each view separately would
//! deadlock on the buffer's `RwLock`, so every distinct buffer is locked exactly once — a write
//! lock when any output lives in it — and the guard's slice is split into the outputs (mutable,
//! disjoint) and the gaps between them (shared), from which the inputs are cut. An input that is
//! exactly an output view (an op's documented in-place case) is reported as [`Src::Out`].

use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use crate::buffer::{Buffer, Storage, View};
use crate::error::{Error, Result};
use crate::ops::check;

/// The most views (inputs plus outputs) any op passes.
const MAX_VIEWS: usize = 8;

/// Where an input's elements are.
#[derive(Clone, Copy)]
pub(super) enum Src<'a> {
    /// A slice of its own.
    Slice(&'a [f32]),
    /// Exactly one of the outputs (the op runs in place; only one output may be aliased per op).
    Out,
}

enum Guard<'a> {
    Read(RwLockReadGuard<'a, Vec<f32>>),
    Write(RwLockWriteGuard<'a, Vec<f32>>),
}

fn host_lock<'b>(op: &str, b: &'b Buffer) -> Result<&'b parking_lot::RwLock<Vec<f32>>> {
    match b.storage() {
        Storage::Host(lock) => Ok(lock),
        Storage::Device(_) => Err(Error::ForeignBuffer(format!(
            "{op}: a device buffer was passed to the CPU backend"
        ))),
    }
}

/// Runs `f` over the inputs and outputs; no view may overlap an output (inputs may share
/// elements with each other).
pub(super) fn lock<const I: usize, const O: usize, R>(
    op: &str,
    ctx: u64,
    ins: [View<'_>; I],
    outs: [View<'_>; O],
    f: impl FnOnce([&[f32]; I], [&mut [f32]; O]) -> R,
) -> Result<R> {
    lock_inplace(op, ctx, ins, outs, 0, |ins, outs| {
        // With an empty alias mask `lock_inplace` never yields `Src::Out`.
        let ins = ins.map(|s| match s {
            Src::Slice(s) => s,
            Src::Out => &[],
        });
        f(ins, outs)
    })
}

/// Like [`lock`], but input `i` may be exactly the same view as an output when bit `i` of
/// `alias_ok` is set (it then arrives as [`Src::Out`]). Checks contexts and overlaps first.
pub(super) fn lock_inplace<'v, const I: usize, const O: usize, R>(
    op: &str,
    ctx: u64,
    ins: [View<'v>; I],
    outs: [View<'v>; O],
    alias_ok: u32,
    f: impl FnOnce([Src<'_>; I], [&mut [f32]; O]) -> R,
) -> Result<R> {
    if I + O > MAX_VIEWS {
        return Err(Error::InvalidArgument(format!(
            "{op}: {} views exceed the CPU backend's limit of {MAX_VIEWS}",
            I + O
        )));
    }
    for v in ins.iter().chain(outs.iter()) {
        check::same_context(op, ctx, &[v])?;
    }
    for (o, out) in outs.iter().enumerate() {
        for (i, input) in ins.iter().enumerate() {
            check::no_overlap(op, out, input, alias_ok & (1 << i) != 0)?;
        }
        for other in &outs[..o] {
            check::no_overlap(op, out, other, false)?;
        }
    }

    // Distinct buffers, and which of them some output writes.
    let mut bufs: [Option<&'v Buffer>; MAX_VIEWS] = [None; MAX_VIEWS];
    let mut write = [false; MAX_VIEWS];
    let mut nbufs = 0;
    let mut slot = |b: &'v Buffer| -> usize {
        let found = bufs[..nbufs]
            .iter()
            .position(|x| x.is_some_and(|x| std::ptr::eq(x, b)));
        found.unwrap_or_else(|| {
            bufs[nbufs] = Some(b);
            nbufs += 1;
            nbufs - 1
        })
    };
    let slot_in: [usize; I] = std::array::from_fn(|i| slot(ins[i].buffer()));
    let slot_out: [usize; O] = std::array::from_fn(|o| slot(outs[o].buffer()));
    for &s in &slot_out {
        write[s] = true;
    }

    // Lock in address order so two ops on other threads sharing buffers cannot deadlock.
    let mut order: [usize; MAX_VIEWS] = std::array::from_fn(|i| i);
    order[..nbufs].sort_unstable_by_key(|&s| bufs[s].map_or(0, |b| b as *const Buffer as usize));
    let mut guards: [Option<Guard<'_>>; MAX_VIEWS] = std::array::from_fn(|_| None);
    for &s in &order[..nbufs] {
        if let Some(b) = bufs[s] {
            let l = host_lock(op, b)?;
            guards[s] = Some(if write[s] {
                Guard::Write(l.write())
            } else {
                Guard::Read(l.read())
            });
        }
    }

    let mut in_slices: [Src<'_>; I] = [Src::Slice(&[]); I];
    let mut out_slices: [&mut [f32]; O] = std::array::from_fn(|_| <&mut [f32]>::default());
    let broken = || Error::InvalidArgument(format!("{op}: views overlap in an unsupported way"));
    for (s, g) in guards.iter_mut().enumerate() {
        let Some(g) = g else { continue };
        match g {
            Guard::Read(r) => {
                let data: &[f32] = r.as_slice();
                for i in (0..I).filter(|&i| slot_in[i] == s) {
                    in_slices[i] = Src::Slice(cut(data, 0, &ins[i]).ok_or_else(broken)?);
                }
            }
            Guard::Write(w) => {
                let data: &mut [f32] = w.as_mut_slice();
                let mut idx = [0usize; MAX_VIEWS];
                let mut cnt = 0;
                for o in (0..O).filter(|&o| slot_out[o] == s && !outs[o].is_empty()) {
                    idx[cnt] = o;
                    cnt += 1;
                }
                idx[..cnt].sort_unstable_by_key(|&o| outs[o].offset());
                let mut gaps: [(usize, &[f32]); MAX_VIEWS + 1] = [(0, &[]); MAX_VIEWS + 1];
                let mut rest = data;
                let mut pos = 0;
                for (n, &o) in idx[..cnt].iter().enumerate() {
                    let (off, len) = (outs[o].offset(), outs[o].len());
                    if off < pos || off + len > pos + rest.len() {
                        return Err(broken());
                    }
                    let (gap, tail) = std::mem::take(&mut rest).split_at_mut(off - pos);
                    let (out, tail) = tail.split_at_mut(len);
                    gaps[n] = (pos, gap);
                    out_slices[o] = out;
                    rest = tail;
                    pos = off + len;
                }
                gaps[cnt] = (pos, rest);
                for i in (0..I).filter(|&i| slot_in[i] == s && !ins[i].is_empty()) {
                    if outs.iter().any(|o| o.same_as(&ins[i])) {
                        in_slices[i] = Src::Out;
                        continue;
                    }
                    let found = gaps[..=cnt].iter().find_map(|&(p, g)| cut(g, p, &ins[i]));
                    in_slices[i] = Src::Slice(found.ok_or_else(broken)?);
                }
            }
        }
    }
    Ok(f(in_slices, out_slices))
}

/// The elements of `v` from `data`, which holds the buffer's elements from `start` on.
fn cut<'a>(data: &'a [f32], start: usize, v: &View<'_>) -> Option<&'a [f32]> {
    let from = v.offset().checked_sub(start)?;
    data.get(from..from + v.len())
}
