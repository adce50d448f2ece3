//! Training on a stream (`DataStream` over shard files or generated shards): the same loss
//! curve as the in-memory run on the same data and order, a device-memory cap the stream
//! fits and the in-memory run does not, deterministic shard shuffling, CPU replicas, resuming
//! from a training checkpoint, and clear errors for bad shards; each with batches gathered on
//! the host and with whole windows gathered on the device (`StreamGather`).

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rnn::nn::{
    DataSource, DataStream, Dataset, GeneratedShards, Progress, SampleSpec, ShardFiles,
    StreamGather, TrainingConfig,
};
use rnn::{Activation, Context, DeviceId, Error};

use crate::fixtures::{blobs, classifier};
use crate::loop_checks::assert_same_history;
use crate::support::{Target, contexts};

/// Both ways of gathering a stream's batches: where the device has no copy stream (the CPU)
/// `Device` copies each window in order with the steps.
const GATHERS: [StreamGather; 2] = [StreamGather::Host, StreamGather::Device];

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rnn-stream-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config(ctx: &Context, epochs: usize, shuffle: bool) -> TrainingConfig {
    TrainingConfig {
        use_gpu: ctx.id() != DeviceId::Cpu,
        device: Some(ctx.id()),
        epochs,
        batch_size: 50,
        learning_rate: 0.05,
        shuffle,
        seed: 11,
        progress: Progress::Off,
        ..Default::default()
    }
}

/// `data` as generated shards of `per_shard` samples (the last may be smaller), each read
/// counted in `reads`.
fn shards_of(
    data: &Dataset,
    per_shard: usize,
    reads: Arc<AtomicUsize>,
) -> GeneratedShards<impl Fn(usize) -> rnn::Result<Dataset> + Send + Sync + use<>> {
    let n = data.len();
    let lens: Vec<usize> = (0..n)
        .step_by(per_shard)
        .map(|s| per_shard.min(n - s))
        .collect();
    let data = data.clone();
    GeneratedShards::new(SampleSpec::of(&data), lens, move |i| {
        reads.fetch_add(1, Ordering::Relaxed);
        let rows: Vec<usize> = (i * per_shard..((i + 1) * per_shard).min(n)).collect();
        data.select(&rows)
    })
}

/// One shard reproduces the in-memory shuffle; many shards in data order reproduce the
/// unshuffled in-memory run: bit-equal loss curves either way, validation included, gathered
/// on the host or on the device (windows of 120 samples and batches of 50 straddle windows;
/// a last window of 30 samples is smaller than a batch, which only host gathering takes).
fn stream_matches_in_memory(target: Target, test: &str) {
    let data = blobs(300, 3);
    let (train, val) = data.split_at(240).unwrap();
    let dir = temp_dir(test);
    let cases = [
        (true, 240, 1, StreamGather::Device),
        (true, 240, 1, StreamGather::Host),
        (false, 60, 2, StreamGather::Device),
        (false, 60, 2, StreamGather::Host),
        (false, 35, 2, StreamGather::Auto),
    ];
    for ctx in contexts(target, test) {
        let net = || classifier(&ctx, 4, [8, 16, 3], Activation::Tanh);
        for (shuffle, per_shard, window, gather) in cases {
            let cfg = TrainingConfig {
                validation_split: 0.2,
                ..config(&ctx, 4, shuffle)
            };
            let memory = net().train(&data, &cfg).unwrap();
            let paths = train.write_shards(&dir, per_shard).unwrap();
            let stream = DataStream::new(ShardFiles::open(&paths).unwrap())
                .shuffle_window(window)
                .prefetch(2)
                .gather(gather)
                .validation(val.clone());
            let streamed = net()
                .train(
                    &stream,
                    &TrainingConfig {
                        validation_split: 0.0,
                        ..cfg.clone()
                    },
                )
                .unwrap();
            let what = format!(
                "{} shuffle {shuffle}, {per_shard} per shard, {gather:?}",
                ctx.id()
            );
            assert_same_history(&memory, &streamed, 0.0, &what);
            assert!(memory.epochs[0].val_loss.is_some(), "{what}");
            for p in paths {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cpu_stream_matches_in_memory() {
    stream_matches_in_memory(Target::Cpu, "cpu_stream_matches_in_memory");
}

#[test]
fn opencl_stream_matches_in_memory() {
    stream_matches_in_memory(Target::OpenCl, "opencl_stream_matches_in_memory");
}

#[test]
fn cuda_stream_matches_in_memory() {
    stream_matches_in_memory(Target::Cuda, "cuda_stream_matches_in_memory");
}

/// A data set larger than the context's memory cap: the stream holds two batches of it on
/// the device (or two windows of two shards) and trains; the in-memory run cannot upload it.
/// On a GPU the data set is large enough (72 MB) that the cap also leaves room for the op
/// set's scratch buffers. `Auto` gathers on the host there: two windows would take more than a
/// quarter of the cap.
fn a_stream_fits_a_memory_cap_that_the_data_set_does_not(target: Target, test: &str) {
    let gpu = target != Target::Cpu;
    let (n, batch, per_shard) = if gpu {
        (2_000_000, 4096, 100_000)
    } else {
        (3000, 50, 250)
    };
    let data = blobs(n, 8);
    let data_bytes = data.len() * (data.width() + 1) * 4;
    let cap = data_bytes * 2 / 3;
    for ctx in contexts(target, test) {
        ctx.set_memory_limit(Some(cap));
        let cfg = TrainingConfig {
            batch_size: batch,
            ..config(&ctx, 2, true)
        };
        let mut net = classifier(&ctx, 2, [8, 16, 3], Activation::Tanh);
        match net.train(&data, &cfg) {
            Err(Error::OutOfMemory { .. }) => {}
            other => panic!(
                "{}: the in-memory run should not fit {cap} bytes: {other:?}",
                ctx.id()
            ),
        }
        for gather in [StreamGather::Auto, StreamGather::Device] {
            let reads = Arc::new(AtomicUsize::new(0));
            let stream = DataStream::new(shards_of(&data, per_shard, reads.clone()))
                .shuffle_window(2)
                .gather(gather);
            let mut net = classifier(&ctx, 2, [8, 16, 3], Activation::Tanh);
            let history = net.train(&stream, &cfg).unwrap();
            assert_eq!(history.epochs.len(), 2);
            assert!(
                history.epochs[1].loss < history.epochs[0].loss,
                "{gather:?}: {history:?}"
            );
            // Every shard was read once per epoch.
            assert_eq!(reads.load(Ordering::Relaxed), 2 * n.div_ceil(per_shard));
            assert!(ctx.memory_in_use() < cap);
        }
    }
}

#[test]
fn cpu_stream_fits_a_memory_cap_that_the_data_set_does_not() {
    let test = "cpu_stream_fits_a_memory_cap_that_the_data_set_does_not";
    a_stream_fits_a_memory_cap_that_the_data_set_does_not(Target::Cpu, test);
}

#[test]
fn opencl_stream_fits_a_memory_cap_that_the_data_set_does_not() {
    let test = "opencl_stream_fits_a_memory_cap_that_the_data_set_does_not";
    a_stream_fits_a_memory_cap_that_the_data_set_does_not(Target::OpenCl, test);
}

#[test]
fn cuda_stream_fits_a_memory_cap_that_the_data_set_does_not() {
    let test = "cuda_stream_fits_a_memory_cap_that_the_data_set_does_not";
    a_stream_fits_a_memory_cap_that_the_data_set_does_not(Target::Cuda, test);
}

/// The same seed gives the same shard and sample order (bit-equal runs); another seed another.
#[test]
fn shard_shuffling_is_seeded() {
    let data = blobs(240, 5);
    let ctx = Context::cpu();
    let run = |seed: u64, gather: StreamGather| {
        let reads = Arc::new(AtomicUsize::new(0));
        let stream = DataStream::new(shards_of(&data, 30, reads.clone()))
            .shuffle_window(3)
            .gather(gather);
        let mut net = classifier(&ctx, 4, [8, 16, 3], Activation::Tanh);
        let h = net
            .train(
                &stream,
                &TrainingConfig {
                    seed,
                    ..config(&ctx, 3, true)
                },
            )
            .unwrap();
        assert_eq!(reads.load(Ordering::Relaxed), 3 * 8);
        h
    };
    let a = run(1, StreamGather::Host);
    assert_same_history(&a, &run(1, StreamGather::Host), 0.0, "same seed");
    // The order is the stream's, wherever its batches are gathered.
    assert_same_history(
        &a,
        &run(1, StreamGather::Device),
        0.0,
        "gathered on the device",
    );
    assert_ne!(
        a.losses(),
        run(2, StreamGather::Host).losses(),
        "another seed, another order"
    );
}

/// Two CPU replicas on a stream (each keeping its share of every batch) train what two
/// replicas train on the data set in memory.
#[test]
fn cpu_replicas_on_a_stream_match_in_memory_replicas() {
    let data = blobs(240, 6);
    let ctx = Context::cpu();
    let cfg = TrainingConfig {
        devices: vec![DeviceId::Cpu; 2],
        batch_size: 32,
        ..config(&ctx, 3, true)
    };
    let memory = classifier(&ctx, 4, [8, 16, 3], Activation::Tanh)
        .train(&data, &cfg)
        .unwrap();
    for gather in GATHERS {
        let reads = Arc::new(AtomicUsize::new(0));
        let stream = DataStream::new(shards_of(&data, 240, reads.clone())).gather(gather);
        let streamed = classifier(&ctx, 4, [8, 16, 3], Activation::Tanh)
            .train(&stream, &cfg)
            .unwrap();
        let what = format!("2 CPU replicas, {gather:?}");
        assert_same_history(&memory, &streamed, 0.0, &what);
        // Each replica reads the whole stream.
        assert_eq!(reads.load(Ordering::Relaxed), 2 * 3);
    }
}

/// A run stopped after epoch 2 and resumed from its training checkpoint ends where the
/// uninterrupted run ends, shard and window orders included.
#[test]
fn a_stream_resumes_from_a_training_checkpoint() {
    for gather in GATHERS {
        resumes_from_a_training_checkpoint(gather);
    }
}

fn resumes_from_a_training_checkpoint(gather: StreamGather) {
    let data = blobs(240, 7);
    let ctx = Context::cpu();
    let dir = temp_dir(&format!("resume-{gather:?}"));
    let path = dir.join("run.safetensors");
    let stream = DataStream::new(shards_of(&data, 40, Arc::default()))
        .shuffle_window(2)
        .gather(gather);
    let cfg = TrainingConfig {
        checkpoint_path: Some(path.clone()),
        ..config(&ctx, 4, true)
    };
    let net = || classifier(&ctx, 4, [8, 16, 3], Activation::Tanh);
    let whole = net().train(&stream, &cfg).unwrap();
    let mut stopped = net();
    stopped
        .train_with(&stream, &cfg, |e| {
            if e.epoch == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    let mut resumed = net();
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = DataStream::new(shards_of(&data, 40, reads.clone()))
        .shuffle_window(2)
        .gather(gather);
    let rest = resumed.resume_training(&path, &counted, &cfg).unwrap();
    assert_same_history(&whole, &rest, 0.0, &format!("resumed stream, {gather:?}"));
    // The resumed run's first window, read before its first epoch began, was that epoch's:
    // each shard is read once per remaining epoch, none again.
    assert_eq!(reads.load(Ordering::Relaxed), 2 * 6);
    // A checkpoint of a stream run does not resume an in-memory run, nor another window.
    let err = net().resume_training(&path, &data, &cfg).unwrap_err();
    assert!(err.to_string().contains("stream"), "{err}");
    let other = stream.clone().shuffle_window(3);
    assert!(net().resume_training(&path, &other, &cfg).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad shards and streams are errors that say what is wrong, never a panic.
#[test]
fn bad_streams_are_clear_errors() {
    let ctx = Context::cpu();
    let data = blobs(60, 9);
    let cfg = config(&ctx, 1, true);
    let net = || classifier(&ctx, 4, [8, 16, 3], Activation::Tanh);
    let dir = temp_dir("bad");

    // A truncated shard file, named.
    let paths = data.write_shards(&dir, 20).unwrap();
    let bytes = std::fs::read(&paths[1]).unwrap();
    std::fs::write(&paths[1], &bytes[..bytes.len() - 3]).unwrap();
    let stream = DataStream::new(ShardFiles::open(&paths).unwrap());
    let err = net().train(&stream, &cfg).unwrap_err().to_string();
    assert!(
        err.contains("shard-00001") && err.contains("truncated"),
        "{err}"
    );

    // Gathering on the device with batches (50) larger than a window (one shard of 20).
    let fine_paths = data.write_shards(dir.join("fine"), 20).unwrap();
    let narrow = DataStream::new(ShardFiles::open(&fine_paths).unwrap())
        .shuffle_window(1)
        .gather(StreamGather::Device);
    let err = net().train(&narrow, &cfg).unwrap_err().to_string();
    assert!(
        err.contains("StreamGather::Device") && err.contains("window"),
        "{err}"
    );

    // Not a shard file; no files.
    std::fs::write(&paths[0], b"pixels,label\n").unwrap();
    let err = ShardFiles::open(&paths).unwrap_err().to_string();
    assert!(err.contains("shard-00000"), "{err}");
    let none: [PathBuf; 0] = [];
    assert!(ShardFiles::open(none).is_err());

    // A generated shard of the wrong width, named.
    let spec = SampleSpec::of(&data);
    let wrong = GeneratedShards::new(spec, vec![20, 20], |i| {
        let w = if i == 1 { 7 } else { 8 };
        Dataset::classification(vec![0.0; 20 * w], w, vec![0; 20], 3)
    });
    let err = net()
        .train(&DataStream::new(wrong), &cfg)
        .unwrap_err()
        .to_string();
    assert!(err.contains("shard 1"), "{err}");

    // A shard with fewer samples than declared.
    let short = GeneratedShards::new(spec, vec![20], |_| {
        Dataset::classification(vec![0.0; 10 * 8], 8, vec![0; 10], 3)
    });
    let err = net()
        .train(&DataStream::new(short), &cfg)
        .unwrap_err()
        .to_string();
    assert!(err.contains("10 samples"), "{err}");

    // An empty source; a source the network does not take; validation_split on a stream.
    let empty = GeneratedShards::new(spec, vec![0, 0], |_| unreachable!());
    let err = net().train(&DataStream::new(empty), &cfg).unwrap_err();
    assert!(err.to_string().contains("no samples"), "{err}");
    let wide = SampleSpec { width: 9, ..spec };
    let other = GeneratedShards::new(wide, vec![5], |_| unreachable!());
    assert!(matches!(
        net().train(&DataStream::new(other), &cfg),
        Err(Error::InvalidData(_))
    ));
    let fine = DataStream::new(shards_of(&data, 20, Arc::default()));
    let split = TrainingConfig {
        validation_split: 0.2,
        ..cfg.clone()
    };
    let err = net().train(&fine, &split).unwrap_err();
    assert!(err.to_string().contains("DataStream::validation"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Replicas on a stream of many windows, in data order, train what the same replicas train
/// on the data set in memory: batches that straddle windows, and the samples past the last
/// full global batch skipped (in a window of their own, or at the end of one).
fn replicas_on_windows_match_in_memory(ctx: &Context, devices: Vec<DeviceId>, what: &str) {
    let data = blobs(250, 12);
    let cfg = TrainingConfig {
        devices,
        batch_size: 30,
        ..config(ctx, 3, false)
    };
    let memory = classifier(ctx, 4, [8, 16, 3], Activation::Tanh)
        .train(&data, &cfg)
        .unwrap();
    // Windows of 35 or 50 samples hold a whole batch: gathered on the device too.
    for (per_shard, window, gather) in [
        (35, 2, StreamGather::Host),
        (35, 2, StreamGather::Device),
        (50, 1, StreamGather::Device),
        (5, 1, StreamGather::Auto),
    ] {
        let stream = DataStream::new(shards_of(&data, per_shard, Arc::default()))
            .shuffle_window(window)
            .prefetch(1)
            .gather(gather);
        let streamed = classifier(ctx, 4, [8, 16, 3], Activation::Tanh)
            .train(&stream, &cfg)
            .unwrap();
        let what = format!("{what}, {per_shard} per shard, window {window}, {gather:?}");
        assert_same_history(&memory, &streamed, 0.0, &what);
    }
}

#[test]
fn cpu_replicas_on_many_windows_match_in_memory_replicas() {
    let ctx = Context::cpu();
    replicas_on_windows_match_in_memory(&ctx, vec![DeviceId::Cpu; 3], "3 CPU replicas");
}

/// The same on two or more CUDA GPUs through NCCL (skips without them, unless
/// `RNN_REQUIRE_BACKENDS` names `nccl`).
#[test]
fn gpu_replicas_on_many_windows_match_in_memory_replicas() {
    let test = "gpu_replicas_on_many_windows_match_in_memory_replicas";
    let Some((manager, gpus)) = crate::data_parallel::nccl_gpus(test) else {
        return;
    };
    let ctx = manager.create_context(gpus[0]).unwrap();
    replicas_on_windows_match_in_memory(&ctx, gpus[..2].to_vec(), "2 CUDA replicas");
}

/// A shard that fails in a later epoch (a source error, a non-finite feature, a label out of
/// range in a shard file) ends training with an error naming it, never a hang or a panic,
/// while the next epoch's batches are being read ahead.
#[test]
fn a_shard_failing_mid_run_is_a_clear_error() {
    let ctx = Context::cpu();
    let data = blobs(120, 13);
    let cfg = config(&ctx, 3, true);
    let net = || classifier(&ctx, 4, [8, 16, 3], Activation::Tanh);
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = shards_of(&data, 30, reads.clone());
    let spec = SampleSpec::of(&data);
    let reads_now = reads.clone();
    let failing = GeneratedShards::new(spec, vec![30; 4], move |i| {
        // Epochs 1 and 2 read every shard; the first read of epoch 3 fails.
        if reads_now.load(Ordering::Relaxed) >= 8 {
            return Err(Error::InvalidData("the disk went away".into()));
        }
        counted.read_shard(i)
    });
    let failing = Arc::new(failing);
    for gather in GATHERS {
        let mut finished = 0;
        reads.store(0, Ordering::Relaxed);
        let stream = DataStream::new(SharedSource(failing.clone()))
            .shuffle_window(2)
            .gather(gather);
        let err = net()
            .train_with(&stream, &cfg, |_| {
                finished += 1;
                ControlFlow::Continue(())
            })
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the disk went away") && err.contains("shard "),
            "{gather:?}: {err}"
        );
        // The failure belongs to epoch 3, though its first batch was read during epoch 2.
        assert_eq!(finished, 2, "{gather:?}");
    }

    // Shard files whose values Dataset::new would reject.
    let dir = temp_dir("bad-values");
    let paths = data.write_shards(&dir, 40).unwrap();
    let header = 48;
    let labels_at = header + 40 * data.width() * 4;
    for (at, bytes, says) in [
        (header + 4 * 5, f32::NAN.to_le_bytes(), "NaN"),
        (labels_at + 4 * 7, 99u32.to_le_bytes(), "label 99"),
    ] {
        let good = std::fs::read(&paths[2]).unwrap();
        let mut bad = good.clone();
        bad[at..at + 4].copy_from_slice(&bytes);
        std::fs::write(&paths[2], &bad).unwrap();
        for gather in GATHERS {
            let stream = DataStream::new(ShardFiles::open(&paths).unwrap())
                .shuffle_window(3)
                .gather(gather);
            let err = net().train(&stream, &cfg).unwrap_err().to_string();
            assert!(
                err.contains("shard-00002") && err.contains(says),
                "{gather:?}: {err}"
            );
        }
        std::fs::write(&paths[2], &good).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A source shared between streams (`DataStream::new` takes its source by value).
struct SharedSource<S>(Arc<S>);

impl<S: DataSource> DataSource for SharedSource<S> {
    fn spec(&self) -> SampleSpec {
        self.0.spec()
    }

    fn shard_lens(&self) -> &[usize] {
        self.0.shard_lens()
    }

    fn read_shard(&self, index: usize) -> rnn::Result<Dataset> {
        self.0.read_shard(index)
    }
}
