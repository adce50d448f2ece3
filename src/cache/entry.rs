//! One cache entry on disk: a fixed header, then the compiled binary.
//!
//! Layout (integers little-endian):
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `RNNKCACH` |
//! | 4 | format version ([`FORMAT_VERSION`]) |
//! | 4 | reserved, zero |
//! | 32 | the key digest the entry was stored under |
//! | 8 | payload length |
//! | 32 | SHA-256 of the payload |
//! | n | payload (the binary) |
//!
//! The key digest in the header catches a file that was copied or renamed to another key's
//! name; the checksum catches truncation and bit rot that a driver might otherwise accept.

use std::fmt;

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"RNNKCACH";
/// Bumped whenever the layout changes; older entries are then rejected and rebuilt.
pub(crate) const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4 + 32 + 8 + 32;

/// File extension of a finished entry.
pub(crate) const EXTENSION: &str = "rnnk";
/// Marker inside the name of a temp file being written (never an entry); see
/// [`crate::fsutil::write_atomic`].
pub(crate) const TEMP_MARKER: &str = ".rnnk-tmp-";

/// Why an entry could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Corrupt {
    /// Shorter than the header.
    Short(usize),
    /// Wrong magic bytes.
    Magic,
    /// A format this build does not read.
    Version(u32),
    /// Stored under another key.
    Key,
    /// The payload length in the header disagrees with the file.
    Length { header: u64, actual: usize },
    /// The payload does not match its checksum.
    Checksum,
}

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corrupt::Short(n) => write!(f, "{n} bytes, shorter than the {HEADER_LEN}-byte header"),
            Corrupt::Magic => f.write_str("not a kernel cache entry (bad magic)"),
            Corrupt::Version(v) => {
                write!(f, "format version {v}, expected {FORMAT_VERSION}")
            }
            Corrupt::Key => f.write_str("stored under a different key"),
            Corrupt::Length { header, actual } => {
                write!(f, "header says {header} payload bytes, file has {actual}")
            }
            Corrupt::Checksum => f.write_str("payload checksum mismatch"),
        }
    }
}

/// The bytes of an entry holding `payload` for the key `digest`.
pub(crate) fn encode(digest: &[u8; 32], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(digest);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(payload));
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry, after checking every header field against the file.
pub(crate) fn decode<'a>(digest: &[u8; 32], file: &'a [u8]) -> Result<&'a [u8], Corrupt> {
    if file.len() < HEADER_LEN {
        return Err(Corrupt::Short(file.len()));
    }
    let (header, payload) = file.split_at(HEADER_LEN);
    if &header[0..8] != MAGIC {
        return Err(Corrupt::Magic);
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(Corrupt::Version(version));
    }
    if &header[16..48] != digest {
        return Err(Corrupt::Key);
    }
    let len = u64::from_le_bytes(header[48..56].try_into().expect("8 bytes"));
    if len != payload.len() as u64 {
        return Err(Corrupt::Length {
            header: len,
            actual: payload.len(),
        });
    }
    if Sha256::digest(payload).as_slice() != &header[56..88] {
        return Err(Corrupt::Checksum);
    }
    Ok(payload)
}

/// The file name of the entry for a key with this hex digest.
pub(crate) fn file_name(hex: &str) -> String {
    format!("{hex}.{EXTENSION}")
}

/// True for names this cache writes as finished entries: 64 lowercase hex digits + extension.
pub(crate) fn is_entry_name(name: &str) -> bool {
    name.strip_suffix(EXTENSION)
        .and_then(|stem| stem.strip_suffix('.'))
        .is_some_and(|stem| {
            stem.len() == 64
                && stem
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        })
}

/// True for names of this cache's temp files (written with [`TEMP_MARKER`]).
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: [u8; 32] = [7; 32];

    #[test]
    fn round_trip() {
        let e = encode(&D, b"binary");
        assert_eq!(decode(&D, &e), Ok(&b"binary"[..]));
        let empty = encode(&D, b"");
        assert_eq!(decode(&D, &empty), Ok(&b""[..]));
    }

    #[test]
    fn every_corruption_is_detected() {
        let e = encode(&D, b"some payload bytes");
        assert_eq!(decode(&D, &e[..10]), Err(Corrupt::Short(10)));
        assert!(matches!(
            decode(&D, &e[..e.len() - 1]),
            Err(Corrupt::Length { .. })
        ));
        let mut bad = e.clone();
        bad[0] ^= 1;
        assert_eq!(decode(&D, &bad), Err(Corrupt::Magic));
        let mut bad = e.clone();
        bad[8] = 9;
        assert_eq!(decode(&D, &bad), Err(Corrupt::Version(9)));
        assert_eq!(decode(&[8; 32], &e), Err(Corrupt::Key));
        let mut bad = e.clone();
        *bad.last_mut().unwrap() ^= 0x40;
        assert_eq!(decode(&D, &bad), Err(Corrupt::Checksum));
    }

    #[test]
    fn names() {
        let hex = "0123456789abcdef".repeat(4);
        assert!(is_entry_name(&file_name(&hex)));
        assert!(!is_entry_name("notes.txt"));
        assert!(!is_entry_name(&format!("{}.rnnk", &hex[1..])));
        assert!(!is_entry_name(&format!("{}.rnnk", hex.to_uppercase())));
        assert!(is_temp_name(&format!(
            ".{}{TEMP_MARKER}12-0-5",
            file_name(&hex)
        )));
        assert!(!is_temp_name(&file_name(&hex)));
    }
}
