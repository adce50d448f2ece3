//! A context's optional cap on the bytes its live buffers hold ([`crate::Context::set_memory_limit`]),
//! so a program (or a test) can prove it fits a smaller device than the one it runs on. Below
//! the buffers and the backends, which both use it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// The cap and the bytes charged against it; one per context.
#[derive(Default)]
pub(crate) struct MemoryLimit {
    /// The cap in bytes; 0 means none.
    limit: AtomicUsize,
    /// Bytes held by this context's live buffers (counted whether or not a cap is set).
    used: Arc<AtomicUsize>,
}

/// Bytes a live buffer holds against its context's [`MemoryLimit`]; given back on drop.
pub(crate) struct Charge {
    used: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl MemoryLimit {
    /// Sets the cap (`None`: no cap). Buffers alive already keep their memory.
    pub(crate) fn set(&self, bytes: Option<usize>) {
        self.limit.store(bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// The cap, if one is set.
    pub(crate) fn get(&self) -> Option<usize> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|&l| l > 0)
    }

    /// Bytes held by live buffers.
    pub(crate) fn in_use(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Charges `bytes` for a new buffer on `device`: [`Error::OutOfMemory`] when that would
    /// pass the cap.
    pub(crate) fn charge(&self, bytes: usize, device: &str) -> Result<Charge> {
        let limit = self.limit.load(Ordering::Relaxed);
        let fits = |used: usize| {
            let after = used.checked_add(bytes)?;
            (limit == 0 || after <= limit).then_some(after)
        };
        match self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits)
        {
            Ok(_) => Ok(Charge {
                used: self.used.clone(),
                bytes,
            }),
            Err(used) => Err(Error::OutOfMemory {
                device: format!("{device} (memory limit)"),
                requested: bytes,
                free: limit.saturating_sub(used),
                total: limit,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryLimit;

    #[test]
    fn charges_pass_the_cap_only_when_none_is_set() {
        let m = MemoryLimit::default();
        let a = m.charge(100, "cpu").unwrap();
        m.set(Some(150));
        assert!(m.charge(51, "cpu").is_err());
        let b = m.charge(50, "cpu").unwrap();
        assert_eq!(m.in_use(), 150);
        drop(a);
        assert_eq!(m.in_use(), 50);
        m.set(None);
        let _c = m.charge(1 << 40, "cpu").unwrap();
        drop(b);
    }
}
