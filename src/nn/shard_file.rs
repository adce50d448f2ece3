//! Shard files: one [`Dataset`] per file in a small documented binary format, written by
//! [`Dataset::write_shards`] (or [`write_shard`]) and read by [`ShardFiles`], a
//! [`DataSource`] for data sets larger than the device (or the host).
//!
//! The format (`.rnnshard`), all integers little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `RNNSHRD1` |
//! | 8..16 | samples `n` (u64) |
//! | 16..24 | inputs per sample `width` (u64) |
//! | 24 | inputs: 0 = f32 features, 1 = u32 token ids |
//! | 25 | targets: 0 = u32 class labels, 1 = f32 values |
//! | 26..32 | zero |
//! | 32..40 | targets per sample (u64) |
//! | 40..48 | classes (u64; 0 for values) |
//! | 48.. | `n * width` inputs, then `n * targets per sample` targets, 4 bytes each |
//!
//! NumPy reads one with `np.fromfile(path, dtype="<f4", offset=48)` (split the two arrays by
//! their lengths); writing one from NumPy is the header's 48 bytes followed by
//! `x.astype("<f4").tobytes()` and `y.astype("<u4").tobytes()`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

use super::data::{Dataset, Targets};
use super::source::{DataSource, InputsMut, SampleSpec, TargetSpec, TargetsMut};

const MAGIC: &[u8; 8] = b"RNNSHRD1";
const HEADER: usize = 48;

/// A shard file's header: its samples and their spec.
fn parse_header(bytes: &[u8], path: &Path) -> Result<(usize, SampleSpec)> {
    let bad = |reason: String| Error::Format {
        path: path.display().to_string(),
        reason,
    };
    if bytes.len() < HEADER {
        return Err(bad(format!(
            "{} bytes is shorter than the 48-byte shard header",
            bytes.len()
        )));
    }
    if &bytes[..8] != MAGIC {
        return Err(bad("not a shard file (magic is not RNNSHRD1)".into()));
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let to_usize = |v: u64, what: &str| {
        usize::try_from(v).map_err(|_| bad(format!("{what} {v} does not fit this machine")))
    };
    let n = to_usize(u64_at(8), "sample count")?;
    let width = to_usize(u64_at(16), "width")?;
    let per = to_usize(u64_at(32), "targets per sample")?;
    let classes = to_usize(u64_at(40), "classes")?;
    let token_ids = match bytes[24] {
        0 => false,
        1 => true,
        k => {
            return Err(bad(format!(
                "input kind {k}, expected 0 (f32) or 1 (u32 ids)"
            )));
        }
    };
    let targets = match bytes[25] {
        0 => TargetSpec::Classes {
            classes,
            per_sample: per,
        },
        1 => TargetSpec::Values { width: per },
        k => {
            return Err(bad(format!(
                "target kind {k}, expected 0 (labels) or 1 (values)"
            )));
        }
    };
    Ok((
        n,
        SampleSpec {
            width,
            token_ids,
            targets,
        },
    ))
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The input values of a shard of `n` samples of `spec`, after checking that the file's
/// `file_len` bytes are exactly its header and values.
fn checked_size(n: usize, spec: SampleSpec, file_len: u64, path: &Path) -> Result<usize> {
    let per = match spec.targets {
        TargetSpec::Classes { per_sample, .. } => per_sample,
        TargetSpec::Values { width } => width,
    };
    let (x_len, y_len) = (n.checked_mul(spec.width), n.checked_mul(per));
    let need = x_len
        .zip(y_len)
        .and_then(|(x, y)| x.checked_add(y)?.checked_mul(4)?.checked_add(HEADER));
    let (Some(need), Some(x_len)) = (need, x_len) else {
        return Err(Error::Format {
            path: path.display().to_string(),
            reason: format!("{n} samples of width {} overflow", spec.width),
        });
    };
    if file_len != need as u64 {
        return Err(Error::Format {
            path: path.display().to_string(),
            reason: format!(
                "{file_len} bytes, the header's {n} samples need {need} (truncated or padded file)"
            ),
        });
    }
    Ok(x_len)
}

/// Bytes a reading thread takes at least: one thread reads a small shard, a large one is read
/// by several in parallel (one copy from the page cache runs at a few GB/s).
const READ_SHARE: usize = 8 << 20;

/// Cores the threads reading shards may take between them: all but one, which the thread that
/// queues the training steps needs (with every core copying from the page cache, its launches
/// wait their turn and the device idles).
pub(crate) fn reading_cores() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_sub(1).max(1)
}

/// Reads in progress ([`read_values`]), which share [`reading_cores`].
static READS: AtomicUsize = AtomicUsize::new(0);

/// One read counted in [`READS`] while it lives.
struct CountedRead;

impl CountedRead {
    /// Counts a read in; returns the reads now in progress, this one included.
    fn enter() -> (Self, usize) {
        (CountedRead, READS.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl Drop for CountedRead {
    fn drop(&mut self) {
        READS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads exactly `out`'s bytes from `file` at `offset`, in large positional reads shared by
/// up to its part of [`reading_cores`] (shared with the reads in progress), and turns the
/// little-endian values into native ones.
fn read_values<T: bytemuck::Pod>(
    file: &std::fs::File,
    offset: u64,
    out: &mut [T],
    path: &Path,
    swap: fn(&mut T),
) -> Result<()> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    let (_counted, reads) = CountedRead::enter();
    let cores = (reading_cores() / reads).max(1);
    let threads = bytes.len().div_ceil(READ_SHARE).clamp(1, cores);
    let share = bytes.len().div_ceil(threads).max(1);
    let read = std::thread::scope(|scope| {
        let handles: Vec<_> = bytes
            .chunks_mut(share)
            .enumerate()
            .map(|(i, part)| {
                scope.spawn(move || read_exact_at(file, part, offset + (i * share) as u64))
            })
            .collect();
        // Every thread is joined (one left unjoined would take its panic to the scope).
        let mut first = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a shard reading thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    });
    read.map_err(|e| Error::io(path, e))?;
    if cfg!(target_endian = "big") {
        out.iter_mut().for_each(swap);
    }
    Ok(())
}

#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, out: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, out, offset)
}

#[cfg(not(unix))]
fn read_exact_at(file: &std::fs::File, mut out: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !out.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, out, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                out = &mut out[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

fn swap_u32(v: &mut u32) {
    *v = u32::from_le(*v);
}

fn swap_f32(v: &mut f32) {
    *v = f32::from_bits(u32::from_le(v.to_bits()));
}

/// Parses a whole shard file (checked: header, length, and the values as [`Dataset::new`]
/// checks them).
fn parse_shard(bytes: &[u8], path: &Path) -> Result<Dataset> {
    let (n, spec) = parse_header(bytes, path)?;
    let x_len = checked_size(n, spec, bytes.len() as u64, path)?;
    let (x, y) = bytes[HEADER..].split_at(x_len * 4);
    let targets = match spec.targets {
        TargetSpec::Classes {
            classes,
            per_sample,
        } => Targets::Classes {
            labels: u32s(y),
            classes,
            per_sample,
        },
        TargetSpec::Values { width } => Targets::Values {
            values: f32s(y),
            width,
        },
    };
    let data = match spec.token_ids {
        true => Dataset::tokens(u32s(x), spec.width, targets),
        false => Dataset::new(f32s(x), spec.width, targets),
    };
    data.map_err(|e| match e {
        Error::InvalidData(m) => Error::InvalidData(format!("{}: {m}", path.display())),
        e => e,
    })
}

/// Writes `data` as one shard file at `path` (the format is in the module docs).
pub fn write_shard(path: impl AsRef<Path>, data: &Dataset) -> Result<()> {
    let path = path.as_ref();
    let spec = SampleSpec::of(data);
    let (kind, per, classes) = match spec.targets {
        TargetSpec::Classes {
            classes,
            per_sample,
        } => (0u8, per_sample, classes),
        TargetSpec::Values { width } => (1u8, width, 0),
    };
    let mut out = Vec::with_capacity(HEADER + 4 * data.len() * (data.width() + per));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&(data.width() as u64).to_le_bytes());
    out.push(u8::from(spec.token_ids));
    out.push(kind);
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&(per as u64).to_le_bytes());
    out.extend_from_slice(&(classes as u64).to_le_bytes());
    match data.token_ids() {
        Some(ids) => ids
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        None => data
            .features()
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
    }
    match data.targets() {
        Targets::Classes { labels, .. } => labels
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Targets::Values { values, .. } => values
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}

impl Dataset {
    /// Writes this data set as shard files of `samples_per_shard` samples (the last may hold
    /// fewer) into `dir` (created if missing), named `shard-00000.rnnshard`, ..., and returns
    /// their paths in order, for [`ShardFiles::open`].
    pub fn write_shards(
        &self,
        dir: impl AsRef<Path>,
        samples_per_shard: usize,
    ) -> Result<Vec<PathBuf>> {
        let dir = dir.as_ref();
        if samples_per_shard == 0 {
            return Err(Error::InvalidArgument(
                "samples_per_shard must be > 0".into(),
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut paths = Vec::new();
        for (i, start) in (0..self.len()).step_by(samples_per_shard).enumerate() {
            let rows: Vec<usize> = (start..(start + samples_per_shard).min(self.len())).collect();
            let path = dir.join(format!("shard-{i:05}.rnnshard"));
            write_shard(&path, &self.select(&rows)?)?;
            paths.push(path);
        }
        Ok(paths)
    }
}

/// Shard files (see the module docs for the format) as a [`DataSource`]: [`ShardFiles::open`]
/// reads only their headers; each shard is read whole when training needs it.
#[derive(Debug, Clone)]
pub struct ShardFiles {
    paths: Vec<PathBuf>,
    lens: Vec<usize>,
    spec: SampleSpec,
}

impl ShardFiles {
    /// Opens the shard files at `paths` (in this order: shard `i` is `paths[i]`). Every file
    /// must hold samples of the same spec; no files, or a file that is not a shard, is an
    /// error naming it.
    pub fn open<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self> {
        let paths: Vec<PathBuf> = paths.into_iter().map(|p| p.as_ref().to_owned()).collect();
        let mut lens = Vec::with_capacity(paths.len());
        let mut spec: Option<SampleSpec> = None;
        for path in &paths {
            let mut header = [0u8; HEADER];
            let read = std::fs::File::open(path)
                .and_then(|mut f| std::io::Read::read(&mut f, &mut header).map(|k| k.min(HEADER)));
            let got = read.map_err(|e| Error::io(path, e))?;
            let (n, s) = parse_header(&header[..got], path)?;
            match spec {
                Some(first) if first != s => {
                    return Err(Error::InvalidData(format!(
                        "{}: samples of {s:?}, {} holds {first:?}",
                        path.display(),
                        paths[0].display()
                    )));
                }
                _ => spec = Some(s),
            }
            lens.push(n);
        }
        let spec = spec.ok_or_else(|| Error::InvalidArgument("no shard files given".into()))?;
        Ok(ShardFiles { paths, lens, spec })
    }

    /// The shard files, in shard order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl DataSource for ShardFiles {
    fn spec(&self) -> SampleSpec {
        self.spec
    }

    fn shard_lens(&self) -> &[usize] {
        &self.lens
    }

    fn read_shard(&self, index: usize) -> Result<Dataset> {
        let path = self.paths.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!("shard {index} of {}", self.paths.len()))
        })?;
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        parse_shard(&bytes, path)
    }

    fn shard_name(&self, index: usize) -> String {
        self.paths
            .get(index)
            .map_or_else(|| format!("shard {index}"), |p| p.display().to_string())
    }

    /// Reads the file's values straight into the buffers (one read each for the inputs and
    /// the targets), after checking its header and length; the stream checks the values.
    fn read_shard_into(
        &self,
        index: usize,
        inputs: InputsMut<'_>,
        targets: TargetsMut<'_>,
    ) -> Result<()> {
        let path = self.paths.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!("shard {index} of {}", self.paths.len()))
        })?;
        let io = |e| Error::io(path, e);
        let mut file = std::fs::File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut header = [0u8; HEADER];
        let got = std::io::Read::read(&mut file, &mut header).map_err(io)?;
        let (n, spec) = parse_header(&header[..got.min(HEADER)], path)?;
        if spec != self.spec || n != self.lens[index] {
            return Err(Error::InvalidData(format!(
                "{}: {n} samples of {spec:?}, opened as {} of {:?} (was the file replaced?)",
                path.display(),
                self.lens[index],
                self.spec
            )));
        }
        let x_len = checked_size(n, spec, file_len, path)?;
        // The file's length was checked: after the inputs come exactly the targets.
        let y_len = (file_len as usize - HEADER) / 4 - x_len;
        for (what, got, want) in [
            ("input", inputs.len(), x_len),
            ("target", targets.len(), y_len),
        ] {
            if got != want {
                return Err(Error::InvalidArgument(format!(
                    "{}: a {what} buffer of {got} values for the shard's {want}",
                    path.display()
                )));
            }
        }
        let at = HEADER as u64;
        match inputs {
            InputsMut::Features(x) => read_values(&file, at, x, path, swap_f32)?,
            InputsMut::Ids(x) => read_values(&file, at, x, path, swap_u32)?,
        }
        let at = (HEADER + x_len * 4) as u64;
        match targets {
            TargetsMut::Labels(y) => read_values(&file, at, y, path, swap_u32),
            TargetsMut::Values(y) => read_values(&file, at, y, path, swap_f32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_round_trips_and_a_truncated_one_is_named() {
        let dir = std::env::temp_dir().join(format!("rnn-shard-unit-{}", std::process::id()));
        let data = Dataset::classification(vec![0.5, 1.0, 2.0, 3.0], 2, vec![1, 0], 3).unwrap();
        let paths = data.write_shards(&dir, 1).unwrap();
        assert_eq!(paths.len(), 2);
        let files = ShardFiles::open(&paths).unwrap();
        assert_eq!(files.shard_lens(), &[1, 1]);
        assert_eq!(files.read_shard(1).unwrap(), data.select(&[1]).unwrap());
        let bytes = std::fs::read(&paths[0]).unwrap();
        std::fs::write(&paths[0], &bytes[..bytes.len() - 2]).unwrap();
        let err = files.read_shard(0).unwrap_err().to_string();
        assert!(
            err.contains("truncated") && err.contains("shard-00000"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A shard larger than one reading thread's share is read by several, straight into the
    /// buffers, with the values `read_shard` gives.
    #[test]
    fn read_shard_into_reads_a_large_shard_in_parts() {
        let dir = std::env::temp_dir().join(format!("rnn-shard-parts-{}", std::process::id()));
        let (n, width) = (3000, 784);
        assert!(n * width * 4 > READ_SHARE);
        let x: Vec<f32> = (0..n * width).map(|i| (i % 9973) as f32 * 0.5).collect();
        let y: Vec<u32> = (0..n).map(|i| (i % 10) as u32).collect();
        let data = Dataset::classification(x.clone(), width, y.clone(), 10).unwrap();
        let paths = data.write_shards(&dir, n).unwrap();
        let files = ShardFiles::open(&paths).unwrap();
        let (mut xs, mut ys) = (vec![f32::NAN; n * width], vec![u32::MAX; n]);
        files
            .read_shard_into(0, InputsMut::Features(&mut xs), TargetsMut::Labels(&mut ys))
            .unwrap();
        assert!(xs == x && ys == y);
        // Buffers of another size are an error, not a short read.
        let err = files.read_shard_into(
            0,
            InputsMut::Features(&mut xs[1..]),
            TargetsMut::Labels(&mut ys),
        );
        assert!(err.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
