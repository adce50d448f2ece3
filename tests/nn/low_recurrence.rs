//! bf16 LSTM and GRU layers on the per-step GEMM path (issue 28, `SeqShape::product_type`):
//! the recurrent products take bf16 operands with f32 sums there. A hidden size of 384 (from
//! which the automatic choice takes that path where the persistent kernels do not run), the
//! path forced on every GPU context so that CUDA's persistent kernels do not take it.
//!
//! Tolerances: the f32 run is the reference. A bf16 run rounds every dense activation and the
//! recurrent operands (unit roundoff 2^-8); its per-epoch training losses stay within 3% of
//! the f32 run's (a product in the wrong type, or a stale operand copy, moves them by far more
//! or stops the loss from falling), and the loss falls by a tenth over four epochs.

use rnn::nn::{CharCorpus, Loss, Network, Precision, Progress, RecurrentCell, RnnOutput};
use rnn::nn::{RecurrentOptions, TrainingConfig};
use rnn::{Activation, Context, RecurrentAlgorithm};

use crate::fixtures::config_for;
use crate::support::{Target, contexts_with};

static TEXT: &str = include_str!("../../examples/data/asyoulik.txt");

const HIDDEN: usize = 384;

/// An embedding, one recurrent layer of `cell` with `HIDDEN` units and a dense head.
fn model(ctx: &Context, cell: RecurrentCell, vocab: usize) -> Network {
    Network::builder(ctx)
        .seed(4)
        .sequence_length(12)
        .embedding(vocab, 16)
        .recurrent(
            cell,
            16,
            HIDDEN,
            RnnOutput::Sequence,
            RecurrentOptions::default(),
        )
        .dense(HIDDEN, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

fn gemm_path_trains_in_bf16(target: Target, test: &str) {
    let corpus = CharCorpus::new(&TEXT[..6_000]).unwrap();
    let data = corpus.id_sequences(12, 12, 128).unwrap();
    let v = corpus.vocab_size();
    let gemm = |o: &mut rnn::ContextOptions| o.recurrent_algorithm = Some(RecurrentAlgorithm::Gemm);
    for ctx in contexts_with(target, test, gemm) {
        for cell in [RecurrentCell::Lstm, RecurrentCell::Gru] {
            let run = |p: Precision| {
                let config = TrainingConfig {
                    precision: p,
                    progress: Progress::Off,
                    shuffle: false,
                    ..config_for(&ctx, 4, 32, 3e-3)
                };
                model(&ctx, cell, v).train(&data, &config).unwrap().losses()
            };
            let (l32, l16) = (run(Precision::F32), run(Precision::Bf16));
            let what = format!("{} {cell:?}", ctx.id());
            assert!(l16[3] < 0.9 * l16[0], "{what}: bf16 losses {l16:?}");
            for (a, b) in l16.iter().zip(&l32) {
                assert!(
                    (a - b).abs() <= 0.03 * b,
                    "{what}: bf16 {l16:?} vs f32 {l32:?}"
                );
            }
        }
    }
}

target_tests!(gemm_path_trains_in_bf16(named):
    cpu_gemm_path_trains_in_bf16 => Cpu,
    opencl_gemm_path_trains_in_bf16 => OpenCl,
    cuda_gemm_path_trains_in_bf16 => Cuda,
    hip_gemm_path_trains_in_bf16 => Hip,
    hip_on_cuda_gemm_path_trains_in_bf16 => HipOnCuda,
);
