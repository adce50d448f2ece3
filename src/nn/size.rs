//! Checked arithmetic on user-controlled sizes (layer widths, batch sizes, sequence lengths)
//! and the row limit that f32 index buffers impose: an overflow or an index that f32 cannot
//! hold exactly is a clear error before anything is allocated.

use crate::error::{Error, Result};

/// Rows that device index buffers can name: indices are stored as f32, which holds every
/// integer below 2^24 exactly and rounds above it.
pub const MAX_INDEXED_ROWS: usize = 1 << 24;

/// `a * b`, or [`Error::InvalidArgument`] naming `what` on overflow.
pub(crate) fn mul(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| {
        Error::InvalidArgument(format!("{what}: {a} x {b} overflows the address space"))
    })
}

/// `a + b`, or [`Error::InvalidArgument`] naming `what` on overflow.
pub(crate) fn add(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_add(b).ok_or_else(|| {
        Error::InvalidArgument(format!("{what}: {a} + {b} overflows the address space"))
    })
}

/// The product of `dims`, or `None` on overflow.
pub(crate) fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Rejects `rows` that an f32 index buffer cannot address exactly.
pub(crate) fn check_indexed_rows(rows: usize, what: &str) -> Result<()> {
    if rows >= MAX_INDEXED_ROWS {
        return Err(Error::InvalidArgument(format!(
            "{what}: {rows} rows; at most {} are supported (device row indices are f32, exact \
             only below 2^24)",
            MAX_INDEXED_ROWS - 1
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_an_error() {
        assert_eq!(mul(3, 4, "x").unwrap(), 12);
        assert!(matches!(
            mul(usize::MAX, 2, "x"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            add(usize::MAX, 1, "x"),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(product(&[2, 3, 4]), Some(24));
        assert_eq!(product(&[]), Some(1));
        assert_eq!(product(&[usize::MAX, 2]), None);
    }

    #[test]
    fn index_limit() {
        check_indexed_rows(MAX_INDEXED_ROWS - 1, "x").unwrap();
        let err = check_indexed_rows(MAX_INDEXED_ROWS, "training samples").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("training samples"), "{err}");
        // The reason for the limit: 2^24 + 1 is not an f32.
        assert_ne!((MAX_INDEXED_ROWS + 1) as f32 as usize, MAX_INDEXED_ROWS + 1);
    }
}
