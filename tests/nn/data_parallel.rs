//! Data-parallel training: the rendezvous over loopback (two processes, no GPU needed), the
//! clear errors every multi-GPU path gives where it cannot run, and — on a machine with two or
//! more CUDA GPUs and NCCL — N replicas with batch B/N matching one GPU with batch B.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use rnn::dist::{self, CollectiveLibrary, DistEnv, UniqueId, rendezvous};
use rnn::nn::{Dataset, Loss, Network, Optimizer, Rng, TrainingConfig};
use rnn::{Activation, BackendKind, Context, DeviceId, Error, GpuManager};

use crate::support::{rel_err, required};

/// Set in the child process of the two-process rendezvous test.
const CHILD: &str = "RNN_TEST_RENDEZVOUS_CHILD";

/// A port that was free a moment ago and that no other test of this process was given: the
/// rendezvous tests run in parallel, and a port handed back to the system by one could be the
/// next `bind(0)` of another.
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap();
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

fn env(rank: usize, world: usize, port: u16, timeout: f64) -> DistEnv {
    DistEnv {
        rank,
        world_size: world,
        local_rank: rank,
        master_addr: "127.0.0.1".into(),
        port,
        timeout: Duration::from_secs_f64(timeout),
        run_id: String::new(),
    }
}

fn made_id(seed: u64) -> UniqueId {
    let mut rng = Rng::new(seed);
    let mut id = [0u8; dist::UNIQUE_ID_BYTES];
    id.iter_mut().for_each(|b| *b = rng.below(256) as u8);
    UniqueId(id)
}

fn hex(id: &UniqueId) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// Rank 0 in this process, rank 1 in a child process (this test binary again, running only
/// this test with the CHILD variable set), rank 2 on a thread here: all end with rank 0's id.
#[test]
fn rendezvous_hands_rank0_id_to_another_process_over_loopback() {
    if std::env::var_os(CHILD).is_some() {
        // The child: rank 1 of 3, from torchrun's variables.
        let e = DistEnv::from_env().unwrap().expect("the parent set RANK");
        let id = rendezvous::exchange(&e, || panic!("only rank 0 makes the id")).unwrap();
        println!("CHILD-ID {}", hex(&id));
        return;
    }
    let port = free_port();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "data_parallel::rendezvous_hands_rank0_id_to_another_process_over_loopback",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("RANK", "1")
        .env("WORLD_SIZE", "3")
        .env("LOCAL_RANK", "1")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env_remove("TORCHELASTIC_RUN_ID")
        .env_remove("RNN_RENDEZVOUS_PORT")
        .env_remove("RNN_RUN_ID")
        .env("RNN_RENDEZVOUS_TIMEOUT", "60")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let third = std::thread::spawn(move || {
        rendezvous::exchange(&env(2, 3, port, 60.0), || {
            panic!("only rank 0 makes the id")
        })
    });
    let id = made_id(7);
    let got = rendezvous::exchange(&env(0, 3, port, 60.0), || Ok(id)).unwrap();
    assert_eq!(got, id);
    assert_eq!(third.join().unwrap().unwrap(), id);
    let stdout = child.stdout.take().unwrap();
    let lines: Vec<String> = BufReader::new(stdout).lines().map(Result::unwrap).collect();
    let line = lines
        .iter()
        // The harness prints "test <name> ... " on the same line before the test's output.
        .find_map(|l| l.split("CHILD-ID ").nth(1))
        .unwrap_or_else(|| panic!("the child printed no id: {lines:?}"));
    assert!(child.wait().unwrap().success());
    assert_eq!(line.trim(), hex(&id));
}

#[test]
fn rendezvous_without_rank0_times_out_with_a_clear_error() {
    let port = free_port();
    let err = rendezvous::exchange(&env(1, 2, port, 0.5), || unreachable!()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Rendezvous(_)), "{err}");
    assert!(
        text.contains("rank 1") && text.contains(&format!("127.0.0.1:{port}")),
        "{text}"
    );
    assert!(text.contains("0.5 s"), "{text}");
}

#[test]
fn rendezvous_rank0_names_the_ranks_that_never_came() {
    // Another process may take the port between free_port and the listen: then try another.
    let (port, err) = (0..5)
        .map(|_| {
            let port = free_port();
            let err = rendezvous::exchange(&env(0, 3, port, 0.5), || Ok(made_id(1))).unwrap_err();
            (port, err)
        })
        .find(|(_, err)| !err.to_string().contains("cannot listen"))
        .expect("five free ports were all taken before rank 0 could listen");
    let text = err.to_string();
    assert!(matches!(err, Error::Rendezvous(_)), "{err}");
    assert!(
        text.contains("[1, 2]") && text.contains(&port.to_string()),
        "{text}"
    );
}

#[test]
fn rendezvous_refuses_a_rank_with_another_world_size() {
    let port = free_port();
    let server =
        std::thread::spawn(move || rendezvous::exchange(&env(0, 2, port, 3.0), || Ok(made_id(2))));
    let err = rendezvous::exchange(&env(1, 3, port, 3.0), || unreachable!()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("WORLD_SIZE=3") && text.contains("WORLD_SIZE=2"),
        "{text}"
    );
    // Rank 0 kept waiting for a proper rank 1, then gave up.
    let err = server.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("[1]"), "{err}");
}

/// A rank of another run that reaches rank 0's port (two runs given one port) is refused,
/// not handed this run's id; rank 0 goes on to serve its own rank.
#[test]
fn rendezvous_refuses_a_rank_of_another_run() {
    let port = free_port();
    let of_run = |rank: usize, run: &str| DistEnv {
        run_id: run.into(),
        ..env(rank, 2, port, 5.0)
    };
    let ours = of_run(0, "job-a");
    let server = std::thread::spawn(move || rendezvous::exchange(&ours, || Ok(made_id(4))));
    let err = rendezvous::exchange(&of_run(1, "job-b"), || unreachable!()).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, Error::Rendezvous(_)) && text.contains("job-b") && text.contains("job-a"),
        "{text}"
    );
    let id = rendezvous::exchange(&of_run(1, "job-a"), || unreachable!()).unwrap();
    assert_eq!(id, made_id(4));
    assert_eq!(server.join().unwrap().unwrap(), id);
}

#[test]
fn rendezvous_port_in_use_is_a_clear_error() {
    // A port of free_port, so that no other test is given it while this one holds it.
    let (_busy, port) = (0..5)
        .find_map(|_| {
            let port = free_port();
            std::net::TcpListener::bind(("0.0.0.0", port))
                .ok()
                .map(|l| (l, port))
        })
        .expect("five free ports were all taken before the test could hold one");
    let err = rendezvous::exchange(&env(0, 2, port, 0.5), || Ok(made_id(3))).unwrap_err();
    assert!(err.to_string().contains("cannot listen"), "{err}");
}

pub(crate) fn mlp(ctx: &Context, seed: u64) -> Network {
    Network::builder(ctx)
        .seed(seed)
        .dense(24, 48, Activation::Relu)
        .dense(48, 32, Activation::Tanh)
        .dense(32, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

pub(crate) fn blobs(n: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed);
    let labels: Vec<u32> = (0..n).map(|_| rng.below(5) as u32).collect();
    let mut x = Vec::with_capacity(n * 24);
    for &l in &labels {
        for j in 0..24 {
            let signal = if j % 5 == l as usize { 1.0 } else { 0.0 };
            x.push(signal + 0.3 * (rng.below(1000) as f32 / 1000.0 - 0.5));
        }
    }
    Dataset::classification(x, 24, labels, 5).unwrap()
}

#[test]
fn non_cuda_devices_are_a_clear_error() {
    let ctx = Context::cpu();
    for devices in [
        // CPU replicas train (tests/nn/replicas.rs); a CPU beside a GPU does not.
        vec![DeviceId::Cpu, DeviceId::Cuda(0)],
        vec![
            DeviceId::OpenCl {
                platform: 0,
                device: 0,
            },
            DeviceId::OpenCl {
                platform: 0,
                device: 1,
            },
        ],
    ] {
        let config = TrainingConfig {
            devices,
            epochs: 1,
            batch_size: 8,
            ..Default::default()
        };
        let err = mlp(&ctx, 1).train(&blobs(32, 1), &config).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(
                err,
                Error::CollectiveUnavailable { .. } | Error::InvalidArgument(_)
            ),
            "{err}"
        );
        assert!(text.contains("CUDA") || text.contains("twice"), "{text}");
    }
}

#[test]
fn uneven_global_batch_and_use_gpu_false_are_rejected() {
    let ctx = Context::cpu();
    let two = vec![DeviceId::Cuda(0), DeviceId::Cuda(1)];
    let err = mlp(&ctx, 1)
        .train(
            &blobs(32, 1),
            &TrainingConfig {
                devices: two.clone(),
                batch_size: 7,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("divide evenly"), "{err}");
    let err = mlp(&ctx, 1)
        .train(
            &blobs(32, 1),
            &TrainingConfig {
                devices: two,
                use_gpu: false,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("use_gpu is false"), "{err}");
}

/// Without two CUDA GPUs and NCCL (CI), asking for them is an error that says what is
/// missing — never a panic, never a silent single-device run.
#[test]
fn multi_gpu_training_without_gpus_or_nccl_is_a_clear_error() {
    let manager = GpuManager::new().unwrap();
    let cuda = manager
        .devices()
        .iter()
        .filter(|d| d.backend == BackendKind::Cuda)
        .count();
    let nccl = dist::probe(CollectiveLibrary::Nccl);
    if cuda >= 2 && nccl.is_ok() {
        println!("SKIP multi_gpu_training_without_gpus_or_nccl: this machine can train on 2 GPUs");
        return;
    }
    let ctx = Context::cpu();
    let config = TrainingConfig {
        devices: vec![DeviceId::Cuda(0), DeviceId::Cuda(1)],
        epochs: 1,
        batch_size: 8,
        ..Default::default()
    };
    let err = mlp(&ctx, 1).train(&blobs(32, 1), &config).unwrap_err();
    let text = err.to_string();
    match &nccl {
        Err(_) => {
            assert!(matches!(err, Error::CollectiveUnavailable { .. }), "{err}");
            // Built in, the binding names the file it looked for and how to install it;
            // built out, the feature.
            if cfg!(feature = "nccl") {
                assert!(
                    text.contains("libnccl.so.2") && text.contains("nvidia-nccl-cu12"),
                    "{text}"
                );
            } else {
                assert!(text.contains("built without the `nccl` feature"), "{text}");
            }
        }
        Ok(_) => assert!(text.contains("cuda:"), "{text}"),
    }
    // The multi-process entry point says what it needs, too.
    if std::env::var_os("RANK").is_none() && std::env::var_os("WORLD_SIZE").is_none() {
        let err = mlp(&ctx, 1)
            .train_distributed(&blobs(32, 1), &config)
            .unwrap_err();
        assert!(matches!(err, Error::Rendezvous(_)), "{err}");
        assert!(err.to_string().contains("torchrun"), "{err}");
    }
}

/// The manager and its CUDA devices where NCCL loads and there are two or more; `None` (the
/// test skips, saying why) elsewhere, unless `RNN_REQUIRE_BACKENDS` names `nccl`: then it fails.
pub(crate) fn nccl_gpus(test: &str) -> Option<(GpuManager, Vec<DeviceId>)> {
    let must = required().iter().any(|r| r == "nccl");
    let manager = GpuManager::new().unwrap();
    let gpus: Vec<DeviceId> = manager
        .devices()
        .iter()
        .filter(|d| d.backend == BackendKind::Cuda)
        .map(|d| d.id)
        .collect();
    let nccl = dist::probe(CollectiveLibrary::Nccl);
    let why = match (&nccl, gpus.len()) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(_), n) if n < 2 => Some(format!("{n} CUDA device(s); 2 needed")),
        _ => None,
    };
    if let Some(why) = why {
        assert!(!must, "nccl is required (RNN_REQUIRE_BACKENDS) but: {why}");
        println!("SKIP {test}: {why}");
        return None;
    }
    println!("NCCL {:?}", nccl.unwrap());
    Some((manager, gpus))
}

/// N replicas with batch B/N each end with the parameters of one GPU with batch B, within f32
/// reduction-order tolerance, after several steps (SGD with momentum, and Adam). Runs where
/// `RNN_REQUIRE_BACKENDS` names `nccl`; elsewhere it needs two CUDA GPUs and NCCL or skips.
#[test]
fn gpu_replicas_match_one_gpu_with_the_whole_batch() {
    let Some((manager, gpus)) = nccl_gpus("gpu_replicas_match_one_gpu_with_the_whole_batch") else {
        return;
    };
    let data = blobs(8 * 96, 5);
    let worlds = if gpus.len() >= 4 { vec![2, 4] } else { vec![2] };
    for world in worlds {
        // Adam's first steps move every parameter by about lr * sign(gradient), so a gradient
        // whose sign is decided by rounding (a reduction of near-cancelling terms, summed in
        // another order on N devices) moves by 2 * lr: its tolerance allows a few of those.
        for (name, optimizer, lr, tolerance) in [
            ("sgd", Optimizer::sgd_momentum(0.9), 0.02, 2e-4),
            ("adam", Optimizer::adam(), 1e-3, 2e-3),
        ] {
            let config = TrainingConfig {
                epochs: 3,
                batch_size: 96,
                learning_rate: lr,
                optimizer,
                seed: 11,
                log_every: 0,
                clip_grad_norm: Some(5.0),
                validation_split: 0.125,
                ..Default::default()
            };
            let one = manager.create_context(gpus[0]).unwrap();
            let mut single = mlp(&one, 3);
            let h1 = single
                .train(
                    &data,
                    &TrainingConfig {
                        device: Some(gpus[0]),
                        ..config.clone()
                    },
                )
                .unwrap();
            for overlap in [false, true] {
                let mut replicated = mlp(&one, 3);
                let hn = replicated
                    .train(
                        &data,
                        &TrainingConfig {
                            devices: gpus[..world].to_vec(),
                            overlap_allreduce: overlap,
                            ..config.clone()
                        },
                    )
                    .unwrap();
                assert_eq!(replicated.context().id(), gpus[0]);
                let p1 = single.parameters().unwrap();
                let pn = replicated.parameters().unwrap();
                let err = rel_err(&pn, &p1);
                let name = format!("{name} x{world} overlap={overlap}");
                println!("{name}: parameter rel err {err:.2e}");
                assert!(err < tolerance, "{name}: parameters differ: rel err {err}");
                for (a, b) in hn.epochs.iter().zip(&h1.epochs) {
                    let d = (a.loss - b.loss).abs() / b.loss.abs().max(1e-6);
                    assert!(
                        d < 1e-3,
                        "{name}: epoch {} loss {} vs {}",
                        a.epoch,
                        a.loss,
                        b.loss
                    );
                    let (va, vb) = (a.val_loss.unwrap(), b.val_loss.unwrap());
                    let dv = (va - vb).abs() / vb.abs().max(1e-6);
                    assert!(dv < 1e-3, "{name}: val loss {va} vs {vb}");
                }
            }
        }
    }
}

/// Where NCCL loads (with or without a GPU), rank 0's side of the id exchange works: two ids
/// differ, and each is not all zeros.
#[test]
fn nccl_makes_unique_ids_without_a_gpu() {
    match dist::probe(CollectiveLibrary::Nccl) {
        Err(e) => {
            assert!(
                !required().iter().any(|r| r == "nccl"),
                "nccl is required but: {e}"
            );
            println!("SKIP nccl_makes_unique_ids_without_a_gpu: {e}");
        }
        Ok(info) => {
            println!("{info:?}");
            let a = UniqueId::new(CollectiveLibrary::Nccl).unwrap();
            let b = UniqueId::new(CollectiveLibrary::Nccl).unwrap();
            assert_ne!(a, b);
            assert!(a.0.iter().any(|&x| x != 0));
        }
    }
}

#[test]
fn rnn_device_lists_select_data_parallel_devices() {
    let config = TrainingConfig {
        batch_size: 8,
        ..Default::default()
    };
    let two = vec![DeviceId::Cuda(0), DeviceId::Cuda(1)];
    assert_eq!(
        config
            .data_parallel_devices(Some(" cuda:0, cuda:1 "))
            .unwrap(),
        two
    );
    // CPU replicas: the one device that may be listed more than once.
    assert_eq!(
        config.data_parallel_devices(Some("cpu,cpu")).unwrap(),
        vec![DeviceId::Cpu, DeviceId::Cpu]
    );
    // One id, or an explicit `device`, or `use_gpu: false`: single-device training.
    let single = |c: &TrainingConfig, env| c.data_parallel_devices(Some(env)).unwrap().is_empty();
    assert!(single(&config, "cuda:1"));
    let pinned = TrainingConfig {
        device: Some(DeviceId::Cuda(1)),
        ..config.clone()
    };
    assert!(single(&pinned, "cuda:0,cuda:1"));
    // `devices` wins over the environment.
    let listed = TrainingConfig {
        devices: vec![DeviceId::Cuda(2), DeviceId::Cuda(3)],
        ..config.clone()
    };
    assert_eq!(
        listed.data_parallel_devices(Some("cuda:0,cuda:1")).unwrap(),
        vec![DeviceId::Cuda(2), DeviceId::Cuda(3)]
    );
    for (bad, needle) in [
        ("cuda:0,cuda:0", "twice"),
        ("cuda:0,gpu:1", "RNN_DEVICE"),
        ("cuda:0,cuda:1,cuda:2", "divide evenly"),
    ] {
        let err = config.data_parallel_devices(Some(bad)).unwrap_err();
        assert!(err.to_string().contains(needle), "{bad}: {err}");
    }
}

/// Only backends with a native stream hand one to a collective library; the others say so.
#[test]
fn cpu_and_opencl_have_no_native_queue() {
    let mut contexts = vec![Context::cpu()];
    contexts.extend(crate::support::contexts(
        crate::support::Target::OpenCl,
        "cpu_and_opencl_have_no_native_queue",
    ));
    for ctx in contexts {
        let buf = ctx.alloc(4).unwrap();
        let err = ctx.native_queue(buf.view()).unwrap_err();
        assert!(
            matches!(err, Error::Unsupported { .. }),
            "{}: {err}",
            ctx.id()
        );
    }
}
