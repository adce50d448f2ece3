//! Views of an op's float type T (f32, bf16 or f16) as f32 values: the CPU backend computes a
//! bf16/f16 op in f32 with the f32 code, reading its T views into f32 and rounding its outputs
//! back (to nearest even, f16 overflowing to inf, as `kernels-common/half_convert.h` does on
//! the GPUs; both follow the `half` crate bit for bit).
//!
//! Each read and write takes one lock on one buffer and lets it go before the next, so the rule
//! of [`super::access`] (never two locks on one buffer) holds without ordering: [`staged`] reads
//! every view first, computes with no lock held, then writes the outputs.

use rayon::prelude::*;

use super::par::{PAR_MIN, chunks};
use crate::buffer::{Storage, View};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::check;

/// `bits` of `dtype` (bf16 or f16) as f32: exact.
pub(super) fn half_to_f32(dtype: DType, bits: u16) -> f32 {
    match dtype {
        DType::Bf16 => half::bf16::from_bits(bits).to_f32(),
        _ => half::f16::from_bits(bits).to_f32(),
    }
}

/// `v` rounded to `dtype` (bf16 or f16), to nearest even.
pub(super) fn f32_to_half(dtype: DType, v: f32) -> u16 {
    match dtype {
        DType::Bf16 => half::bf16::from_f32(v).to_bits(),
        _ => half::f16::from_f32(v).to_bits(),
    }
}

#[cfg(test)]
/// `v` rounded to `dtype` and back: what an element of that type holds after an f32 result is
/// stored in it (`v` itself for f32).
pub(super) fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::Bf16 | DType::F16 => half_to_f32(dtype, f32_to_half(dtype, v)),
        _ => v,
    }
}

/// A view that is not of a float type here is a bug of the calling op (its boundary check
/// comes first); an error all the same.
fn not_float(op: &str, v: &View<'_>) -> Error {
    Error::InvalidArgument(format!("{op}: a view of {} reached a float op", v.dtype()))
}

fn device_buffer(op: &str) -> Error {
    Error::ForeignBuffer(format!(
        "{op}: a device buffer was passed to the CPU backend"
    ))
}

/// The elements of the float view `v` (f32, bf16 or f16) as f32.
pub(super) fn read(op: &str, v: &View<'_>) -> Result<Vec<f32>> {
    let (off, len) = (v.offset(), v.len());
    let dtype = v.dtype();
    match v.buffer().storage() {
        Storage::Host(l) => Ok(l.read()[off..off + len].to_vec()),
        Storage::HostBytes(l) if matches!(dtype, DType::Bf16 | DType::F16) => {
            let bytes = l.read();
            let bytes = &bytes[off * 2..(off + len) * 2];
            let mut out = vec![0.0f32; len];
            chunks(&mut out, |s, o| {
                for (i, o) in o.iter_mut().enumerate() {
                    let at = 2 * (s + i);
                    *o = half_to_f32(dtype, u16::from_ne_bytes([bytes[at], bytes[at + 1]]));
                }
            });
            Ok(out)
        }
        Storage::HostBytes(_) => Err(not_float(op, v)),
        Storage::Device(_) => Err(device_buffer(op)),
    }
}

/// Stores `values` (`v.len()` of them) in the float view `v`, rounded to its type.
pub(super) fn write(op: &str, v: &View<'_>, values: &[f32]) -> Result<()> {
    check::len(op, "output", v, values.len())?;
    let (off, len) = (v.offset(), v.len());
    let dtype = v.dtype();
    match v.buffer().storage() {
        Storage::Host(l) => l.write()[off..off + len].copy_from_slice(values),
        Storage::HostBytes(l) if matches!(dtype, DType::Bf16 | DType::F16) => {
            let mut bytes = l.write();
            let store = |(b, x): (&mut [u8], &[f32])| {
                for (b, &x) in b.chunks_exact_mut(2).zip(x) {
                    b.copy_from_slice(&f32_to_half(dtype, x).to_ne_bytes());
                }
            };
            let bytes = &mut bytes[off * 2..(off + len) * 2];
            if len < PAR_MIN {
                store((bytes, values));
            } else {
                bytes
                    .par_chunks_mut(2 * PAR_MIN)
                    .zip(values.par_chunks(PAR_MIN))
                    .for_each(store);
            }
        }
        Storage::HostBytes(_) => return Err(not_float(op, v)),
        Storage::Device(_) => return Err(device_buffer(op)),
    }
    Ok(())
}

/// Runs `f` over the inputs and outputs of an op with views of a 16-bit float type, as f32:
/// every view (f32 ones too) is read into f32 first, outputs included (for the ops that
/// accumulate into them); `f` runs with no lock held; then each output is stored, rounded to its
/// type. An output may be exactly an input view (in place: `f` sees the input's values in both);
/// any other overlap is an error. The caller has checked the element types
/// ([`check::float_t`]) and the lengths.
pub(super) fn staged<const I: usize, const O: usize, R>(
    op: &str,
    ctx: u64,
    ins: [View<'_>; I],
    outs: [View<'_>; O],
    f: impl FnOnce([&[f32]; I], [&mut [f32]; O]) -> R,
) -> Result<R> {
    let all: Vec<&View<'_>> = ins.iter().chain(outs.iter()).collect();
    check::context_only(op, ctx, &all)?;
    for (o, out) in outs.iter().enumerate() {
        for input in &ins {
            check::no_overlap(op, out, input, true)?;
        }
        for other in &outs[..o] {
            check::no_overlap(op, out, other, false)?;
        }
    }
    let in_values = ins
        .iter()
        .map(|v| read(op, v))
        .collect::<Result<Vec<_>>>()?;
    let mut out_values = outs
        .iter()
        .map(|v| read(op, v))
        .collect::<Result<Vec<_>>>()?;
    let result = {
        let in_slices: [&[f32]; I] = std::array::from_fn(|i| in_values[i].as_slice());
        let mut rest = out_values.as_mut_slice();
        let out_slices: [&mut [f32]; O] = std::array::from_fn(|_| {
            let (first, tail) = std::mem::take(&mut rest)
                .split_first_mut()
                .expect("one vector per output");
            rest = tail;
            first.as_mut_slice()
        });
        f(in_slices, out_slices)
    };
    for (v, values) in outs.iter().zip(&out_values) {
        write(op, v, values)?;
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::super::{CpuOps, device_info};
    use super::*;
    use crate::ops::prelude::*;

    fn cpu() -> CpuOps {
        CpuOps {
            info: device_info(),
            context: crate::buffer::next_context_id(),
            limit: Default::default(),
        }
    }

    #[test]
    fn reads_and_writes_every_float_type_with_the_half_crate_rounding() {
        let ops = cpu();
        let values = [
            1.0f32,
            -2.5,
            1.0 + 1.0 / 512.0,
            65520.0,
            1e-8,
            f32::NAN,
            -0.0,
        ];
        for dtype in [DType::F32, DType::Bf16, DType::F16] {
            let b = ops.alloc_as(dtype, values.len() + 2).unwrap();
            let v = b.slice(1, values.len()).unwrap();
            write("t", &v, &values).unwrap();
            let back = read("t", &v).unwrap();
            for (&x, &y) in values.iter().zip(&back) {
                let want = round_to(dtype, x);
                assert!(
                    want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()),
                    "{dtype}: {x} -> {y}, want {want}"
                );
            }
        }
        // 65520 is past f16's largest finite value when rounded; 1 + 2^-9 is a tie of bf16.
        assert_eq!(round_to(DType::F16, 65520.0), f32::INFINITY);
        assert_eq!(round_to(DType::Bf16, 1.0 + 1.0 / 512.0), 1.0);
        let u = ops.alloc_as(DType::U32, 2).unwrap();
        assert!(read("t", &u.view()).is_err());
    }

    #[test]
    fn staged_runs_in_place_and_rejects_partial_overlaps() {
        let ops = cpu();
        let id = ops.context_id();
        let x = ops.alloc_as(DType::Bf16, 4).unwrap();
        let vals = [1.0f32, 2.0, 3.0, 4.0].map(half::bf16::from_f32);
        ops.upload_as(x.view(), &vals).unwrap();
        staged("t", id, [x.view()], [x.view()], |[a], [o]| {
            for (o, a) in o.iter_mut().zip(a) {
                *o = a * 0.5;
            }
        })
        .unwrap();
        let mut back = [half::bf16::ZERO; 4];
        ops.download_as(x.view(), &mut back).unwrap();
        assert_eq!(back.map(|v| v.to_f32()), [0.5, 1.0, 1.5, 2.0]);
        let (a, b) = (x.slice(0, 2).unwrap(), x.slice(1, 2).unwrap());
        let partial = staged("t", id, [a], [b], |_, _| ());
        assert!(partial.is_err());
    }
}
