//! Training UX: plain progress lines off a terminal, schedules, early stopping, callbacks, the
//! non-finite-loss error, training checkpoints and resume, history files and curves.

use std::path::PathBuf;

use rnn::nn::{EarlyStopping, LrSchedule, Network, Optimizer, Progress, TrainingConfig};
use rnn::{Activation, Context, Error};

use crate::fixtures::{blobs, classifier, config_for};
use crate::loop_checks::{
    self, assert_same_history, assert_same_parameters, keep_best, resume, stop_early, temp_dir,
    warmup_cosine,
};
use crate::support::{Target, contexts, rel_err};

fn mlp(ctx: &Context, seed: u64) -> Network {
    classifier(ctx, seed, [8, 16, 3], Activation::Tanh)
}

fn config(ctx: &Context, epochs: usize) -> TrainingConfig {
    TrainingConfig {
        seed: 5,
        progress: Progress::Off,
        ..config_for(ctx, epochs, 16, 1e-2)
    }
}

const CHILD: &str = "RNN_UX_PROGRESS_CHILD";

/// Run as a child with stderr piped (not a terminal): `Progress::Auto` must print exactly one
/// plain line per epoch, with no bar, carriage return or escape sequence.
#[test]
fn plain_progress_lines_when_stderr_is_not_a_tty() {
    if std::env::var_os(CHILD).is_some() {
        let ctx = Context::cpu();
        let mut net = mlp(&ctx, 1);
        let cfg = TrainingConfig {
            progress: Progress::Auto,
            validation_split: 0.2,
            ..config(&ctx, 3)
        };
        net.train(&blobs(300, 1), &cfg).unwrap();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "ux::plain_progress_lines_when_stderr_is_not_a_tty",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "terminal control characters off a terminal: {stderr:?}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with(&format!("epoch {}/3: loss ", i + 1)),
            "{line}"
        );
        for part in [" acc ", " val_loss ", " val_acc ", "samples/s"] {
            assert!(line.contains(part), "{line} lacks {part}");
        }
    }
}

/// The run that `resume` must reproduce: Adam, warmup-then-cosine, shuffling, a validation
/// split and early stopping state, with a checkpoint after every epoch.
fn resumable(ctx: &Context, path: PathBuf) -> TrainingConfig {
    TrainingConfig {
        validation_split: 0.2,
        schedule: warmup_cosine(10),
        early_stopping: keep_best(),
        checkpoint_path: Some(path),
        ..config(ctx, 5)
    }
}

/// Train 5 epochs; train 2 and stop; resume for the other 3 in a network with other initial
/// weights: the losses, learning rates and parameters are the same bits on the same backend.
fn resume_matches_the_uninterrupted_run_bit_for_bit(t: Target) {
    for ctx in contexts(t, "resume_matches_the_uninterrupted_run_bit_for_bit") {
        resume_on(&ctx, &format!("resume-{}", t.name()));
    }
}

target_tests!(resume_matches_the_uninterrupted_run_bit_for_bit:
    cpu_resume_matches_the_uninterrupted_run_bit_for_bit => Cpu,
    opencl_resume_matches_the_uninterrupted_run_bit_for_bit => OpenCl,
    cuda_resume_matches_the_uninterrupted_run_bit_for_bit => Cuda,
);

fn resume_on(ctx: &Context, name: &str) {
    let data = blobs(240, 2);
    let dir = temp_dir("ux", name);
    let run = resume(
        |seed| mlp(ctx, seed),
        &data,
        &dir,
        |path| resumable(ctx, path),
    );
    let what = format!("{}: resumed vs uninterrupted", ctx.id());
    assert_same_history(&run.rest, &run.full, 0.0, &what);
    assert_same_parameters(&run.resumed, &run.whole, 0.0, &what);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_refuses_another_architecture_or_a_weights_file() {
    let ctx = Context::cpu();
    let data = blobs(120, 3);
    let dir = temp_dir("ux", "mismatch");
    let path = dir.join("run.safetensors");
    let mut net = mlp(&ctx, 1);
    let cfg = TrainingConfig {
        checkpoint_path: Some(path.clone()),
        ..config(&ctx, 1)
    };
    net.train(&data, &cfg).unwrap();

    let mut wider = classifier(&ctx, 1, [8, 32, 3], Activation::Tanh);
    match wider.resume_training(&path, &data, &cfg) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("different architecture"), "{m}"),
        r => panic!("another architecture resumed: {r:?}"),
    }
    let mut relu = classifier(&ctx, 1, [8, 16, 3], Activation::Relu);
    assert!(matches!(
        relu.resume_training(&path, &data, &cfg),
        Err(Error::InvalidArgument(_))
    ));
    let weights = dir.join("weights.safetensors");
    net.save(&weights).unwrap();
    match net.resume_training(&weights, &data, &cfg) {
        Err(Error::Format { reason, .. }) => {
            assert!(reason.contains("not a training checkpoint"), "{reason}")
        }
        r => panic!("a weights file resumed: {r:?}"),
    }
    let other_opt = TrainingConfig {
        optimizer: Optimizer::sgd(),
        ..cfg.clone()
    };
    assert!(matches!(
        net.resume_training(&path, &data, &other_opt),
        Err(Error::InvalidArgument(m)) if m.contains("optimizer")
    ));
    // No temp file is left next to the checkpoint.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A learning rate of 1e12 overflows the loss: an error naming the epoch and the step.
fn non_finite_loss_is_an_error(t: Target) {
    for ctx in contexts(t, "non_finite_loss_is_an_error") {
        loop_checks::non_finite_loss_is_an_error(&ctx, config(&ctx, 3));
    }
}

target_tests!(non_finite_loss_is_an_error:
    cpu_non_finite_loss_is_an_error => Cpu,
    opencl_non_finite_loss_is_an_error => OpenCl,
    cuda_non_finite_loss_is_an_error => Cuda,
);

/// A step schedule halves the rate every epoch; with recorded step graphs the replays must
/// follow it exactly as op-by-op steps do.
fn schedule_applies_between_steps(t: Target) {
    for ctx in contexts(t, "schedule_applies_between_steps") {
        let data = blobs(200, 6);
        let run = |graphs: bool, schedule: LrSchedule| {
            let mut net = mlp(&ctx, 3);
            let cfg = TrainingConfig {
                graphs,
                schedule,
                ..config(&ctx, 3)
            };
            let h = net.train(&data, &cfg).unwrap();
            (net.parameters().unwrap(), h)
        };
        let step = LrSchedule::Step {
            every_epochs: 1,
            gamma: 0.5,
        };
        let (eager, h) = run(false, step);
        let rates: Vec<f32> = h.epochs.iter().map(|e| e.learning_rate).collect();
        assert_eq!(rates, vec![1e-2, 5e-3, 2.5e-3], "{}", ctx.id());
        let (graphed, _) = run(true, step);
        let err = rel_err(&graphed, &eager);
        assert!(err <= 1e-5, "{}: graphs vs op by op {err:e}", ctx.id());
        let (constant, _) = run(true, LrSchedule::Constant);
        let apart = rel_err(&constant, &eager);
        assert!(
            apart > 1e-3,
            "{}: the schedule changed nothing ({apart:e})",
            ctx.id()
        );
    }
}

target_tests!(schedule_applies_between_steps:
    cpu_schedule_applies_between_steps => Cpu,
    opencl_schedule_applies_between_steps => OpenCl,
    cuda_schedule_applies_between_steps => Cuda,
);

#[test]
fn early_stopping_stops_and_restores_the_best_epoch() {
    let ctx = Context::cpu();
    let data = blobs(200, 8);
    let base = TrainingConfig {
        validation_split: 0.25,
        ..config(&ctx, 10)
    };
    // No epoch can beat the first by 1e9: training stops after `patience` more, and the
    // parameters are those after epoch 1.
    let (net, one) = stop_early(|| mlp(&ctx, 4), &data, &base);
    assert_same_parameters(&net, &one, 0.0, "restored epoch 1 vs one epoch");
    // Early stopping without a validation split is a configuration error.
    let bad = TrainingConfig {
        validation_split: 0.0,
        early_stopping: Some(EarlyStopping::default()),
        ..base
    };
    assert!(matches!(
        mlp(&ctx, 4).train(&data, &bad),
        Err(Error::InvalidArgument(m)) if m.contains("validation_split")
    ));
}

#[test]
fn history_saves_csv_json_and_draws_png_and_svg_curves() {
    let ctx = Context::cpu();
    let mut net = mlp(&ctx, 1);
    let h = net
        .train(
            &blobs(300, 9),
            &TrainingConfig {
                validation_split: 0.2,
                ..config(&ctx, 4)
            },
        )
        .unwrap();
    // The CPU backend reports this process's resident memory, and no utilization.
    assert!(
        h.epochs
            .iter()
            .all(|e| e.peak_memory_bytes.unwrap_or(0) > 0)
    );
    assert!(h.epochs.iter().all(|e| e.utilization.is_none()));
    let dir = temp_dir("ux", "curves");
    h.save_csv(dir.join("h.csv")).unwrap();
    h.save_json(dir.join("h.json")).unwrap();
    let csv = std::fs::read_to_string(dir.join("h.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("h.json")).unwrap()).unwrap();
    assert_eq!(json["epochs"].as_array().unwrap().len(), 4);
    assert_eq!(
        json["epochs"][3]["loss"].as_f64().unwrap() as f32,
        h.epochs[3].loss
    );

    #[cfg(feature = "plot")]
    {
        let png_path = dir.join("curves.png");
        h.plot("blobs MLP", &png_path).unwrap();
        check_png(&png_path, true);
        let svg = dir.join("curves.svg");
        h.plot("blobs MLP", &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("accuracy") && text.contains("epoch"));
        assert!(matches!(
            h.plot("x", dir.join("curves.gif")),
            Err(Error::InvalidArgument(_))
        ));
    }
    if std::env::var_os("RNN_UX_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Decodes a curves PNG: the expected size, mostly white, the blue (train) and, with a
/// validation split, red (validation) curves drawn, plus dark text and axes.
#[cfg(feature = "plot")]
pub fn check_png(path: &std::path::Path, with_validation: bool) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1200, 480), "{}", path.display());
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks_exact(3).collect();
    let count = |f: &dyn Fn(&[u8]) -> bool| px.iter().filter(|p| f(p)).count();
    let white = count(&|p| p == [255, 255, 255]);
    let blue = count(&|p| p[2] > 200 && p[0] < 80 && p[1] < 80);
    let red = count(&|p| p[0] > 200 && p[1] < 80 && p[2] < 80);
    let dark = count(&|p| p.iter().all(|&c| c < 80));
    let n = px.len();
    assert!(white > n / 2, "{}: {white} of {n} white", path.display());
    assert!(
        blue > 200 && (red > 200 || !with_validation),
        "{}: blue {blue}, red {red}",
        path.display()
    );
    assert!(
        dark > 500,
        "{}: {dark} dark pixels (text, axes)",
        path.display()
    );
}

/// `real_gpu_neural_network --plot DIR` writes a PNG of curves per model (decoded and checked)
/// and the histories. `cargo test` builds the examples; a filtered run (`--test nn`) may not,
/// and then this skips unless `RNN_REQUIRE_BACKENDS` is set (as in CI).
#[cfg(feature = "plot")]
#[test]
fn example_plot_writes_png_curves() {
    let exe = std::env::current_exe().unwrap();
    let name = format!("real_gpu_neural_network{}", std::env::consts::EXE_SUFFIX);
    // target/<profile>/deps/nn-* beside target/<profile>/examples/, or the GPU bundle's bin/
    // where the test binaries and the examples lie side by side.
    let beside = exe.parent().unwrap().join(&name);
    let example = if beside.exists() {
        beside
    } else {
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap();
        profile_dir.join("examples").join(&name)
    };
    if !example.exists() {
        let why = format!("{} is not built", example.display());
        assert!(crate::support::required().is_empty(), "{why}");
        println!("SKIP example_plot_writes_png_curves: {why}");
        return;
    }
    let dir = temp_dir("ux", "example");
    let out = std::process::Command::new(&example)
        .args(["--cpu", "--epochs", "2", "--rnn-epochs", "2", "--plot"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("epoch 2/2: loss"), "{stderr}");
    check_png(&dir.join("mlp.png"), true);
    check_png(&dir.join("rnn.png"), false);
    for f in ["mlp.csv", "mlp.json", "rnn.csv", "rnn.json"] {
        assert!(std::fs::metadata(dir.join(f)).unwrap().len() > 0, "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without NVML or ROCm SMI (as in CI) there are no figures and the libraries say why; with
/// NVML and a CUDA device (the GPU machine), every CUDA device has live figures whose total
/// memory is the device's, and training records peak memory and utilization per epoch.
#[test]
fn monitor_reports_what_the_libraries_report() {
    let lines = rnn::monitor::libraries();
    assert!(
        lines[0].starts_with("NVML: ") && lines[1].starts_with("ROCm SMI: "),
        "{lines:?}"
    );
    let cpu = rnn::Context::cpu();
    assert!(rnn::monitor::figures(cpu.info()).is_none());
    // CI installs Debian's ROCm SMI 5.2: it must load with every symbol the monitor uses
    // (without an AMD GPU, rsmi_init then fails and there are no figures).
    if crate::support::required().iter().any(|b| b == "hiprtc") {
        assert!(
            lines[1].contains("loaded") || lines[1].contains("every symbol resolved"),
            "{lines:?}"
        );
    }
    let nvml = lines[0].starts_with("NVML: loaded");
    for ctx in contexts(Target::Cuda, "monitor_reports_what_the_libraries_report") {
        let Some(f) = rnn::monitor::figures(ctx.info()) else {
            assert!(!nvml, "{}: NVML is loaded but has no figures", ctx.id());
            continue;
        };
        println!("{}: {f}", ctx.id());
        let total = f.memory_total.unwrap();
        let reported = ctx.info().memory;
        assert!(
            total.abs_diff(reported) <= reported / 20,
            "{}: NVML total {total} vs CUDA {reported}",
            ctx.id()
        );
        assert!(f.utilization_percent.is_some() && f.temperature_c.is_some());
        let mut net = mlp(&ctx, 1);
        let h = net.train(&blobs(3000, 1), &config(&ctx, 2)).unwrap();
        for e in &h.epochs {
            assert!(e.peak_memory_bytes.unwrap_or(0) > 0, "{e:?}");
            assert!(e.utilization.is_some(), "{e:?}");
        }
        println!("{}: {:?}", ctx.id(), h.epochs);
    }
}
