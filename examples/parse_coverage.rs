//! How much of a tree's C/C++/CUDA code the parser understood, before and after the
//! line-preserving retry parse (`gpulint::lang::cuda_retry`).
//!
//! ```text
//! cargo run --release --example parse_coverage -- [--list] DIR [DIR …]
//! ```
//!
//! `--list` also prints each kernel still overlapping an error after the retry, with the line of
//! its first error.
//!
//! Prints, for every file gpulint reads as CUDA/C++ and for `.cu`/`.cuh` files alone, the share
//! of files whose tree has any error node, and for `__global__` kernels the share whose body
//! overlaps an error node. Kernels are found in the better (retried) tree and the same byte
//! ranges are then looked up in the first tree, so both figures count the same kernels.

use gpulint::lang::descendants;
use gpulint::lang::{self, Lang};
use std::path::PathBuf;
use tree_sitter::{Node, Tree};

#[derive(Default)]
struct Counts {
    files: usize,
    files_err_first: usize,
    files_err_retry: usize,
    kernels: usize,
    kernels_err_first: usize,
    kernels_err_retry: usize,
}

fn error_ranges(tree: &Tree) -> Vec<(usize, usize)> {
    descendants(tree.root_node())
        .filter(|n| n.is_error() || n.is_missing())
        .map(|n| (n.start_byte(), n.end_byte().max(n.start_byte() + 1)))
        .collect()
}

fn overlaps(ranges: &[(usize, usize)], start: usize, end: usize) -> bool {
    ranges.iter().any(|&(s, e)| s < end && start < e)
}

/// `__global__` function definitions with a body: their byte ranges.
fn kernels(tree: &Tree, text: &str) -> Vec<(usize, usize)> {
    descendants(tree.root_node())
        .filter(|n| n.kind() == "function_definition")
        .filter_map(|n: Node| {
            let body = n.child_by_field_name("body")?;
            let head = text.get(n.start_byte()..body.start_byte())?;
            head.contains("__global__")
                .then_some((n.start_byte(), n.end_byte()))
        })
        .collect()
}

fn main() {
    let mut list = false;
    let roots: Vec<PathBuf> = std::env::args_os()
        .skip(1)
        .filter(|a| {
            let flag = a == "--list";
            list |= flag;
            !flag
        })
        .map(PathBuf::from)
        .collect();
    if roots.is_empty() {
        eprintln!("usage: parse_coverage DIR [DIR …]");
        std::process::exit(2);
    }
    let mut all = Counts::default();
    let mut cu = Counts::default();
    for root in &roots {
        for entry in ignore::WalkBuilder::new(root)
            .standard_filters(false)
            .build()
            .flatten()
        {
            let path = entry.path();
            if !entry.file_type().is_some_and(|t| t.is_file())
                || Lang::of_path(path) != Some(Lang::Cuda)
            {
                continue;
            }
            let Ok(bytes) = std::fs::read(path) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let Some(first) = lang::parse(Lang::Cuda, &text) else {
                continue;
            };
            let first_errors = error_ranges(&first);
            let retry = lang::cuda_retry::reparse(&text, first.clone());
            let retry_errors = error_ranges(&retry);
            let ks = kernels(&retry, &text);
            let name = path.to_string_lossy();
            if list {
                for &(s, e) in &ks {
                    if let Some(&(at, _)) = retry_errors.iter().find(|&&(a, b)| a < e && s < b) {
                        let line = |b: usize| text[..b].matches('\n').count() + 1;
                        println!(
                            "{name}:{}: kernel with an error at line {}",
                            line(s),
                            line(at)
                        );
                    }
                }
            }
            let is_cu = name.ends_with(".cu") || name.ends_with(".cuh");
            for c in std::iter::once(&mut all).chain(is_cu.then_some(&mut cu)) {
                c.files += 1;
                c.files_err_first += usize::from(!first_errors.is_empty());
                c.files_err_retry += usize::from(!retry_errors.is_empty());
                c.kernels += ks.len();
                c.kernels_err_first += ks
                    .iter()
                    .filter(|&&(s, e)| overlaps(&first_errors, s, e))
                    .count();
                c.kernels_err_retry += ks
                    .iter()
                    .filter(|&&(s, e)| overlaps(&retry_errors, s, e))
                    .count();
            }
        }
    }
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    for (label, c) in [("CUDA/C/C++ files", &all), (".cu/.cuh files", &cu)] {
        println!(
            "{label}: {} files, with a parse error: first parse {} ({:.1}%), after retry {} ({:.1}%)",
            c.files,
            c.files_err_first,
            pct(c.files_err_first, c.files),
            c.files_err_retry,
            pct(c.files_err_retry, c.files),
        );
        println!(
            "  __global__ kernels: {}, overlapping an error: first parse {} ({:.1}%), after retry {} ({:.1}%)",
            c.kernels,
            c.kernels_err_first,
            pct(c.kernels_err_first, c.kernels),
            c.kernels_err_retry,
            pct(c.kernels_err_retry, c.kernels),
        );
    }
}
