//! Lists what `rnn` finds on this machine: every runtime with its status and the reason when it
//! is unavailable, every device (with live utilization, memory, temperature and power where NVML
//! or ROCm SMI is loaded), the device `best_device()` picks, and the kernel disk cache.
//!
//! ```text
//! cargo run --example devices                 # list
//! cargo run --example devices -- --clear-cache
//! cargo run --example devices -- --warm-cache  # compile every kernel now (container builds)
//! RUST_LOG=debug cargo run --example devices  # with the probing log
//! ```

use std::process::ExitCode;
use std::time::Instant;

use rnn::cache::{CacheEnv, KernelCache};
use rnn::{BackendKind, DeviceInfo, GpuManager};

const USAGE: &str = "usage: devices [--clear-cache] [--warm-cache]
  --clear-cache  remove every entry of the kernel disk cache
  --warm-cache   compile the built-in kernels for every usable GPU device (only RNN_DEVICE's when
                 it is set) into the kernel disk cache, so that a first run starts warm";

fn main() -> ExitCode {
    let mut clear = false;
    let mut warm = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--clear-cache" => clear = true,
            "--warm-cache" => warm = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument '{other}'\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    // With --warm-cache, each module's line (compiled or loaded, and how long it took).
    let filter = if warm {
        "warn,rnn::backend::gpu::modules=debug"
    } else {
        "warn"
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(filter)).init();

    let manager = match GpuManager::new() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ok = true;

    println!("Runtimes:");
    for status in manager.backends() {
        println!("  {status}");
    }

    // Multi-device training needs NCCL (CUDA) or RCCL (HIP); single-device training does not.
    println!("\nCollectives (multi-GPU training):");
    for library in [
        rnn::dist::CollectiveLibrary::Nccl,
        rnn::dist::CollectiveLibrary::Rccl,
    ] {
        match rnn::dist::probe(library) {
            Ok(info) => println!(
                "  {:<6} available: version {} ({})",
                library.name(),
                info.version,
                info.path
            ),
            Err(e) => println!("  {e}"),
        }
    }

    println!("\nDevices:");
    for device in manager.devices() {
        println!("  {device}");
        // Live figures from the vendor's management library (NVML, ROCm SMI), where loaded.
        if let Some(f) = rnn::monitor::figures(device) {
            println!("      now: {f}");
        }
    }

    println!("\nMonitoring:");
    for line in rnn::monitor::libraries() {
        println!("  {line}");
    }

    println!();
    let rnn_device = std::env::var("RNN_DEVICE")
        .ok()
        .filter(|v| !v.trim().is_empty());
    match (manager.best_device(), &rnn_device) {
        (Ok(d), Some(_)) => println!("Selected device: {} ({}) [from RNN_DEVICE]", d.id, d.name),
        (Ok(d), None) => println!(
            "Selected device: {} ({}) [automatic; set RNN_DEVICE to override]",
            d.id, d.name
        ),
        (Err(e), Some(v)) => {
            println!("Selected device: none, RNN_DEVICE={v:?} cannot be used: {e}");
            ok = false;
        }
        (Err(e), None) => {
            println!("Selected device: none: {e}");
            ok = false;
        }
    }

    println!();
    let cache = match KernelCache::from_cache_env(&CacheEnv::current()) {
        Ok(c) => c,
        Err(e) => {
            println!("Kernel cache: {e}");
            ok = false;
            KernelCache::from_env()
        }
    };
    match cache.dir() {
        None => println!(
            "Kernel cache: disk cache off (RNN_CACHE=off, or none of RNN_CACHE_DIR, \
             XDG_CACHE_HOME, HOME is set)"
        ),
        Some(dir) => match cache.stats() {
            Ok(s) => println!(
                "Kernel cache: {} ({} entries, {})",
                dir.display(),
                s.entries,
                human_bytes(s.bytes)
            ),
            Err(e) => {
                println!("Kernel cache: {}: {e}", dir.display());
                ok = false;
            }
        },
    }
    if clear {
        match cache.clear() {
            Ok(n) => println!("Cleared the kernel cache: {n} entries removed"),
            Err(e) => {
                println!("Clearing the kernel cache failed: {e}");
                ok = false;
            }
        }
    }

    if warm {
        ok &= warm_cache(&manager, rnn_device.is_some());
        if let Some(dir) = cache.dir() {
            match cache.stats() {
                Ok(s) => println!(
                    "Kernel cache now: {} ({} entries, {})",
                    dir.display(),
                    s.entries,
                    human_bytes(s.bytes)
                ),
                Err(e) => println!("Kernel cache: {}: {e}", dir.display()),
            }
        }
    }

    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Compiles the built-in kernels of every usable device (only the selected one when
/// `RNN_DEVICE` is set), the devices at the same time and each device's modules on several
/// threads; prints how long each device took. False when one failed.
fn warm_cache(manager: &GpuManager, selected_only: bool) -> bool {
    let devices: Vec<&DeviceInfo> = if selected_only {
        manager.best_device().into_iter().collect()
    } else {
        manager
            .devices()
            .iter()
            .filter(|d| d.backend != BackendKind::Cpu)
            .collect()
    };
    if devices.is_empty() {
        println!("\nWarm cache: no GPU device to compile for");
        return true;
    }
    println!(
        "\nWarm cache: compiling the built-in kernels for {} device(s)",
        devices.len()
    );
    let started = Instant::now();
    let results: Vec<(String, rnn::Result<f64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .map(|d| {
                s.spawn(move || {
                    let t = Instant::now();
                    let warmed = manager
                        .create_context(d.id)
                        .and_then(|ctx| ctx.warm_up())
                        .map(|()| t.elapsed().as_secs_f64());
                    (format!("{} ({})", d.id, d.name), warmed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a warm-up thread panicked"))
            .collect()
    });
    let mut ok = true;
    for (device, result) in results {
        match result {
            Ok(secs) => println!("  {device}: ready in {secs:.2} s"),
            Err(e) => {
                println!("  {device}: failed: {e}");
                ok = false;
            }
        }
    }
    println!("  all devices: {:.2} s", started.elapsed().as_secs_f64());
    ok
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
