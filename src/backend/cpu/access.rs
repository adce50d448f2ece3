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
use crate::dtype::DType;
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
        // `check::view` rejects other element types first; kept as an error all the same.
        Storage::HostBytes(_) => Err(Error::InvalidArgument(format!(
            "{op}: a buffer of {} reached an f32 op",
            b.dtype()
        ))),
        Storage::Device(_) => Err(Error::ForeignBuffer(format!(
            "{op}: a device buffer was passed to the CPU backend"
        ))),
    }
}

/// The storage of a host buffer of any type.
fn host_storage<'b>(op: &str, b: &'b Buffer) -> Result<&'b Storage> {
    match b.storage() {
        Storage::Device(_) => Err(Error::ForeignBuffer(format!(
            "{op}: a device buffer was passed to the CPU backend"
        ))),
        s => Ok(s),
    }
}

/// Writes `src`, the native-endian bytes of `dst`'s elements (any type), into `dst`; the
/// caller has checked the context and the byte count.
pub(super) fn write_bytes(op: &str, dst: &View<'_>, src: &[u8]) -> Result<()> {
    let (off, len) = (dst.offset(), dst.len());
    match host_storage(op, dst.buffer())? {
        Storage::Host(l) => {
            let mut g = l.write();
            for (d, c) in g[off..off + len].iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        Storage::HostBytes(l) => {
            let size = dst.dtype().size();
            l.write()[off * size..(off + len) * size].copy_from_slice(src);
        }
        Storage::Device(_) => {}
    }
    Ok(())
}

/// Reads the elements of `src` (any type) into `dst` as their native-endian bytes; the caller
/// has checked the context and the byte count.
pub(super) fn read_bytes(op: &str, src: &View<'_>, dst: &mut [u8]) -> Result<()> {
    let (off, len) = (src.offset(), src.len());
    match host_storage(op, src.buffer())? {
        Storage::Host(l) => {
            let g = l.read();
            for (v, c) in g[off..off + len].iter().zip(dst.chunks_exact_mut(4)) {
                c.copy_from_slice(&v.to_ne_bytes());
            }
        }
        Storage::HostBytes(l) => {
            let size = src.dtype().size();
            dst.copy_from_slice(&l.read()[off * size..(off + len) * size]);
        }
        Storage::Device(_) => {}
    }
    Ok(())
}

/// The byte storage of a non-f32 host buffer.
fn byte_lock<'b>(op: &str, b: &'b Buffer) -> Result<&'b parking_lot::RwLock<Vec<u8>>> {
    match host_storage(op, b)? {
        Storage::HostBytes(l) => Ok(l),
        _ => Err(Error::InvalidArgument(format!(
            "{op}: a buffer of {} without byte storage",
            b.dtype()
        ))),
    }
}

/// The elements of a u32 view (labels, class targets, token ids, row indices) of the context
/// `ctx`, copied out: a u32 buffer never shares elements with the f32 views an op writes, so the
/// op locks those on their own. `name` is the argument's name in an error.
pub(super) fn read_u32(op: &str, ctx: u64, name: &str, v: &View<'_>) -> Result<Vec<u32>> {
    check::typed(op, ctx, &[(name, v, DType::U32)])?;
    let (off, len) = (v.offset() * 4, v.len() * 4);
    let bytes = byte_lock(op, v.buffer())?.read();
    Ok(bytes[off..off + len]
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The index rule of [`crate::ops`]: index `v` names entry `v` of `n` iff `v < n`.
pub(super) fn valid_index(v: u32, n: usize) -> Option<usize> {
    let v = v as usize;
    (v < n).then_some(v)
}

/// Runs `f` on the bytes of `src` and of `dst`, views of non-f32 buffers that do not overlap
/// (checked by the caller): two buffers are locked in address order; for two views of one
/// buffer, `f` reads a copy of `src`'s bytes.
pub(super) fn with_bytes<R>(
    op: &str,
    src: &View<'_>,
    dst: &View<'_>,
    f: impl FnOnce(&[u8], &mut [u8]) -> R,
) -> Result<R> {
    let bytes = |v: &View<'_>| {
        let size = v.dtype().size();
        v.offset() * size..(v.offset() + v.len()) * size
    };
    let (from, to) = (bytes(src), bytes(dst));
    let (s, d) = (byte_lock(op, src.buffer())?, byte_lock(op, dst.buffer())?);
    Ok(if std::ptr::eq(s, d) {
        let mut w = d.write();
        let from = w[from].to_vec();
        f(&from, &mut w[to])
    } else if (s as *const _ as usize) < (d as *const _ as usize) {
        let g = s.read();
        f(&g[from], &mut d.write()[to])
    } else {
        let mut w = d.write();
        f(&s.read()[from], &mut w[to])
    })
}

/// Copies `src` into `dst`, both of one non-f32 type, equal lengths, not overlapping (checked
/// by the caller).
pub(super) fn copy_bytes(op: &str, src: &View<'_>, dst: &View<'_>) -> Result<()> {
    with_bytes(op, src, dst, |s, d| d.copy_from_slice(s))
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
    // Context and element type (f32), inputs then outputs, numbered in that order.
    for (i, v) in ins.iter().chain(outs.iter()).enumerate() {
        check::view(op, ctx, i, v)?;
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
