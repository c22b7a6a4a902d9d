//! Fuzzing on the stable toolchain: the fixtures, mutated (byte flips, insertions, deletions,
//! truncations, splices across files and languages, CRLF and lone-CR line ends, a byte-order
//! mark, NUL bytes, deep nesting, huge lines, invalid UTF-8), are checked in-process as the file
//! kinds gpulint reads (`.py`, `.ipynb`, `.cu`/`.cuh`, `.cpp`, `requirements*.txt`,
//! `pyproject.toml`, `environment.yml`, `setup.py`). No mutant may panic, and none may take
//! longer than the per-mutant bound.
//!
//! The mutants come from a fixed seed, one independent stream per mutant, so a run is the same
//! on every machine and for any number of threads. `cargo test` checks a few hundred;
//! `GPULINT_FUZZ_MUTANTS=100000 cargo test --release --test fuzz` the full run.
//! `GPULINT_FUZZ_SEED` changes the seed; a failure names the mutant's index, so
//! `GPULINT_FUZZ_ONLY=<index>` replays it alone; `GPULINT_FUZZ_TRACE=<dir>` names the mutant
//! a crash that aborts the process (a stack overflow) happened on; `GPULINT_FUZZ_DUMP=<dir>`
//! writes each mutant there, named by its index and the name it is checked as, to replay it
//! with the command line.

use gpulint::settings::Settings;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The names mutants are checked as: each file kind gpulint reads.
const NAMES: &[&str] = &[
    "train.py",
    "notebook.ipynb",
    "kernel.cu",
    "kernel.cuh",
    "op.cpp",
    "requirements.txt",
    "requirements-dev.txt",
    "pyproject.toml",
    "environment.yml",
    "setup.py",
];

/// xorshift64*: small, fast and the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        // SplitMix64 of (seed, stream): independent streams per mutant.
        let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Every fixture file gpulint reads, with the name it is checked under.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if gpulint_syntax_lang(&p) {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                out.push((name, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Is `path` one of the kinds of files the fuzz run mutates (by its name)?
fn gpulint_syntax_lang(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    (name.starts_with("requirements") && name.ends_with(".txt"))
        || name == "pyproject.toml"
        || ((name.starts_with("environment") || name.starts_with("conda"))
            && (name.ends_with(".yml") || name.ends_with(".yaml")))
        || matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("py" | "ipynb" | "cu" | "cuh" | "cpp" | "cc" | "h" | "hpp")
        )
}

/// One mutation of `bytes`, using `other` (another fixture) for splices. Returns what it did.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>, other: &[u8]) -> &'static str {
    let len = bytes.len();
    let at = rng.below(len + 1);
    match rng.below(16) {
        0 => {
            if len > 0 {
                let i = rng.below(len);
                bytes[i] ^= 1 << rng.below(8);
            }
            "bit flip"
        }
        1 => {
            let n = 1 + rng.below(16);
            let ins: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            bytes.splice(at..at, ins);
            "random bytes inserted"
        }
        2 => {
            let n = rng.below(len - at + 1).min(1 + rng.below(256));
            bytes.drain(at..at + n);
            "range deleted"
        }
        3 => {
            bytes.truncate(at);
            "truncated"
        }
        4 => {
            // Splice: a piece of another file (often another language).
            let s = rng.below(other.len() + 1);
            let n = rng.below(other.len() - s + 1).min(1 + rng.below(4096));
            bytes.splice(at..at, other[s..s + n].iter().copied());
            "spliced from another file"
        }
        5 => {
            // Cross-over: this file's head, the other's tail.
            let s = rng.below(other.len() + 1);
            bytes.truncate(at);
            bytes.extend_from_slice(&other[s..]);
            "crossed with another file"
        }
        6 => {
            let mut v = Vec::with_capacity(len + len / 16);
            for &b in bytes.iter() {
                if b == b'\n' {
                    v.push(b'\r');
                }
                v.push(b);
            }
            *bytes = v;
            "CRLF line ends"
        }
        7 => {
            for b in bytes.iter_mut() {
                if *b == b'\n' {
                    *b = b'\r';
                }
            }
            "lone CR line ends"
        }
        8 => {
            bytes.splice(0..0, [0xEF, 0xBB, 0xBF]);
            "byte-order mark"
        }
        9 => {
            bytes.insert(at, 0);
            "NUL byte"
        }
        10 => {
            let depth = 1 + rng.below(20_000);
            let (open, close) = [(b'(', b')'), (b'[', b']'), (b'{', b'}')][rng.below(3)];
            let mut ins = vec![open; depth];
            if rng.below(2) == 0 {
                ins.extend(std::iter::repeat_n(close, depth));
            }
            bytes.splice(at..at, ins);
            "deep nesting"
        }
        11 => {
            let n = 1 + rng.below(200_000);
            let c = [b'a', b' ', b'x', b'+', b'"', b'#', b'/'][rng.below(7)];
            bytes.splice(at..at, std::iter::repeat_n(c, n));
            "huge line"
        }
        12 => {
            let bad: &[&[u8]] = &[
                &[0xFF],
                &[0xC3],
                &[0xE2, 0x82],
                &[0xED, 0xA0, 0x80],
                &[0x80],
            ];
            bytes.splice(at..at, bad[rng.below(bad.len())].iter().copied());
            "invalid UTF-8"
        }
        13 => {
            // A repeated chunk: many functions, kernels or requirements.
            let s = rng.below(len + 1);
            let n = rng.below(len - s + 1).min(2048);
            let chunk = bytes[s..s + n].to_vec();
            let times = 1 + rng.below(64);
            for _ in 0..times {
                bytes.splice(at..at, chunk.iter().copied());
            }
            "chunk repeated"
        }
        14 => {
            // Deeply indented Python blocks or nested braces on their own lines.
            let depth = 1 + rng.below(400);
            let mut ins = Vec::new();
            for d in 0..depth {
                ins.extend(std::iter::repeat_n(b' ', d));
                ins.extend_from_slice(b"if x:\n");
            }
            bytes.splice(at..at, ins);
            "deep indentation"
        }
        _ => {
            let tokens: &[&[u8]] = &[
                b"\"\"\"",
                b"'''",
                b"\\",
                b"/*",
                b"*/",
                b"#",
                b"<<<",
                b">>>",
                b"\"cells\": [",
                b"[tool.gpulint]",
                b"- pip:",
                b"torch==",
                b"-r ",
                b"__global__ void k(",
                b"loss.backward()",
                b"with torch.no_grad():",
                b"# noqa: ",
                b"// NOLINT",
                b"\t",
                b"\x0c",
            ];
            bytes.splice(at..at, tokens[rng.below(tokens.len())].iter().copied());
            "token inserted"
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_fixtures_never_panic_or_hang() {
    let total = env_usize("GPULINT_FUZZ_MUTANTS", 300);
    let seed = env_usize("GPULINT_FUZZ_SEED", 0x9e11_1ea5) as u64;
    let only = std::env::var("GPULINT_FUZZ_ONLY")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    // A debug build is several times slower than a release build.
    let bound = Duration::from_millis(env_usize(
        "GPULINT_FUZZ_BOUND_MS",
        if cfg!(debug_assertions) {
            20_000
        } else {
            5_000
        },
    ) as u64);
    let seeds = seeds();
    assert!(seeds.len() > 50, "the fixtures are found");
    let settings = Settings::default();
    let next = AtomicUsize::new(only.unwrap_or(0));
    let end = only.map_or(total, |i| i + 1);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let slowest: Mutex<(Duration, usize)> = Mutex::new((Duration::ZERO, 0));
    let done = AtomicUsize::new(0);
    // Silence the default panic message of each caught panic (they are listed at the end).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let trace = std::env::var_os("GPULINT_FUZZ_TRACE").map(PathBuf::from);
    let dump = std::env::var_os("GPULINT_FUZZ_DUMP").map(PathBuf::from);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                let mut rng = Rng::new(seed, i as u64);
                let (name, base) = &seeds[rng.below(seeds.len())];
                let (_, other) = &seeds[rng.below(seeds.len())];
                let mut bytes = base.clone();
                let mut did = Vec::new();
                for _ in 0..1 + rng.below(4) {
                    did.push(mutate(&mut rng, &mut bytes, other));
                }
                // Half of the mutants are checked under their own name, half as another kind
                // of file.
                let as_name = if rng.below(2) == 0 {
                    name.as_str()
                } else {
                    NAMES[rng.below(NAMES.len())]
                };
                let path = PathBuf::from("fuzz").join(as_name);
                // A stack overflow aborts the process: with GPULINT_FUZZ_TRACE=<dir>, each
                // thread writes the mutant it is about to check there first.
                if let Some(dir) = &trace {
                    let file = dir.join(format!("{:?}", std::thread::current().id()));
                    std::fs::write(file, format!("{i} {name} as {as_name}: {did:?}\n")).unwrap();
                }
                if let Some(dir) = &dump {
                    std::fs::write(dir.join(format!("{i}-{as_name}")), &bytes).unwrap();
                }
                let t = Instant::now();
                // As the command line reads a file: a NUL byte makes it binary (GL002).
                let result = catch_unwind(AssertUnwindSafe(|| {
                    if let Ok(text) = gpulint_source::decode(bytes.clone()) {
                        gpulint::check_source(&path, &text, &settings);
                    }
                }));
                let took = t.elapsed();
                let what = format!(
                    "mutant {i} ({name} checked as {as_name}, {} bytes: {})",
                    bytes.len(),
                    did.join(", ")
                );
                if let Err(e) = result {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{what} panicked: {msg}"));
                } else if took > bound {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{what} took {took:?} (bound {bound:?})"));
                }
                let mut sl = slowest.lock().unwrap();
                if took > sl.0 {
                    *sl = (took, i);
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    std::panic::set_hook(hook);
    let failures = failures.into_inner().unwrap();
    let (slow, slow_i) = slowest.into_inner().unwrap();
    println!(
        "fuzz: {} mutants (seed {seed:#x}) in {:.1?} on {threads} threads: {} failed; slowest: mutant {slow_i}, {slow:?}",
        done.load(Ordering::Relaxed),
        start.elapsed(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
