//! The disk-cache key: a SHA-256 over everything that decides a compiled binary.

use sha2::{Digest, Sha256};

/// What decides a compiled binary; hashed into the disk-cache key.
///
/// Every field goes into the hash, together with the crate version, so a change to any of them
/// (or an upgrade of `rnn`) is a miss rather than a stale binary.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey<'a> {
    /// Complete source text.
    pub source: &'a str,
    /// Compiler options.
    pub options: &'a [String],
    /// Device name.
    pub device: &'a str,
    /// Device architecture.
    pub arch: &'a str,
    /// Compiler and driver versions ([`crate::backend::Device::compiler_identity`]).
    pub compiler: &'a str,
}

/// Separates this hash from any other SHA-256 use; bump the suffix if the framing changes.
const DOMAIN: &[u8] = b"rnn kernel cache key v1\0";

impl CacheKey<'_> {
    /// The SHA-256 of the key's parts and the crate version.
    ///
    /// Each part is length-prefixed, so moving bytes from one field to the next (for example an
    /// option `"-a -b"` versus the options `"-a"`, `"-b"`) always changes the digest.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(DOMAIN);
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(env!("CARGO_PKG_VERSION").as_bytes());
        part(self.source.as_bytes());
        part(&(self.options.len() as u64).to_le_bytes());
        for opt in self.options {
            part(opt.as_bytes());
        }
        part(self.device.as_bytes());
        part(self.arch.as_bytes());
        part(self.compiler.as_bytes());
        h.finalize().into()
    }

    /// [`CacheKey::digest`] as 64 lowercase hex digits (the entry's file stem).
    pub fn hex(&self) -> String {
        hex(&self.digest())
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(options: &'a [String]) -> CacheKey<'a> {
        CacheKey {
            source: "src",
            options,
            device: "dev",
            arch: "arch",
            compiler: "cc",
        }
    }

    #[test]
    fn framing_keeps_option_boundaries() {
        let joined = vec!["-a -b".to_string()];
        let split = vec!["-a".to_string(), "-b".to_string()];
        assert_ne!(key(&joined).digest(), key(&split).digest());
    }

    #[test]
    fn framing_keeps_field_boundaries() {
        let a = CacheKey {
            device: "ab",
            arch: "c",
            ..key(&[])
        };
        let b = CacheKey {
            device: "a",
            arch: "bc",
            ..key(&[])
        };
        assert_ne!(a.digest(), b.digest());
    }

    #[test]
    fn hex_is_64_lowercase_digits() {
        let h = key(&[]).hex();
        assert_eq!(h.len(), 64);
        assert!(
            h.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
    }
}
