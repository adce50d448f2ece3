//! The one training loop on CUDA replicas through NCCL: a schedule, early stopping that
//! restores the best epoch, a training checkpoint per epoch and a resume — what
//! `replicas.rs` checks on CPU replicas, on the GPU path. Runs where `RNN_REQUIRE_BACKENDS`
//! names `nccl` (scripts/gpu-machine.sh multi-gpu); elsewhere it needs two CUDA GPUs and NCCL
//! or skips.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use rnn::nn::{
    EarlyStopping, LrSchedule, Network, Optimizer, Progress, StopReason, TrainingConfig,
    TrainingHistory,
};
use rnn::{Context, DeviceId};

use crate::data_parallel::{blobs, mlp, nccl_gpus};
use crate::support::rel_err;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rnn-nccl-loop-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

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
        schedule: LrSchedule::WarmupCosine {
            warmup_steps: 6,
            min_lr: 1e-4,
        },
        early_stopping: Some(EarlyStopping {
            patience: 100,
            min_delta: 0.0,
            restore_best: true,
        }),
        checkpoint_path: checkpoint.map(Path::to_path_buf),
        ..Default::default()
    }
}

/// The two runs took the same path: every epoch's loss, validation loss and learning rate
/// within `tol` relative (one process, the same GPUs and NCCL rings: in practice the same bits).
fn assert_same_history(a: &TrainingHistory, b: &TrainingHistory, tol: f32, what: &str) {
    assert_eq!(a.epochs.len(), b.epochs.len(), "{what}");
    let close = |x: f32, y: f32| (x - y).abs() <= tol * y.abs().max(1e-6);
    for (x, y) in a.epochs.iter().zip(&b.epochs) {
        assert_eq!(x.epoch, y.epoch, "{what}");
        assert!(
            close(x.loss, y.loss),
            "{what}: epoch {} loss {} vs {}",
            x.epoch,
            x.loss,
            y.loss
        );
        let (vx, vy) = (x.val_loss.unwrap(), y.val_loss.unwrap());
        assert!(
            close(vx, vy),
            "{what}: epoch {} val loss {vx} vs {vy}",
            x.epoch
        );
        assert_eq!(
            x.learning_rate.to_bits(),
            y.learning_rate.to_bits(),
            "{what}"
        );
    }
    assert_eq!(a.best_epoch, b.best_epoch, "{what}");
}

fn assert_same_parameters(a: &Network, b: &Network, tol: f64, what: &str) {
    let (p, q) = (a.parameters().unwrap(), b.parameters().unwrap());
    let err = rel_err(&p, &q);
    let same_bits = p.iter().zip(&q).all(|(x, y)| x.to_bits() == y.to_bits());
    println!("{what}: parameter rel err {err:.2e}, same bits: {same_bits}");
    assert!(err <= tol, "{what}: parameters differ (rel err {err:e})");
}

/// Five epochs on two GPUs; two epochs stopped by the callback, then `resume_training` from
/// their checkpoint in a network with other initial weights: the same history and parameters.
#[test]
fn gpu_replicas_resume_from_a_checkpoint_like_the_uninterrupted_run() {
    let test = "gpu_replicas_resume_from_a_checkpoint_like_the_uninterrupted_run";
    let Some((manager, gpus)) = nccl_gpus(test) else {
        return;
    };
    let devices = &gpus[..2];
    let ctx: Context = manager.create_context(devices[0]).unwrap();
    let data = blobs(8 * 96, 5);
    let dir = temp_dir("resume");

    let mut whole = mlp(&ctx, 1);
    let full = whole
        .train(
            &data,
            &config(devices, Some(&dir.join("whole.safetensors"))),
        )
        .unwrap();
    assert_eq!(full.epochs.len(), 5);
    assert!(full.best_epoch.is_some());
    assert_ne!(
        full.epochs[0].learning_rate, full.epochs[4].learning_rate,
        "the schedule moved the learning rate"
    );

    let cut = dir.join("cut.safetensors");
    let mut calls = 0;
    let part = mlp(&ctx, 1)
        .train_with(&data, &config(devices, Some(&cut)), |e| {
            calls += 1;
            if e.epoch == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(calls, 2, "the callback runs once per epoch, on rank 0 only");
    assert_eq!(part.stopped, Some(StopReason::Callback));

    let mut resumed = mlp(&ctx, 99);
    let rest = resumed
        .resume_training(&cut, &data, &config(devices, Some(&cut)))
        .unwrap();
    assert_same_history(&rest, &full, 1e-6, "resumed vs uninterrupted");
    assert_same_parameters(&resumed, &whole, 1e-6, "resumed vs uninterrupted");
    // Rank 0 wrote the trained network's weights.
    let mut loaded = mlp(&ctx, 7);
    loaded.load(dir.join("whole.safetensors")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no improvement ever good enough, early stopping ends the run after `1 + patience`
/// epochs and puts back the parameters of epoch 1: those of a one-epoch run on the same GPUs.
#[test]
fn gpu_replicas_stop_early_and_restore_the_best_epoch() {
    let test = "gpu_replicas_stop_early_and_restore_the_best_epoch";
    let Some((manager, gpus)) = nccl_gpus(test) else {
        return;
    };
    let devices = &gpus[..2];
    let ctx = manager.create_context(devices[0]).unwrap();
    let data = blobs(8 * 96, 6);
    let base = TrainingConfig {
        schedule: LrSchedule::Constant,
        early_stopping: None,
        ..config(devices, None)
    };
    let mut one_epoch = mlp(&ctx, 1);
    one_epoch
        .train(
            &data,
            &TrainingConfig {
                epochs: 1,
                ..base.clone()
            },
        )
        .unwrap();
    let mut stopped = mlp(&ctx, 1);
    let h = stopped
        .train(
            &data,
            &TrainingConfig {
                epochs: 10,
                early_stopping: Some(EarlyStopping {
                    patience: 2,
                    min_delta: 1e9,
                    restore_best: true,
                }),
                ..base
            },
        )
        .unwrap();
    assert_eq!(h.stopped, Some(StopReason::EarlyStopping));
    assert_eq!(h.epochs.len(), 3);
    assert_eq!(h.best_epoch, Some(1));
    assert_same_parameters(&stopped, &one_epoch, 1e-6, "restored epoch 1 vs one epoch");
}
