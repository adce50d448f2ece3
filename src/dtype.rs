//! Element types of buffers, views and tensors: [`DType`], and the host types that match them
//! ([`Element`]).

use std::fmt;

/// The element type of a [`crate::Buffer`] (and of its views and tensors).
///
/// Lengths and offsets are always counted in elements of the buffer's type; a buffer of `len`
/// elements takes `len * dtype.size()` bytes. Every op checks its views' types at its boundary
/// and rejects a mismatch with [`crate::Error::DTypeMismatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// 32-bit IEEE float; the type every computing op takes today.
    F32,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    Bf16,
    /// IEEE half precision.
    F16,
    /// 32-bit unsigned integer.
    U32,
    /// 32-bit signed integer.
    I32,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::U32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
        }
    }

    /// Whether the elements are floats (f32, bf16, f16): the types an op's "T" views may hold
    /// (docs/architecture.md, "Typed storage").
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::Bf16 | DType::F16)
    }

    /// The lower-case name (`f32`, `bf16`, `f16`, `u32`, `i32`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
            DType::U32 => "u32",
            DType::I32 => "i32",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// A host type with a [`DType`]: what the typed transfers
/// ([`crate::ops::TypedMemory::upload_as`], [`crate::ops::TypedMemory::download_as`]) move.
/// Implemented for `f32`, `u32`, `i32`, [`half::bf16`] and [`half::f16`]; sealed.
pub trait Element: Copy + Default + Send + Sync + sealed::Sealed + 'static {
    /// The matching element type.
    const DTYPE: DType;

    /// Writes the value's native-endian bytes into `out` (`DTYPE.size()` bytes).
    fn write_ne(self, out: &mut [u8]);

    /// Reads a value from its native-endian bytes (`DTYPE.size()` bytes).
    fn read_ne(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $d:expr, $n:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;

            fn write_ne(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }

            fn read_ne(bytes: &[u8]) -> Self {
                let mut b = [0u8; $n];
                b.copy_from_slice(bytes);
                <$t>::from_ne_bytes(b)
            }
        }
    };
}

element!(f32, DType::F32, 4);
element!(u32, DType::U32, 4);
element!(i32, DType::I32, 4);
element!(half::bf16, DType::Bf16, 2);
element!(half::f16, DType::F16, 2);

/// `values` as native-endian bytes.
pub(crate) fn to_bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let size = T::DTYPE.size();
    let mut out = vec![0u8; values.len() * size];
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(size)) {
        v.write_ne(chunk);
    }
    out
}

/// Fills `out` from native-endian `bytes` (`out.len() * T::DTYPE.size()` of them).
pub(crate) fn from_bytes<T: Element>(bytes: &[u8], out: &mut [T]) {
    for (v, chunk) in out.iter_mut().zip(bytes.chunks_exact(T::DTYPE.size())) {
        *v = T::read_ne(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_names_and_round_trips() {
        assert_eq!(DType::Bf16.size(), 2);
        assert_eq!(DType::U32.to_string(), "u32");
        assert!(DType::F16.is_float() && DType::Bf16.is_float() && DType::F32.is_float());
        assert!(!DType::U32.is_float() && !DType::I32.is_float());
        let v = [half::bf16::from_f32(1.5), half::bf16::from_f32(-2.0)];
        let mut back = [half::bf16::default(); 2];
        from_bytes(&to_bytes(&v), &mut back);
        assert_eq!(v, back);
    }
}
