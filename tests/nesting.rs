//! Deeply nested kernels: the time to check a kernel must grow about linearly with the depth of
//! its blocks (a walk up the tree per finding, or a guard chain read per access, made it grow
//! with the square of the depth: 16,000 nested `{}` took 11 s).

use gpulint::settings::Settings;
use std::path::Path;
use std::time::{Duration, Instant};

/// A kernel with an unguarded access (a finding is reported) at the bottom of `depth` nested
/// blocks, or of `depth` nested `if`s.
fn kernel(depth: usize, ifs: bool) -> String {
    let mut s = String::from(
        "__global__ void k(float* x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n",
    );
    for d in 0..depth {
        if ifs {
            s.push_str(&format!("if (i < n + {d}) "));
        }
        s.push('{');
    }
    s.push_str(if ifs { "x[i + 1] = 1;" } else { "x[i] = 1;" });
    s.push_str(&"}".repeat(depth));
    s.push_str("\n}\n");
    s
}

/// The best of two runs.
fn time(src: &str) -> Duration {
    (0..2)
        .map(|_| {
            let t = Instant::now();
            let found = gpulint::check_source(Path::new("deep.cu"), src, &Settings::default());
            assert!(!found.is_empty(), "the access at the bottom is reported");
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn assert_linear(depths: [usize; 3], ifs: bool) {
    let t: Vec<Duration> = depths.iter().map(|d| time(&kernel(*d, ifs))).collect();
    // Linear growth is 4x from the first to the last depth, quadratic 16x; allow for noise
    // (and for a fixed cost dominating the small sizes).
    let ratio = t[2].as_secs_f64() / t[0].as_secs_f64().max(1e-3);
    assert!(
        ratio < 9.0,
        "checking {depths:?} nested {} took {t:?}: {ratio:.1}x from the first to the last",
        if ifs { "ifs" } else { "blocks" }
    );
}

#[test]
fn nested_blocks_scale_linearly() {
    assert_linear([8_000, 16_000, 32_000], false);
}

#[test]
fn nested_guards_scale_linearly() {
    assert_linear([2_000, 4_000, 8_000], true);
}
