//! Releasing the events that enqueue calls return: shared by the copies (memory.rs) and the
//! kernel timer (profile.rs), below both.

use opencl3::event::release_event;
use opencl3::types::cl_event;

/// Drops the event every enqueue returns; the command itself is unaffected.
pub(super) fn release(event: cl_event) {
    // SAFETY: `event` was just returned by a successful enqueue call and is released exactly
    // once, here.
    let _ = unsafe { release_event(event) };
}
