//! Copies on the side stream (`Execution::upload_block_on_side`) in the pattern a data stream
//! uses: batch `k + 1` is queued into the other slot before step `k`'s work, so the copy must
//! wait for the step that last wrote its slot and step `k + 1` for the copy. Every step adds
//! its slot into an accumulator and then overwrites the slot with a poison value: a copy that
//! ran early is overwritten by the poison, one that ran late leaves the poison to be added, and
//! either changes the sum. The slots are large, so that on a real device the copies take long
//! enough for a missing wait to show.

use rnn::ops::HostBlock;
use rnn::{Context, Error};

use super::contexts;
use crate::support::Target;

const STEPS: usize = 24;
const LEN: usize = 1 << 22;
const POISON: f32 = -1.0e4;
const PASSES: usize = 8;

/// Fills `block` with step `k`'s value (`k + 1`), waiting for its last copy first.
fn write_step(block: &mut dyn HostBlock, k: usize) {
    let bytes = block.bytes_mut().unwrap();
    let value = ((k + 1) as f32).to_ne_bytes();
    for chunk in bytes.chunks_exact_mut(4) {
        chunk.copy_from_slice(&value);
    }
}

fn run_steps(ctx: &Context) {
    let (ops, exec) = (ctx.ops(), ctx.execution());
    let slots = [ops.alloc(LEN).unwrap(), ops.alloc(LEN).unwrap()];
    let acc = ops.alloc(LEN).unwrap();
    ops.fill(acc.view(), 0.0).unwrap();
    // One block of each kind: write-combined on CUDA, and cached for a writer that reads it.
    let mut blocks = [
        exec.host_block(LEN * 4, false).unwrap(),
        exec.host_block(LEN * 4, true).unwrap(),
    ];
    let upload = |blocks: &mut [Box<dyn HostBlock>; 2], k: usize| {
        write_step(blocks[k % 2].as_mut(), k);
        exec.order_streams(true).unwrap();
        exec.upload_block_on_side(slots[k % 2].view(), blocks[k % 2].as_mut(), 0..LEN * 4)
            .unwrap();
    };
    upload(&mut blocks, 0);
    for k in 0..STEPS {
        exec.order_streams(false).unwrap();
        if k + 1 < STEPS {
            upload(&mut blocks, k + 1);
        }
        let slot = slots[k % 2].view();
        // Several passes (of exact eighths) keep the step busy while the host queues the next
        // copy, so that a copy not held back by the marker overtakes the poison.
        for _ in 0..PASSES {
            ops.axpy(1.0 / PASSES as f32, slot, acc.view()).unwrap();
        }
        ops.fill(slot, POISON).unwrap();
    }
    let mut got = vec![0.0; LEN];
    ops.download(acc.view(), &mut got).unwrap();
    let want = (STEPS * (STEPS + 1) / 2) as f32;
    let bad = got.iter().filter(|&&x| x != want).count();
    assert_eq!(
        bad,
        0,
        "{}: {bad} of {LEN} sums differ from {want}",
        ctx.id()
    );
}

pub fn side_copies(t: Target) {
    for ctx in contexts(t, "side_copies") {
        let exec = ctx.execution();
        if exec.side_uploads() {
            run_steps(&ctx);
        } else {
            let slot = ctx.ops().alloc(4).unwrap();
            let mut block = exec.host_block(16, false).unwrap();
            let e = exec
                .upload_block_on_side(slot.view(), block.as_mut(), 0..16)
                .unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        }
    }
}
