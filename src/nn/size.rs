//! Checked arithmetic on user-controlled sizes (layer widths, batch sizes, sequence lengths)
//! and the row limit that u32 index buffers impose: an overflow or a row that u32 cannot
//! number is a clear error before anything is allocated.

use crate::error::{Error, Result};

/// Most rows that device index buffers can name (samples of a data set, rows of a batch's
/// sequence, classes, token ids): indices are u32, so rows `0..u32::MAX` (`u32::MAX` of them).
pub const MAX_INDEXED_ROWS: usize = u32::MAX as usize;

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

/// Rejects `rows` that a u32 index buffer cannot number.
pub(crate) fn check_indexed_rows(rows: usize, what: &str) -> Result<()> {
    if rows > MAX_INDEXED_ROWS {
        return Err(Error::InvalidArgument(format!(
            "{what}: {rows} rows; at most {MAX_INDEXED_ROWS} are supported (device row \
             indices are u32)"
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
        // Beyond the 2^24 rows that f32 indices could name exactly.
        check_indexed_rows((1 << 24) + 2, "x").unwrap();
        check_indexed_rows(MAX_INDEXED_ROWS, "x").unwrap();
        let err = check_indexed_rows(MAX_INDEXED_ROWS + 1, "training samples").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("training samples"), "{err}");
        // Every row below the limit has a u32 index.
        assert_eq!(u32::try_from(MAX_INDEXED_ROWS - 1).ok(), Some(u32::MAX - 1));
    }
}
