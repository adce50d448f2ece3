//! The kernel cache shared by every GPU backend: compiled binaries on disk, keyed by everything
//! that decides the binary (see DESIGN.md, "Kernels and the cache").
// SKELETON: replaced by the cache implementation (no disk cache yet: always builds).

use std::path::{Path, PathBuf};

use crate::error::Result;

/// What decides a compiled binary; hashed into the disk-cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey<'a> {
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

/// Size and entry count of the on-disk cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Number of cached binaries.
    pub entries: usize,
    /// Total bytes on disk.
    pub bytes: u64,
}

/// The on-disk kernel cache: `$RNN_CACHE_DIR`, else `$XDG_CACHE_HOME/rnn`, else `~/.cache/rnn`;
/// `RNN_CACHE=off` disables it.
#[derive(Debug, Clone)]
pub struct KernelCache {
    dir: Option<PathBuf>,
}

impl KernelCache {
    /// The cache as the environment configures it.
    pub fn from_env() -> Self {
        KernelCache { dir: None }
    }

    /// The cache directory, or `None` when the disk cache is off.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Entries and bytes on disk.
    pub fn stats(&self) -> Result<CacheStats> {
        Ok(CacheStats::default())
    }

    /// Deletes every entry; returns how many were removed.
    pub fn clear(&self) -> Result<usize> {
        Ok(0)
    }

    /// Returns the module for `key`: loaded from disk when a valid entry exists, else built and
    /// stored.
    pub(crate) fn get_or_build<M>(
        &self,
        _key: &CacheKey<'_>,
        build: impl FnOnce() -> Result<(Vec<u8>, M)>,
        _load: impl Fn(&[u8]) -> Result<M>,
    ) -> Result<M> {
        build().map(|(_, m)| m)
    }
}
