//! The one training loop on CUDA replicas through NCCL: a schedule, early stopping that
//! restores the best epoch, a training checkpoint per epoch and a resume — what
//! `replicas.rs` checks on CPU replicas, on the GPU path. Runs where `RNN_REQUIRE_BACKENDS`
//! names `nccl` (scripts/gpu-machine.sh multi-gpu); elsewhere it needs two CUDA GPUs and NCCL
//! or skips.

use std::path::Path;

use rnn::nn::{LrSchedule, Optimizer, Progress, TrainingConfig};
use rnn::{Context, DeviceId, GpuManager};

use crate::data_parallel::{blobs, mlp, nccl_gpus};
use crate::loop_checks::{
    assert_same_history, assert_same_parameters, keep_best, resume, stop_early, temp_dir,
    warmup_cosine,
};

/// Adam, warmup-then-cosine, shuffling, clipping, a validation split, early stopping that
/// restores the best epoch and a checkpoint per epoch, on `devices`.
fn config(devices: &[DeviceId], checkpoint: Option<&Path>) -> TrainingConfig {
    TrainingConfig {
        devices: devices.to_vec(),
        epochs: 5,
        batch_size: 96,
        learning_rate: 3e-3,
        optimizer: Optimizer::adam(),
        clip_grad_norm: Some(1.0),
        seed: 5,
        validation_split: 0.125,
        progress: Progress::Off,
        log_every: 0,
        schedule: warmup_cosine(6),
        early_stopping: keep_best(),
        checkpoint_path: checkpoint.map(Path::to_path_buf),
        ..Default::default()
    }
}

/// [`nccl_gpus`]'s manager, its first two GPUs and a context on the first; `None` where the
/// test skips. The manager is returned so that it outlives the test's work, as it does there.
fn two_gpus(test: &str) -> Option<(GpuManager, Vec<DeviceId>, Context)> {
    let (manager, mut gpus) = nccl_gpus(test)?;
    gpus.truncate(2);
    let ctx = manager.create_context(gpus[0]).unwrap();
    Some((manager, gpus, ctx))
}

/// Five epochs on two GPUs; two epochs stopped by the callback, then `resume_training` from
/// their checkpoint in a network with other initial weights: the same history and parameters.
#[test]
fn gpu_replicas_resume_from_a_checkpoint_like_the_uninterrupted_run() {
    let test = "gpu_replicas_resume_from_a_checkpoint_like_the_uninterrupted_run";
    let Some((_manager, devices, ctx)) = two_gpus(test) else {
        return;
    };
    let dir = temp_dir("nccl-loop", "resume");
    let run = resume(
        |seed| mlp(&ctx, seed),
        &blobs(8 * 96, 5),
        &dir,
        |path| config(&devices, Some(&path)),
    );
    assert!(run.full.best_epoch.is_some());
    assert_ne!(
        run.full.epochs[0].learning_rate, run.full.epochs[4].learning_rate,
        "the schedule moved the learning rate"
    );
    assert_same_history(&run.rest, &run.full, 1e-6, "resumed vs uninterrupted");
    assert_same_parameters(&run.resumed, &run.whole, 1e-6, "resumed vs uninterrupted");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no improvement ever good enough, early stopping ends the run after `1 + patience`
/// epochs and puts back the parameters of epoch 1: those of a one-epoch run on the same GPUs.
#[test]
fn gpu_replicas_stop_early_and_restore_the_best_epoch() {
    let test = "gpu_replicas_stop_early_and_restore_the_best_epoch";
    let Some((_manager, devices, ctx)) = two_gpus(test) else {
        return;
    };
    let base = TrainingConfig {
        schedule: LrSchedule::Constant,
        early_stopping: None,
        ..config(&devices, None)
    };
    let (stopped, one_epoch) = stop_early(|| mlp(&ctx, 1), &blobs(8 * 96, 6), &base);
    assert_same_parameters(&stopped, &one_epoch, 1e-6, "restored epoch 1 vs one epoch");
}
