//! Helpers shared by the benches: env-var shapes and interleaved paired timing.
//!
//! The dev machine is shared, so load moves between criterion's groups. [`paired`] alternates
//! the two sides of a comparison run by run and compares their best times, which is the ratio
//! the bench reports; criterion's own figures are printed alongside.

use std::time::Instant;

pub use naive_reference::env::env;

/// Runs side 0 and side 1 of `run` alternately, `reps` times each, and prints both best times
/// and their ratio (side 0 / side 1). One closure runs both sides so they may share buffers.
pub fn paired(label: &str, reps: usize, names: [&str; 2], mut run: impl FnMut(usize)) -> f64 {
    let (mut best_a, mut best_b) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..reps {
        let t = Instant::now();
        run(0);
        best_a = best_a.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        run(1);
        best_b = best_b.min(t.elapsed().as_secs_f64());
    }
    let ratio = best_a / best_b;
    println!(
        "PAIRED {label}: {} best {:.2} ms, {} best {:.2} ms, {}/{} = {ratio:.3} ({reps} alternating runs each)",
        names[0],
        best_a * 1e3,
        names[1],
        best_b * 1e3,
        names[0],
        names[1]
    );
    ratio
}
