//! User kernels: compiled through the kernel cache, kept per context by (source hash, options,
//! entry), launched with views expanded to base pointer + element offset.

use crate::ops::prelude::*;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::GpuOps;
use super::launch::Args;
use crate::backend::Device;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::check;

impl<D: Device> KernelOps for GpuOps<D> {
    fn compile(&self, source: &KernelSource) -> Result<Kernel> {
        let dialect = self.device.dialect();
        if source.dialect != dialect {
            return Err(Error::Unsupported {
                op: format!("compiling a {} kernel", source.dialect),
                backend: self.info.backend,
                reason: format!("{} compiles {dialect} sources", self.info.id),
            });
        }
        if source.entry.is_empty() {
            return Err(Error::InvalidArgument("kernel entry point is empty".into()));
        }
        let hash: [u8; 32] = Sha256::digest(source.source.as_bytes()).into();
        let key = (hash, source.options.clone(), source.entry.clone());
        let cached = self.user.lock().get(&key).cloned();
        let module = match cached {
            Some(m) => m,
            None => {
                let m = self.build_module(&source.source, &source.options)?;
                self.user.lock().entry(key).or_insert(m).clone()
            }
        };
        if !self.device.has_entry(&module, &source.entry)? {
            return Err(Error::InvalidArgument(format!(
                "the {} source compiled for {} defines no kernel named '{}'",
                source.dialect, self.info.id, source.entry
            )));
        }
        let module: Arc<dyn std::any::Any + Send + Sync> = module;
        Ok(Kernel {
            context: self.context,
            entry: source.entry.clone(),
            module,
        })
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg<'_>]) -> Result<()> {
        if kernel.context != self.context {
            return Err(Error::ForeignBuffer(format!(
                "kernel '{}' was compiled by context {}, launched on {}",
                kernel.entry, kernel.context, self.context
            )));
        }
        let module = kernel.module.downcast_ref::<D::Module>().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "kernel '{}' was not compiled by a {} device",
                kernel.entry, self.info.backend
            ))
        })?;
        if config.grid.contains(&0) || config.block.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "launch of '{}': grid {:?} and block {:?} must be non-zero",
                kernel.entry, config.grid, config.block
            )));
        }
        let mut raw = Args::new();
        for a in args {
            raw = match *a {
                KernelArg::Buffer(v) => {
                    check::same_context("launch", self.context, &[&v])?;
                    raw.buf(&v)?
                }
                KernelArg::F32(x) => raw.f32(x),
                KernelArg::U32(x) => raw.u32(x),
                KernelArg::I32(x) => raw.i32(x),
                KernelArg::U64(x) => raw.u64(x),
            };
        }
        self.device
            .launch(module, &kernel.entry, config, raw.as_slice())
    }
}
