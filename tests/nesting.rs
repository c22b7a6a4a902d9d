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

/// A device function whose work list is refilled pass after pass (CU012 follows it statement by
/// statement), with `depth` nested blocks around one statement of its inner loop.
fn refilled_list(name: &str, depth: usize) -> String {
    format!(
        "__device__ int {name}(Seg* items, const float* cuts) {{
    int count = 8;
    for (int p = 0; p < 5; ++p) {{
        Seg next[32];
        int filled = 0;
        for (int i = 0; i < count; ++i) {{
            Seg parts[2];
            const int k = split(items[i], cuts[p], parts);
            for (int j = 0; j < k; ++j) {{
                next[filled] = parts[j];
                {}filled++;{}
            }}
        }}
        count = filled;
        for (int i = 0; i < count; ++i) {{
            items[i] = next[i];
        }}
    }}
    return count;
}}
",
        "{".repeat(depth),
        "}".repeat(depth)
    )
}

#[test]
fn statements_nested_past_the_stack_are_not_followed() {
    // Followed statement by statement, 13,687 nested blocks once overflowed the 2 MB stack of
    // a worker thread and aborted the whole run. The deep function is given up (like one
    // whose walk runs out of budget); the same function without the nesting is still reported.
    let src = format!(
        "struct Seg {{ float a, b; }};
__device__ int split(const Seg& s, float cut, Seg* out) {{
    if (s.b <= cut) {{ return 0; }}
    if (s.a >= cut) {{ out[0] = s; return 1; }}
    out[0] = Seg{{s.a, cut}};
    out[1] = Seg{{cut, s.b}};
    return 2;
}}
{}{}",
        refilled_list("deep", 100_000),
        refilled_list("shallow", 0)
    );
    let found = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            gpulint::check_source(Path::new("deep.cu"), &src, &Settings::default())
                .iter()
                .map(|d| (d.code.to_string(), d.location.line))
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .unwrap();
    let cu012: Vec<usize> = found
        .iter()
        .filter(|(code, _)| code == "CU012")
        .map(|(_, line)| *line)
        .collect();
    assert!(
        !cu012.is_empty(),
        "the shallow function is reported: {found:?}"
    );
    assert!(
        cu012.iter().all(|&l| l > 30),
        "only the shallow function (after line 30) is reported: {found:?}"
    );
}
