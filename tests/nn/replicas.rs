//! Data-parallel training on CPU replicas (`devices: [Cpu, Cpu]`, a host all-reduce): the same
//! loop as one device, so schedules, early stopping with `restore_best`, callbacks, training
//! checkpoints and resume work there too, and two replicas with half the batch each train
//! what one device trains on the whole batch.

use std::path::PathBuf;

use rnn::nn::{LrSchedule, Network, Optimizer, Progress, TrainingConfig};
use rnn::{Activation, Context, DeviceId, Error};

use crate::fixtures::{blobs, classifier};
use crate::loop_checks::{
    assert_same_history, assert_same_parameters, keep_best, non_finite_loss_is_an_error, resume,
    stop_early, temp_dir, warmup_cosine,
};
use crate::support::rel_err;

fn mlp(seed: u64) -> Network {
    classifier(&Context::cpu(), seed, [8, 16, 3], Activation::Tanh)
}

/// Everything `Network::train` offers at once: Adam, warmup-then-cosine, shuffling, clipping,
/// a validation split, early stopping that restores the best epoch, a checkpoint per epoch.
/// `replicas` CPU replicas (1: one device).
fn config(replicas: usize, path: Option<PathBuf>) -> TrainingConfig {
    TrainingConfig {
        use_gpu: false,
        devices: if replicas > 1 {
            vec![DeviceId::Cpu; replicas]
        } else {
            Vec::new()
        },
        epochs: 5,
        // 192 training samples: 6 global batches, 16 rows per replica.
        batch_size: 32,
        learning_rate: 1e-2,
        optimizer: Optimizer::adam(),
        clip_grad_norm: Some(1.0),
        seed: 5,
        validation_split: 0.2,
        progress: Progress::Off,
        schedule: warmup_cosine(10),
        early_stopping: keep_best(),
        checkpoint_path: path,
        ..Default::default()
    }
}

/// Two replicas with 16 rows each compute the mean gradient of the 32-row batch one device
/// computes (no dropout, mean loss, the same shuffled order), so both runs end with the same
/// parameters and history up to f32 rounding — through the schedule, clipping and validation.
#[test]
fn two_cpu_replicas_match_one_device_on_the_whole_batch() {
    let data = blobs(240, 2);
    for (name, optimizer, lr) in [
        ("adam", Optimizer::adam(), 1e-2),
        ("sgd", Optimizer::sgd_momentum(0.9), 5e-2),
    ] {
        let run = |replicas| {
            let mut net = mlp(1);
            let cfg = TrainingConfig {
                optimizer,
                learning_rate: lr,
                ..config(replicas, None)
            };
            let h = net.train(&data, &cfg).unwrap();
            (net, h)
        };
        let (single, h1) = run(1);
        let (replicated, h2) = run(2);
        let (p1, p2) = (
            single.parameters().unwrap(),
            replicated.parameters().unwrap(),
        );
        let err = rel_err(&p2, &p1);
        println!("{name}: parameter rel err {err:.2e}");
        assert!(err < 1e-6, "{name}: parameters differ: rel err {err:e}");
        assert_eq!(h1.epochs.len(), h2.epochs.len());
        for (a, b) in h2.epochs.iter().zip(&h1.epochs) {
            for (x, y, what) in [
                (a.loss, b.loss, "loss"),
                (a.val_loss.unwrap(), b.val_loss.unwrap(), "val_loss"),
                (a.accuracy.unwrap(), b.accuracy.unwrap(), "accuracy"),
                (a.learning_rate, b.learning_rate, "learning rate"),
            ] {
                let d = (x - y).abs() / y.abs().max(1e-6);
                assert!(d < 1e-5, "{name}: epoch {} {what} {x} vs {y}", a.epoch);
            }
        }
        assert_eq!(h1.best_epoch, h2.best_epoch, "{name}");
    }
}

/// Five epochs on two replicas; two epochs stopped by the callback, then `resume_training`
/// from their checkpoint in a network with other initial weights: the same bits.
#[test]
fn cpu_replicas_resume_from_a_checkpoint_like_the_uninterrupted_run() {
    let data = blobs(240, 2);
    let dir = temp_dir("replicas", "resume");
    let run = resume(mlp, &data, &dir, |path| config(2, Some(path)));
    assert!(run.full.best_epoch.is_some());
    assert!(
        run.full.epochs[0].learning_rate != run.full.epochs[4].learning_rate,
        "the schedule moved the learning rate"
    );
    assert_same_history(&run.rest, &run.full, 0.0, "resumed vs uninterrupted");
    assert_same_parameters(&run.resumed, &run.whole, 0.0, "resumed vs uninterrupted");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no improvement ever good enough, early stopping ends the run after `1 + patience`
/// epochs and puts back the parameters of epoch 1: those of a one-epoch run.
#[test]
fn cpu_replicas_stop_early_and_restore_the_best_epoch() {
    let data = blobs(240, 3);
    let base = TrainingConfig {
        schedule: LrSchedule::Constant,
        early_stopping: None,
        ..config(2, None)
    };
    let (stopped, one_epoch) = stop_early(|| mlp(1), &data, &base);
    assert_same_parameters(&stopped, &one_epoch, 0.0, "restored epoch 1 vs one epoch");
}

/// A loss that blows up on replicas is the same error as on one device, from every rank at
/// once (no rank is left waiting in the all-reduce).
#[test]
fn cpu_replicas_report_a_non_finite_loss() {
    let replicas = TrainingConfig {
        use_gpu: false,
        devices: vec![DeviceId::Cpu; 2],
        progress: Progress::Off,
        ..Default::default()
    };
    non_finite_loss_is_an_error(&Context::cpu(), replicas);
}

/// A failure on rank 0 alone (its checkpoint cannot be written) ends every replica instead
/// of leaving the others waiting, and is the error the caller sees.
#[test]
fn a_failing_rank_ends_the_others() {
    let dir = temp_dir("replicas", "failing");
    let cfg = TrainingConfig {
        // A directory where the file should be: the write fails.
        checkpoint_path: Some(dir.clone()),
        ..config(2, None)
    };
    let err = mlp(1).train(&blobs(240, 2), &cfg).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
