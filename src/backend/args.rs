//! Per-launch helpers shared by the CUDA and HIP backends: packing [`RawArg`]s into the 8-byte
//! parameter slots `cuLaunchKernel` / `hipModuleLaunchKernel` read, and a cheap map from entry
//! names to loaded functions. Both run on every launch, and small recurrent steps are bound by
//! launch overhead, so neither allocates nor runs a cryptographic hash.

use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};

use parking_lot::Mutex;

use super::RawArg;

/// Parameters a launch packs on the stack; longer lists (rare user kernels) use the heap.
const INLINE_ARGS: usize = 32;

impl RawArg {
    /// The value in the 8-byte slot a driver reads a kernel parameter from: it copies as many
    /// bytes as the parameter has from the start of the slot, so each value sits at the start
    /// in native byte order (4-byte values leave the upper bytes zero).
    pub fn slot(&self) -> u64 {
        let mut b = [0u8; 8];
        match *self {
            RawArg::Ptr(p) | RawArg::U64(p) => b = p.to_ne_bytes(),
            RawArg::F32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            RawArg::U32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
            RawArg::I32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
        }
        u64::from_ne_bytes(b)
    }
}

/// Calls `f` with the `void**` parameter array of a CUDA/HIP launch: one pointer per argument,
/// each to an 8-byte slot ([`RawArg::slot`]) that lives until `f` returns. Up to 32 arguments
/// are packed in stack arrays.
pub(crate) fn with_param_slots<R>(args: &[RawArg], f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
    fn fill(args: &[RawArg], slots: &mut [u64], params: &mut [*mut c_void]) {
        for ((a, s), p) in args.iter().zip(slots.iter_mut()).zip(params.iter_mut()) {
            *s = a.slot();
            *p = (s as *mut u64).cast();
        }
    }
    let n = args.len();
    if n <= INLINE_ARGS {
        let mut slots = [0u64; INLINE_ARGS];
        let mut params = [std::ptr::null_mut::<c_void>(); INLINE_ARGS];
        fill(args, &mut slots, &mut params);
        f(&mut params[..n])
    } else {
        let mut slots = vec![0u64; n];
        let mut params = vec![std::ptr::null_mut::<c_void>(); n];
        fill(args, &mut slots, &mut params);
        f(&mut params)
    }
}

/// FNV-1a: entry names are short and come from this process, so a fast hash is enough (the
/// default SipHash is built to resist chosen keys, which costs more than the lookup it serves).
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Functions of one loaded module by entry name, looked up once from the driver and then found
/// by `&str` without allocating.
pub(crate) struct FunctionCache<F> {
    map: Mutex<HashMap<Box<str>, F, BuildHasherDefault<Fnv>>>,
}

impl<F: Copy> FunctionCache<F> {
    pub(crate) fn new() -> Self {
        FunctionCache {
            map: Mutex::new(HashMap::default()),
        }
    }

    /// The function for `entry`, from the cache or from `load` (whose result is then cached).
    pub(crate) fn get_or_load<E>(
        &self,
        entry: &str,
        load: impl FnOnce() -> Result<F, E>,
    ) -> Result<F, E> {
        if let Some(&f) = self.map.lock().get(entry) {
            return Ok(f);
        }
        let f = load()?;
        self.map.lock().insert(entry.into(), f);
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_each_value_at_their_start() {
        let args = [
            RawArg::Ptr(0x1234_5678_9abc),
            RawArg::F32(1.5),
            RawArg::U32(7),
            RawArg::I32(-2),
            RawArg::U64(u64::MAX),
        ];
        for a in &args {
            let b = a.slot().to_ne_bytes();
            match *a {
                RawArg::Ptr(p) | RawArg::U64(p) => assert_eq!(b, p.to_ne_bytes()),
                RawArg::F32(v) => assert_eq!(f32::from_ne_bytes(b[..4].try_into().unwrap()), v),
                RawArg::U32(v) => assert_eq!(u32::from_ne_bytes(b[..4].try_into().unwrap()), v),
                RawArg::I32(v) => assert_eq!(i32::from_ne_bytes(b[..4].try_into().unwrap()), v),
            }
        }
    }

    #[test]
    fn parameter_pointers_point_at_the_slots() {
        for n in [0usize, 1, 11, 32, 33, 70] {
            let args: Vec<RawArg> = (0..n as u64).map(|i| RawArg::U64(i * 3 + 1)).collect();
            let seen = with_param_slots(&args, |params| {
                assert_eq!(params.len(), n);
                params
                    .iter()
                    // SAFETY: each pointer points at a live, initialized u64 slot while the
                    // closure runs.
                    .map(|&p| unsafe { *(p as *const u64) })
                    .collect::<Vec<_>>()
            });
            let want: Vec<u64> = args.iter().map(RawArg::slot).collect();
            assert_eq!(seen, want);
        }
    }

    #[test]
    fn function_cache_loads_once_per_entry() {
        let cache = FunctionCache::<usize>::new();
        let mut loads = 0;
        for _ in 0..3 {
            let f = cache.get_or_load::<()>("sgemm", || {
                loads += 1;
                Ok(42)
            });
            assert_eq!(f, Ok(42));
        }
        assert_eq!(loads, 1);
        assert_eq!(
            cache.get_or_load("other", || Err("missing")),
            Err("missing")
        );
        assert_eq!(cache.get_or_load::<()>("other", || Ok(1)), Ok(1));
    }
}
